"""Per-file cache of the canonical table: a re-run over unchanged files skips parsing."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import polars as pl

from dupfind import __version__
from dupfind.ingest import FileReport
from dupfind.sources import Source, file_identity
from dupfind.textcodes import CODE_TYPE

CACHE_FORMAT = "3"
ENV_DIR = "DUPFIND_CACHE_DIR"
PACKS = "packs"
_PACK_NAME = re.compile(r"[0-9a-f]{32}")


def default_cache_dir() -> Path:
    """DUPFIND_CACHE_DIR, else the platform's user cache location."""
    override = os.environ.get(ENV_DIR)
    if override:
        return Path(override)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "dupfind"
    if sys.platform.startswith("win"):
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "dupfind" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dupfind"


def _pointer(root: str, key: str) -> str:
    """A file key's pointer, `<root>/<key[:2]>/<key>.json` (text, not Path: a first run looks up and
    writes one for every file)."""
    return os.path.join(root, key[:2], f"{key}.json")


@dataclass
class CachedPart:
    """The rows of some files in one pack (`source` their path as given now): coded columns as
    codes into `texts`, which holds the texts of the whole pack (`whole`: these are all its rows;
    else `texts` may hold texts none of them uses)."""

    rows: pl.DataFrame
    texts: pl.Series
    rejects: pl.DataFrame
    whole: bool
    left_out: int  # rows of these files that `within` dropped


@dataclass
class CachedFiles:
    """What the cache holds of some input files: each one's report, and their rows by pack."""

    reports: dict[str, FileReport] = field(default_factory=dict)
    parts: list[CachedPart] = field(default_factory=list)


class TableCache:
    """Entries keyed by a file's absolute path, size and mtime, dupfind's version and the
    effective configuration; anything unreadable is discarded and rebuilt, never trusted.

    The files a run parsed are stored together, as one pack: `packs/<id>/table.arrow` (their
    rows as the assembled table holds them: ids and messages as codes into `texts.arrow`, the
    sorted texts those rows use), `rejects.arrow`, and for each file a pointer
    `<key[:2]>/<key>.json` (the pack, the path its rows carry there, its report). A first run at
    5M lines wrote 4,155 entries of their own, each gathered, decoded to text and written, in
    18.6 s: the pack is one write of the columns as they are."""

    def __init__(self, root: Path, config_digest: str) -> None:
        self.root = root
        self.config_digest = config_digest
        self._real_dirs: dict[str, str] = {}  # for this instance (a command) only: links may change
        self.hits = 0
        self.misses = 0

    def key(self, path: str | Path) -> str | None:
        """The file's key as it is now (None when it cannot be examined)."""
        return self.key_for(file_identity(os.fspath(path), real_dirs=self._real_dirs))

    def key_of(self, source: Source) -> str | None:
        """The key of a listed file, from the stat its listing took (None: standard input, or a
        file that cannot be examined)."""
        return self.key_for(source.identity())

    def key_for(self, identity: str | None) -> str | None:
        """The key of a file of this sources.file_identity (None for None)."""
        if identity is None:
            return None
        text = f"{CACHE_FORMAT}|{__version__}|{identity}|{self.config_digest}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def _pack(self, name: str) -> Path:
        return self.root / PACKS / name

    def load(self, wanted: list[tuple[str, str]], within: Callable[[pl.LazyFrame], pl.LazyFrame] | None = None) -> CachedFiles:
        """The cached files among `wanted` (path as given now, key), their rows filtered by
        `within` as they are read; a damaged pointer or pack is removed, and its files count as
        misses (they are parsed again)."""
        found = CachedFiles()
        by_pack: dict[str, dict[str, tuple[str, FileReport, str]]] = {}  # pack -> stored path -> (path now, report, pointer)
        root = str(self.root)
        for path, key in wanted:
            pointer = _pointer(root, key)
            try:
                with open(pointer, "rb") as fh:
                    data = orjson.loads(fh.read())
                pack, stored = data["pack"], data["source"]
                if not (isinstance(pack, str) and _PACK_NAME.fullmatch(pack) and isinstance(stored, str)):
                    raise ValueError("not a pointer to a pack")
                report = FileReport.from_state(data["report"], path)
            except OSError:
                continue  # none (or an unreadable cache directory): parsed
            except Exception:  # a corrupt or foreign pointer: drop it and parse the file again
                with contextlib.suppress(OSError):
                    os.unlink(pointer)
                continue
            by_pack.setdefault(pack, {})[stored] = (path, report, pointer)
        for pack, files in by_pack.items():
            part = self._read_pack(pack, files, within)
            if part is None:
                continue
            found.parts.append(part)
            for path, report, pointer in files.values():
                found.reports[path] = report
                with contextlib.suppress(OSError):
                    os.utime(pointer)  # recently used: kept by the result cache's pruning of old entries
        self.hits += len(found.reports)
        self.misses += len(wanted) - len(found.reports)
        return found

    def _read_pack(self, pack: str, files: dict[str, tuple[str, FileReport, str]],
                   within: Callable[[pl.LazyFrame], pl.LazyFrame] | None) -> CachedPart | None:
        """The rows and rejects of these files (stored path -> path now, report, pointer) in one pack,
        their paths as given now; files whose rows are not all there are left out of `files`."""
        where = self._pack(pack)
        try:
            scan = pl.scan_ipc(where / "table.arrow")
            schema = scan.collect_schema()
            texts = pl.read_ipc(where / "texts.arrow").to_series()
            rejects = pl.read_ipc(where / "rejects.arrow")
            if texts.dtype != pl.String or "source" not in schema:
                raise ValueError("not a pack")
            counts = dict(scan.group_by(pl.col("source").cast(pl.String)).len().collect().iter_rows())
            packed = set(counts) | set(rejects["source"].cast(pl.String).unique().to_list())  # a file may have only rejects
        except Exception:  # a corrupt or foreign pack: drop it and parse its files again
            shutil.rmtree(where, ignore_errors=True)
            return None
        for name, (_, report, _) in list(files.items()):
            if counts.get(name, 0) != report.records:
                del files[name]  # parsed again, and stored again with the other files parsed
        if not files:
            return None
        stored = pl.Series("stored", list(files), dtype=pl.String)
        now = pl.Series("now", [p for p, _, _ in files.values()], dtype=pl.String)
        every_file = packed <= set(files)  # every file of the pack wanted: no row to filter out

        def moved(frame):
            source = pl.col("source").cast(pl.String)
            if not every_file:
                frame = frame.filter(source.is_in(stored.to_list()))
            return frame.with_columns(source.replace_strict(stored, now))

        try:
            # The rows of other files, or outside `within`, are dropped as the pack is read.
            rows = (within(moved(scan)) if within is not None else moved(scan)).collect()
            codes = [c for c, t in schema.items() if t == CODE_TYPE]
            top = rows.select(pl.max_horizontal(pl.col(codes).max())).item() if codes and rows.height else None
            if top is not None and top >= texts.len():
                raise ValueError("codes beyond the pack's texts")
        except Exception:
            shutil.rmtree(where, ignore_errors=True)
            return None
        with contextlib.suppress(OSError):
            os.utime(where)  # recently used: kept by the result cache's pruning of old entries
        held = sum(counts.get(name, 0) for name in files)
        return CachedPart(rows, texts, moved(rejects), whole=rows.height == sum(counts.values()), left_out=held - rows.height)

    def store(self, reports: dict[str, FileReport], table: pl.DataFrame, texts: pl.Series, rejects: pl.DataFrame) -> None:
        """One pack of these files' rows (coded columns as codes into `texts`, which holds exactly
        the texts they use), rejects and reports, then each file's pointer to it."""
        name = uuid.uuid4().hex
        staging: Path | None = None
        try:
            packs = self.root / PACKS
            packs.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=packs))
            table.write_ipc(staging / "table.arrow", compression="lz4")
            texts.rename("text").to_frame().write_ipc(staging / "texts.arrow", compression="lz4")
            rejects.write_ipc(staging / "rejects.arrow", compression="lz4")
            os.replace(staging, packs / name)
            staging = None
            # A pointer a file (20,000 files: 1.9 s through Path objects and a mkdir each).
            root, shards = str(self.root), set()
            for key, report in reports.items():
                pointer = _pointer(root, key)
                shard = os.path.dirname(pointer)
                if shard not in shards:
                    os.makedirs(shard, exist_ok=True)
                    shards.add(shard)
                body = orjson.dumps({"pack": name, "source": report.path, "report": report.to_state()})
                temporary = os.path.join(shard, f".tmp-{name}-{key}.json")
                with open(temporary, "wb") as out:
                    out.write(body)
                os.replace(temporary, pointer)
        except OSError:
            pass  # a read-only or full cache directory must never break an analysis
        finally:
            if staging is not None:  # not stored (an error, or Ctrl-C): nothing half-written is left
                shutil.rmtree(staging, ignore_errors=True)
