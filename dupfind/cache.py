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
from typing import Any

import orjson
import polars as pl

from dupfind import __version__, textcodes
from dupfind.atomic_files import write_atomic
from dupfind.ingest_result import FileReport
from dupfind.sources import IDENTITY_FIELDS, file_identity

CACHE_FORMAT = "33"  # 5: a pack may hold near-empty columns apart (APART_NAME); 6: crash reports are records; 7: Node's too, bare `Error:` lines; 8: .NET's, PHP's, Ruby's; 9: Node's first line joins the record before it; 10: V8's and CPython's fatal errors; 11: a name's words before its trailing pairs classified; 12: and before a logger's name in brackets; 13: worker_events holds a worker's lease expiries outside any action; 14: timeouts in milliseconds, RabbitMQ's stated consumer timeout; 15: single-quoted pair values, Dramatiq's actor lines, echoes by moment, a start tied to another log's ack, gaps after a kill; 16: fields a record's continuation lines state (Kafka's max.poll.interval.ms); 17: a lock denied is a guard, nodes of one host, Redis's log; 18: the JVM's out of memory exit, a crash report after a framework's line; 19: DF105 names its publishers; 20: the deploy summary's redeliveries leave a second publish's runs out; 21: a receive and an ack go with their own message's run; 22: celery beat's publishes; 23: a schedule entry is its send's object_name (DF108); 24: library lines (APScheduler), RQ's work-horse killed, Dramatiq's prefetch; 25: a batch's job ids link nothing (GlueWarning.batch); 26: timeout_name, a stated timeout as its platform names it; 27: a logfmt line's text beside its pairs, a logger's bracketed context not in a name; 28: a framework's run lines another format of the file tells again are echoes (Sidekiq beside ActiveJob); 29: actions all told again (told_again) left out of the summary's count; 30: the service column, an action split by handler (a fan-out); 31: a Kafka record's coordinates in its consumer group are its job id; 32: actions' fan_out, execution durations' service; 33: a Kafka listener's line takes its consumer thread's topic, a line of an envelope whose time is optional its own time
ENV_DIR = "DUPFIND_CACHE_DIR"
PACKS = "packs"
APART_NAME = "apart.arrow"  # a pack's columns held apart from its table: rid and their values
INDEXES = "dirs"
# The packs' total size on disk, kept most recently used first (the pack just stored always
# stays). A pack holds about a tenth of its files' bytes (44 MB for a 1M-line, 403 MB export):
# this keeps dozens of exports, and an analysis of the same files is kept whole by its set
# entry anyway (result_cache). Packs are also removed once unused for 30 days.
PACKS_MAX_BYTES = 2 << 30
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


# Less free space than this on the cache's disk is said (cache_dir_problem): a first run at 1M
# lines keeps about 0.2 GB there.
LOW_SPACE_BYTES = 64 << 20


def cache_dir_problem(root: Path) -> str | None:
    """Why the cache directory cannot keep what a run stores (it is created when missing), as the
    rest of a sentence about it; None when it can. Every cache read and write stays quiet about
    failures (an unusable cache only means no cache), so this is said instead, once a command."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return "is not a directory: nothing is kept for the next run"
    except OSError as exc:
        return f"cannot be created ({exc.strerror or type(exc).__name__}): nothing is kept for the next run"
    if not os.access(root, os.W_OK | os.X_OK):
        return "is not writable: nothing new is kept for the next run"
    return cache_space_problem(root)


def cache_space_problem(root: Path) -> str | None:
    """The cache's disk nearly full (a write that failed for want of space removed what it had
    written), as the rest of a sentence about the directory; None otherwise or when unknown."""
    try:
        free = shutil.disk_usage(root).free
    except OSError:
        return None
    if free >= LOW_SPACE_BYTES:
        return None
    return f"has {free >> 10} KiB free on its disk: what a run keeps for the next may not fit"


def _located(identity: str) -> tuple[str, str]:
    """The (resolved) directory of the file of this sources.file_identity, and its name there."""
    return os.path.split(identity.rsplit("|", IDENTITY_FIELDS)[0])


def _entry(entry: Any) -> tuple[str, str, str] | None:
    """An index entry as (key, pack, the path its rows carry there); None when it is damaged."""
    if isinstance(entry, list) and len(entry) == 3 and all(isinstance(part, str) for part in entry) \
            and _PACK_NAME.fullmatch(entry[1]):
        return entry[0], entry[1], entry[2]
    return None


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
    """Entries keyed by a file's identity (sources.file_identity), dupfind's version and
    the effective configuration; anything unreadable is discarded and rebuilt, never trusted.

    The files a run parsed are stored together, as one pack: `packs/<id>/table.arrow` (their
    rows as the assembled table holds them: ids and messages as codes into `texts.arrow`, the
    sorted texts those rows use), `rejects.arrow` and `reports.json` (each file's report). Each
    directory of inputs has an index, `dirs/<id>.json`: for each file of it stored, its key, its
    pack and the path its rows carry there. A first run at 5M lines wrote 4,155 entries of their
    own, each gathered, decoded to text and written, in 18.6 s: the pack is one write of the
    columns as they are. A pointer file per input then cost 1-3 s after the report for 20,000 small files:
    an index is one read and one write for all the files of a directory."""

    def __init__(self, root: Path, config_digest: str) -> None:
        self.root = root
        self.config_digest = config_digest
        self._real_dirs: dict[str, str] = {}  # for this instance (a command) only: links may change
        self.hits = 0
        self.misses = 0

    def identity(self, path: str | Path) -> str | None:
        """sources.file_identity of the file as it is now (None when it cannot be examined)."""
        return file_identity(os.fspath(path), real_dirs=self._real_dirs)

    def key(self, path: str | Path) -> str | None:
        """The file's key as it is now (None when it cannot be examined)."""
        return self.key_for(self.identity(path))

    def key_for(self, identity: str | None) -> str | None:
        """The key of a file of this sources.file_identity (None for None)."""
        if identity is None:
            return None
        text = f"{CACHE_FORMAT}|{__version__}|{identity}|{self.config_digest}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def _pack(self, name: str) -> Path:
        return self.root / PACKS / name

    def _index(self, directory: str) -> str:
        """The index of a (resolved) directory of inputs, for this configuration."""
        text = f"{CACHE_FORMAT}|{__version__}|{directory}|{self.config_digest}"
        return os.path.join(self.root, INDEXES, hashlib.sha256(text.encode()).hexdigest()[:32] + ".json")

    @staticmethod
    def _read_index(index: str, directory: str) -> dict[str, Any]:
        """An index's entries by file name, each [key, pack, the path its rows carry there] ({}
        when there is none); a damaged or foreign index is removed."""
        try:
            with open(index, "rb") as fh:
                data = orjson.loads(fh.read())
            if not (isinstance(data, dict) and data.get("dir") == directory and isinstance(data.get("files"), dict)):
                raise ValueError("not the index of this directory")
            return data["files"]
        except OSError:
            return {}  # none (or an unreadable cache directory)
        except ValueError:  # orjson's errors are ValueErrors too
            with contextlib.suppress(OSError):
                os.unlink(index)
            return {}

    def load(self, wanted: list[tuple[str, str]], within: Callable[[pl.LazyFrame], pl.LazyFrame] | None = None) -> CachedFiles:
        """The cached files among `wanted` (path as given now, sources.file_identity), their rows
        filtered by `within` as they are read; a damaged index or pack is removed, and its files
        count as misses (they are parsed again)."""
        found = CachedFiles()
        by_dir: dict[str, list[tuple[str, str, str | None]]] = {}  # directory -> (path now, name, key)
        for path, identity in wanted:
            directory, name = _located(identity)
            by_dir.setdefault(directory, []).append((path, name, self.key_for(identity)))
        by_pack: dict[str, dict[str, tuple[str, str]]] = {}  # pack -> stored path -> (path now, index)
        for directory, files in by_dir.items():
            index = self._index(directory)
            entries = self._read_index(index, directory)
            for path, name, key in files:
                entry = _entry(entries.get(name))
                if entry is None or entry[0] != key:
                    continue  # not stored, stored as the file was before, or damaged: parsed (and stored) again
                _, pack, stored = entry
                by_pack.setdefault(pack, {})[stored] = (path, index)
        used: set[str] = set()
        for pack, wanted_here in by_pack.items():
            files = self._reports(pack, wanted_here)
            part = self._read_pack(pack, files, within) if files else None
            if part is None:
                continue
            found.parts.append(part)
            for path, report, index in files.values():
                found.reports[path] = report
                used.add(index)
        for index in used:
            with contextlib.suppress(OSError):
                os.utime(index)  # recently used: kept by the result cache's pruning of old entries
        self.hits += len(found.reports)
        self.misses += len(wanted) - len(found.reports)
        return found

    def _reports(self, pack: str, files: dict[str, tuple[str, str]]) -> dict[str, tuple[str, FileReport, str]]:
        """The reports of these files (stored path -> path now, index) in one pack: stored path ->
        (path now, report, index); a file without a valid report is left out (parsed again), a
        pack whose reports cannot be read is removed."""
        try:
            with open(self._pack(pack) / "reports.json", "rb") as fh:
                states = orjson.loads(fh.read())
            if not isinstance(states, dict):
                raise ValueError("not the reports of a pack")  # noqa: TRY004 (data, not a caller's type)
        except OSError:
            return {}  # pruned meanwhile, never there, or unreadable
        except ValueError:
            shutil.rmtree(self._pack(pack), ignore_errors=True)
            return {}
        found: dict[str, tuple[str, FileReport, str]] = {}
        for stored, (path, index) in files.items():
            with contextlib.suppress(ValueError, TypeError, KeyError):
                found[stored] = (path, FileReport.from_state(states.get(stored), path), index)
        return found

    def _read_pack(self, pack: str, files: dict[str, tuple[str, FileReport, str]],
                   within: Callable[[pl.LazyFrame], pl.LazyFrame] | None) -> CachedPart | None:
        """The rows and rejects of these files (stored path -> path now, report, index) in one pack,
        their paths as given now; files whose rows are not all there are left out of `files`."""
        where = self._pack(pack)
        try:
            scan = pl.scan_ipc(where / "table.arrow")
            texts = pl.read_ipc(where / "texts.arrow").to_series()
            rejects = pl.read_ipc(where / "rejects.arrow")
            stored = scan.collect_schema()
            if texts.dtype != pl.String or "source" not in stored:
                raise ValueError("not a pack")
            counts = dict(scan.group_by(pl.col("source").cast(pl.String)).len().collect().iter_rows())
            if (where / APART_NAME).exists():  # columns stored apart, put back in their rows
                apart = pl.read_ipc(where / APART_NAME)
                if "rid" not in apart.columns or set(apart.columns) & set(stored):
                    raise ValueError("not the columns of a pack")
                scan = scan.with_row_index("rid").join(apart.lazy(), on="rid", how="left", maintain_order="left").drop("rid")
            schema = scan.collect_schema()
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
            codes = [c for c, t in schema.items() if t == textcodes.CODE_TYPE]
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

    def store(self, reports: dict[str, FileReport], table: pl.DataFrame, texts: pl.Series, rejects: pl.DataFrame,
              apart: pl.DataFrame | None = None) -> None:
        """One pack of these files' rows (`reports` by sources.file_identity; coded columns as codes
        into `texts`, which holds exactly the texts they use), rejects and reports, then each
        file's entry in the index of its directory. `apart`: columns of the rows held apart from
        `table` (correlate.held_apart: `rid`, a row's position, and the values of the rows that
        have one), stored as they are and put back in their rows when the pack is read."""
        name = uuid.uuid4().hex
        staging: Path | None = None
        try:
            packs = self.root / PACKS
            packs.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=packs))
            table.write_ipc(staging / "table.arrow", compression="lz4")
            if apart is not None:
                apart.write_ipc(staging / APART_NAME, compression="lz4")
            texts.rename("text").to_frame().write_ipc(staging / "texts.arrow", compression="lz4")
            rejects.write_ipc(staging / "rejects.arrow", compression="lz4")
            (staging / "reports.json").write_bytes(orjson.dumps({r.path: r.to_state() for r in reports.values()}))
            os.replace(staging, packs / name)
            staging = None
            by_dir: dict[str, dict[str, list[str]]] = {}
            for identity, report in reports.items():
                directory, file_name = _located(identity)
                by_dir.setdefault(directory, {})[file_name] = [self.key_for(identity), name, report.path]
            os.makedirs(os.path.join(self.root, INDEXES), exist_ok=True)
            for directory, entries in by_dir.items():
                self._merge_index(directory, entries)
            self._bound_packs(keep=name)
        except OSError:
            pass  # a read-only or full cache directory must never break an analysis
        finally:
            if staging is not None:  # not stored (an error, or Ctrl-C): nothing half-written is left
                shutil.rmtree(staging, ignore_errors=True)

    def _bound_packs(self, keep: str) -> None:
        """Remove the least recently used packs (a read refreshes a pack's mtime) beyond
        PACKS_MAX_BYTES in all; `keep`, the pack just stored, stays. An index entry whose pack
        is gone is a miss: its file is parsed again. A command reading a pack as it goes finds it
        damaged, and parses those files again."""
        packs = self.root / PACKS
        found = []
        for entry in os.scandir(packs):
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue  # a staging folder (pruned by the result cache once old)
            with contextlib.suppress(OSError):
                size = sum(f.stat(follow_symlinks=False).st_size for f in os.scandir(entry.path))
                found.append((entry.name == keep, entry.stat(follow_symlinks=False).st_mtime_ns, entry.name, size))
        total = 0
        for kept, _, name, size in sorted(found, reverse=True):  # the kept pack, then the newest
            total += size
            if total > PACKS_MAX_BYTES and not kept:
                shutil.rmtree(packs / name, ignore_errors=True)

    def _merge_index(self, directory: str, entries: dict[str, list[str]]) -> None:
        """Write these entries into the directory's index, keeping those of its other files that
        still exist and whose pack is still there. Two runs storing into one index at once: the
        last write wins, and the files of the other are parsed again next time."""
        index = self._index(directory)
        kept: dict[str, Any] = {}
        packs: dict[str, bool] = {}
        for file_name, entry in self._read_index(index, directory).items():
            valid = _entry(entry)
            if file_name in entries or valid is None:
                continue
            pack = valid[1]
            if pack not in packs:
                packs[pack] = self._pack(pack).is_dir()
            if packs[pack] and os.path.exists(os.path.join(directory, file_name)):
                kept[file_name] = entry
        kept.update(entries)
        write_atomic(index, orjson.dumps({"dir": directory, "files": kept}))
