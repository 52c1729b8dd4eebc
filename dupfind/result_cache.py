"""Whole-input result cache: a second command over the same unchanged files skips ingestion,
correlation and (for the same rules and options) the detectors.

Layout under the cache directory (beside the packs and directory indexes of cache.TableCache):

    sets/<set key>/meta.json            format, key, correlation warnings, and for each frame
                                        its rows, bytes, CRC-32 and schema
    sets/<set key>/files.json           the file reports (checked like meta.json), read only by a
                                        command that shows them
    sets/<set key>/{actions,executions,rejects}.arrow
                                        the actions and executions frames and the ingest rejects
                                        (Arrow IPC, LZ4)
    sets/<set key>/table-<part>.arrow   the correlated table (rid, action_id, exec_id) in parts of
                                        TABLE_PART_ROWS rows: a warm command reads the columns it
                                        needs, or the few parts that hold the rows it shows
    Every frame file is Arrow IPC streams of a few columns each, one after the other
    (CATEGORICALS_PER_STREAM); the meta gives each stream's columns, bytes and CRC-32.
    sets/<set key>/analyses/<analysis key>.json, .findings
                                        the rest of an AnalysisReport and its findings, exactly
                                        (exact_json, one finding a line, values then evidence; their
                                        rules, fingerprints, severities, harm and causes in the
                                        .json so a command decodes only the findings it shows and
                                        counts the others undecoded), for one rule set and
                                        --skew/--timeout
    sets/<set key>/analyses/<value key>.value.json
                                        a value derived from one analysis (the stats tables) or
                                        from the set (the ids redaction protects) for the options
                                        that shape it
    sets/<set key>/analyses/<value key>.out
                                        a rendered report (analyze in a format, a trace, each
                                        timeline view) and its note for stderr, for the options
                                        it used
    sets/<set key>/facts/<context key>/<name>/
                                        frames an AnalysisContext derived (side effects, deploy
                                        model, ...) for one --skew and timeouts (ContextFacts)

A set key covers the ordered inputs (each one's path as given and its per-file key: resolved
path, size, mtime, change time, inode, dupfind version, configuration digest), the --since/--until bounds, the
configuration digest, --max-jobs-per-value, the dupfind version, the polars version and the
fingerprint of dupfind's own source files (so an edited checkout never reads stale results).
An analysis key adds the rules (every field of every rule, --disable included), --skew and the
visibility timeouts (configuration and --timeout).

Nothing is trusted unchecked: meta.json and analysis files carry a CRC-32 of their body; a frame
is checked against its recorded size and CRC-32 before it is read, then against its row count
and schema. An entry that fails any check is deleted and rebuilt. Writes go to a staging
directory or file renamed into place; an unwritable cache only means no cache. The frames of a
set are read lazily: `analyze --format json` over a cached analysis never reads the table, a
trace reads a few columns and the parts that hold its records.

Growth is bounded: the KEEP_SETS most recently used sets are kept (a hit refreshes an entry's
mtime); per set, the KEEP_ANALYSES most recent analyses, documents and outputs within
ANALYSES_MAX_BYTES; packs, directory indexes and size estimates unused for FILE_ENTRY_MAX_AGE_S are removed (checked at most
once a day), and packs beyond cache.PACKS_MAX_BYTES in all, least recently used first, as each is stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import shutil
import tempfile
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, fields, is_dataclass
from functools import cached_property, lru_cache, partial
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import polars as pl

from dupfind import __version__, background
from dupfind.atomic_files import place_chunks, write_atomic, write_staged
from dupfind.cache import INDEXES, PACKS
from dupfind.correlate import Correlation, GlueWarning
from dupfind.errors import DupfindError
from dupfind.ingest_result import FileReport, IngestResult
from dupfind.mapped_file import MappedFile, close_mapped, map_file
from dupfind.textcodes import Texts

SET_FORMAT = "9"  # 8: executions hold work_end; crash reports are records (dupfind.crashes); 9: and work_pid
FILES_NAME = "files.json"  # the file reports, read when a command needs them (20,000 took 0.3 s to parse)
ANALYSIS_FORMAT = "5"
VALUE_FORMAT = "value-1"
FACT_FORMAT = "fact-1"
BLOB_FORMAT = "out-1"
OUTPUT_SUFFIX = ".out"  # a stored report; other rendered parts (pipeline.rendered_key) have their own
# Frames a context derived are stored up to this size: at 5M lines the side effects alone take
# ~0.2 GB in memory, and deriving them again means reading the whole table (3.5 s there).
FACT_MAX_BYTES = 1 << 30
FACT_VALUE_MAX_BYTES = 64 << 20  # a JSON value decodes far slower than a frame
FACT_VALUE_MAX_ITEMS = 10_000  # and a value of more items is not even tried
VALUE_FACT_MIN_S = 0.05
TEXTS_SLICE = 16_384  # texts made Python strings at once by ResultCache.texts_value_body
STORED_FACTS = "_stored_facts"  # the attribute of a context that holds its ContextFacts
SETS_DIR = "sets"
FRAMES = ("actions", "executions", "rejects", "texts")  # and the table, in parts
TABLE_PART_ROWS = 1 << 16
PARTS_PER_SCAN = 16
MAX_OPEN_PARTS = 256  # descriptors kept open per set entry (the usual limit is 1024 a process)
COMPRESSION = "lz4"
# A rendered report at least this large is stored on a thread of its own while the command writes
# it out: both are mostly system calls, which release the GIL (a 534 MB timeline: 0.41 s storing).
BACKGROUND_BLOB_BYTES = 8 << 20
# Categorical columns per Arrow IPC stream of a frame file. polars writes a Categorical column
# with a map as large as its whole string pool (every text the process has seen), and holds the
# maps of all columns of a stream at once: one stream of a 5M-line table part took 2 GB for a
# moment. And reading any column of a stream decodes the dictionaries of all its Categorical
# columns (reading `rid` decoded `message`'s texts). So each Categorical column has a stream of
# its own, with the other columns that follow it.
CATEGORICALS_PER_STREAM = 1
KEEP_SETS = 4
KEEP_ANALYSES = 32
ANALYSES_MAX_BYTES = 1 << 30  # and at most this much of them (a timeline JSON of 1M lines is ~100 MB)
FILE_ENTRY_MAX_AGE_S = 30 * 86400
PRUNE_EVERY_S = 86400
_HEADER = b"dupfind-cache"


class CorruptEntry(Exception):
    """A cache entry that failed a check: it is deleted, and the result rebuilt."""


class _InexactFinding(Exception):
    """A finding its stored state would not give back exactly: the analysis is not stored."""


def _polars_install() -> str:
    """The polars installed, told apart without loading it (`pl.__version__` would load its library,
    0.3 s that a command answered from the cache does not otherwise spend): the path, size and
    mtime of its package's `__init__.py`, which an install of another version writes again."""
    spec = importlib.util.find_spec("polars")
    try:
        stat = os.stat(spec.origin)
    except (OSError, TypeError, AttributeError):  # no file to stat (a frozen or zipped install)
        return pl.__version__
    return f"{spec.origin}|{stat.st_size}|{stat.st_mtime_ns}"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Names, sizes and mtimes of dupfind's source and rules files: an edited checkout is another code."""
    package = Path(__file__).resolve().parent
    roots = [package]
    try:
        from dupfind.config import default_rules_dir

        roots.append(default_rules_dir())
    except DupfindError:  # no rules folder: loading the configuration says so
        pass
    digest = hashlib.sha256(f"{__version__}|{_polars_install()}".encode())
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            for name in sorted(files):
                if name.endswith((".py", ".toml")):
                    try:
                        stat = os.stat(os.path.join(folder, name))
                    except OSError:
                        continue
                    digest.update(f"{folder}/{name}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _digest(payload: Any) -> str:
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()[:32]


def _check_line(chunks: tuple[bytes, ...], fmt: str) -> bytes:
    """The line a checked file starts with: format, CRC-32 and length of the body (these chunks)."""
    crc = 0
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
    return _check_header(fmt, crc, sum(len(c) for c in chunks))


def _check_header(fmt: str, crc: int, size: int, width: int = 0) -> bytes:
    """The check line of a body of this CRC-32 and size, its size zero-padded to `width` digits."""
    return b"%s %s %08x %0*d\n" % (_HEADER, fmt.encode(), crc, width, size)


def _checked(body: bytes, fmt: str) -> bytes:
    return _check_line((body,), fmt) + body


def _unchecked(raw: bytes, fmt: str, start: int = 0) -> memoryview:
    """The body of a checked file (from `start` in `raw`), not copied; CorruptEntry when its
    header, length or CRC-32 do not match."""
    end = raw.find(b"\n", start)
    parts = raw[start:end].split(b" ") if end >= 0 else []
    if len(parts) != 4 or parts[0] != _HEADER or parts[1] != fmt.encode():
        raise CorruptEntry("not a cache file of this format")
    body = memoryview(raw)[end + 1:]
    if int(parts[3]) != len(body) or int(parts[2], 16) != zlib.crc32(body):
        raise CorruptEntry("length or checksum differs")
    return body


def _schema(frame: pl.DataFrame) -> list[list[str]]:
    return [[name, str(dtype)] for name, dtype in frame.schema.items()]


def _column_streams(frame: pl.DataFrame) -> list[list[str]]:
    """The frame's columns in order, cut into runs of at most CATEGORICALS_PER_STREAM Categorical columns."""
    streams: list[list[str]] = [[]]
    categoricals = 0
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.Categorical):
            if categoricals == CATEGORICALS_PER_STREAM:
                streams.append([])
                categoricals = 0
            categoricals += 1
        streams[-1].append(name)
    return streams


class _CheckedWriter(io.RawIOBase):
    """A file that counts the bytes written through it and their CRC-32, so far and since `mark`."""

    def __init__(self, out: BinaryIO) -> None:
        super().__init__()
        self.out = out
        self.size = self.crc = self.part_size = self.part_crc = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.out.write(data)
        self.crc, self.part_crc = zlib.crc32(data, self.crc), zlib.crc32(data, self.part_crc)
        written = memoryview(data).nbytes
        self.size += written
        self.part_size += written
        return written

    def mark(self) -> tuple[int, int]:
        """(bytes, CRC-32) written since the last mark."""
        part = (self.part_size, self.part_crc)
        self.part_size = self.part_crc = 0
        return part


def _write_frame(path: Path, frame: pl.DataFrame) -> dict[str, Any]:
    """Write a frame as LZ4 Arrow IPC streams of a few columns each, one after the other (see
    CATEGORICALS_PER_STREAM); what `_read_frame` checks it against (for the meta): the whole
    file's size and CRC-32, and each stream's columns, size and CRC-32. polars writes each stream
    into the file as it encodes it, in pieces (a stream held whole in a buffer first took 6-12 MiB
    more to write each of the larger frames of a first run's cache writes at 1M lines)."""
    streams = []
    with path.open("wb") as out:
        checked = _CheckedWriter(out)
        for names in _column_streams(frame):
            frame.select(names).write_ipc(checked, compression=COMPRESSION)
            size, crc = checked.mark()
            streams.append([len(names), size, crc])
    return {"rows": frame.height, "bytes": checked.size, "crc32": checked.crc, "schema": _schema(frame), "streams": streams}


def _stream_bounds(info: dict[str, Any]) -> list[tuple[int, int, int, int, int]]:
    """(first column, last column + 1, first byte, last byte + 1, CRC-32) of each stream of a frame file."""
    bounds, column, at = [], 0, 0
    for columns, size, crc in info["streams"]:
        bounds.append((column, column + columns, at, at + size, crc))
        column += columns
        at += size
    if at != info["bytes"] or column != len(info["schema"]):
        raise CorruptEntry("the streams of a frame do not add up to it")
    return bounds


def _wanted_streams(info: dict[str, Any], names: list[str] | None) -> list[tuple[list[str], int, int, int]]:
    """The streams of a frame file that hold any of `names` (all when None): (those names, first
    byte, last byte + 1, CRC-32)."""
    columns = [name for name, _ in info["schema"]]
    wanted = None if names is None else set(names)
    found = []
    for first, last, start, end, crc in _stream_bounds(info):
        held = [c for c in columns[first:last] if wanted is None or c in wanted]
        if held:
            found.append((held, start, end, crc))
    return found


def _read_streams(raw: bytes | memoryview, info: dict[str, Any], names: list[str] | None = None) -> list[tuple[list[str], memoryview]]:
    """The streams of a frame file's checked bytes that hold any of `names` (all when None): (those names, bytes)."""
    view = memoryview(raw)
    return [(held, view[start:end]) for held, start, end, _ in _wanted_streams(info, names)]


def _verified(raw: bytes, info: dict[str, Any], name: str) -> bytes:
    if len(raw) != info["bytes"] or zlib.crc32(raw) != info["crc32"]:
        raise CorruptEntry(f"{name} differs from its checksum")
    return raw


def _streams_at(fd: int, info: dict[str, Any], name: str, names: list[str] | None = None) -> list[tuple[list[str], bytes]]:
    """Like `_read_streams`, but only the wanted streams' bytes are read from the open file, each
    checked against its own CRC-32 (a command that needs two columns of a part reads those)."""
    found = []
    for held, start, end, crc in _wanted_streams(info, names):
        raw = os.pread(fd, end - start, start)
        if len(raw) != end - start or zlib.crc32(raw) != crc:
            raise CorruptEntry(f"{name} differs from its checksum")
        found.append((held, raw))
    return found


def _checked_shape(frame: pl.DataFrame, rows: int, schema: list[list[str]], name: str) -> pl.DataFrame:
    if frame.height != rows or _schema(frame) != schema:
        raise CorruptEntry(f"{name} has other rows or columns")
    return frame


def _read_frame(path: Path, info: dict[str, Any]) -> pl.DataFrame:
    """A frame `_write_frame` wrote, checked against its size and CRC-32 before it is read and its
    rows and schema after; CorruptEntry when anything differs."""
    raw = _verified(path.read_bytes(), info, path.name)
    return _frame_of(_read_streams(raw, info), info, path.name)


def _frame_of(streams: list[tuple[list[str], bytes | memoryview]], info: dict[str, Any], name: str) -> pl.DataFrame:
    """The frame of all its streams' bytes, checked against its rows and schema."""
    if len(streams) == 1:
        frame = pl.read_ipc(io.BytesIO(streams[0][1]))
    else:  # the streams decoded side by side
        frame = pl.concat(pl.collect_all([pl.scan_ipc(io.BytesIO(data)) for _, data in streams]), how="horizontal")
    return _checked_shape(frame, info["rows"], info["schema"], name)


def _finding_line(state: dict[str, Any]) -> bytes:
    """A finding's state as one line: its values, a tab, its evidence (a finding shown without
    its evidence parses only the text before the tab, which compact JSON never holds raw)."""
    return orjson.dumps(state["values"]) + b"\t" + orjson.dumps(state["evidence"])


def _finding_of_line(line: bytes, evidence: bool) -> Any:
    from dupfind.findings import Finding

    values, tab, rest = line.partition(b"\t")
    if not tab:
        raise CorruptEntry("a finding line without its evidence")
    return Finding.from_state({"values": orjson.loads(values), "evidence": orjson.loads(rest) if evidence else []}, evidence)


def _set_frames(result: IngestResult, correlation: Correlation) -> dict[str, pl.DataFrame]:
    """The frames of a set entry but its table: FRAMES."""
    return {"actions": correlation.actions, "executions": correlation.executions, "rejects": result.rejects,
            "texts": correlation.texts.values.to_frame("text")}


def _part_name(index: int) -> str:
    return f"table-{index:04d}.arrow"


def _report_from_state(data: dict[str, Any]) -> FileReport:
    try:
        return FileReport.from_state(data)
    except (TypeError, ValueError) as exc:
        raise CorruptEntry(f"cached file report unusable: {exc}") from exc


class CachedCorrelation(Correlation):
    """A Correlation whose frames are read from a set entry when first used."""

    def __init__(self, entry: SetEntry, warnings: list[GlueWarning]) -> None:
        self._entry = entry
        self.warnings = warnings

    @property
    def table(self) -> pl.DataFrame:
        return self._entry.frame("table")

    @property
    def column_names(self) -> list[str]:
        return self._entry.table_column_names()

    def columns(self, *names: str) -> pl.DataFrame:
        return self._entry.table_columns(list(names))

    def rows(self, positions) -> pl.DataFrame:
        return self._entry.table_rows(positions)

    @property
    def actions(self) -> pl.DataFrame:
        return self._entry.frame("actions")

    @property
    def executions(self) -> pl.DataFrame:
        return self._entry.frame("executions")

    @property
    def texts(self) -> Texts:
        return self._entry.texts()


class CachedIngest(IngestResult):
    """The IngestResult of a set entry: file reports from its meta, rejects read when first used.

    `table` is the correlated table (the canonical table after correlation), since nothing after
    correlation needs the table as ingested."""

    def __init__(self, entry: SetEntry, filtered_out: int) -> None:
        self._entry = entry
        self.filtered_out = filtered_out

    @property
    def files(self) -> list[FileReport]:
        return self._entry.file_reports()

    @property
    def copies(self) -> list[list]:
        return self._entry.meta.get("copies", [])

    def totals(self) -> dict:
        return self._entry.totals()

    @property
    def table(self) -> pl.DataFrame:
        return self._entry.frame("table")

    @property
    def rejects(self) -> pl.DataFrame:
        return self._entry.frame("rejects")

    @property
    def texts(self) -> Texts:
        return self._entry.texts()


def _discard_staged(set_key: str, key: str, thread, staged: list[Path], suffix: str = OUTPUT_SUFFIX) -> None:
    """A staged report the command was stopped before placing: removed, not left to `prune`."""
    if thread is not None:
        thread.join()
    for path in staged:
        path.unlink(missing_ok=True)


class BlobStream:
    """A rendered report written to a staging file as it comes (ResultCache.stream_blob). Its check
    line, written last over a placeholder of the same width, gives the length zero-padded (read
    back as any other). A failed write only loses the entry, never the output."""

    def __init__(self, cache: ResultCache, set_key: str, key: str, head: bytes) -> None:
        self.cache, self.set_key, self.key = cache, set_key, key
        self.crc, self.size = 0, 0
        self._fh = None
        self._path: Path | None = None
        try:
            cache.sets.mkdir(parents=True, exist_ok=True)
            fd, staging = tempfile.mkstemp(prefix=".tmp-", dir=cache.sets)
            self._path = Path(staging)
            self._fh = os.fdopen(fd, "wb")
            self._fh.write(f"{set_key} {key}\n".encode())
            self._check_at = self._fh.tell()
            self._fh.write(self._check_line())  # the placeholder
            self.write(head)
        except OSError:
            self.abandon()

    def _check_line(self) -> bytes:
        return _check_header(BLOB_FORMAT, self.crc, self.size, width=20)

    def write(self, chunk: bytes) -> None:
        if self._fh is None:
            return
        try:
            self._fh.write(chunk)
        except OSError:
            self.abandon()
            return
        self.crc = zlib.crc32(chunk, self.crc)
        self.size += len(chunk)

    def finish(self) -> None:
        """The check line written; the file placed beside its set with the command's deferred writes."""
        if self._fh is None:
            return
        try:
            self._fh.seek(self._check_at)
            self._fh.write(self._check_line())
            self._fh.close()
        except OSError:
            self.abandon()
            return
        self._fh = None
        staged = [self._path]
        background.defer(self.cache._place_blob, self.set_key, self.key, None, staged, if_skipped=_discard_staged)

    def abandon(self) -> None:
        """No entry: the staging file removed (an output cut short, a failed write)."""
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError:
                pass
            self._fh = None
        if self._path is not None:
            self._path.unlink(missing_ok=True)
            self._path = None


class ReadAhead:
    """Things read from the cache on a thread of their own, one after the other, while the command
    goes on: polars decodes a frame without holding the GIL, so on two cores a warm command's
    reads overlap the rest of its work. Each is taken at most once; whatever is never taken is
    only a read too many."""

    def __init__(self, reads: dict[Any, Callable[[], Any]]) -> None:
        self._ready = {name: threading.Event() for name in reads}  # set once its result is in
        self._untaken = set(reads)
        self._results: dict[Any, tuple[bool, Any]] = {}
        self._thread = threading.Thread(target=self._run, args=(reads,), name="dupfind-read-ahead")
        self._thread.start()

    def _run(self, reads: dict[Any, Callable[[], Any]]) -> None:
        for name, read in reads.items():
            try:
                self._results[name] = (True, read())
            except BaseException as exc:  # noqa: BLE001 (raised again where it is taken)
                self._results[name] = (False, exc)
                if isinstance(exc, KeyboardInterrupt):  # polars raised Ctrl-C here: the command stops
                    import _thread

                    _thread.interrupt_main()
            finally:
                self._ready[name].set()

    def take(self, name: Any, read: Callable[[], Any]) -> Any:
        """What was read ahead for `name` (once it is read; its error raised here), else `read()`."""
        if name not in self._untaken:
            return read()
        self._untaken.discard(name)
        self._ready[name].wait()
        ok, value = self._results.pop(name)
        if not ok:
            raise value
        return value


def read_ahead(correlation: Any, facts: ContextFacts | None, names: list[str]) -> None:
    """Start reading, on a thread of their own and in this order, the frames (FRAMES) of a cached
    correlation and the stored facts (any other name) a command is about to use; nothing for what
    the cache does not back, was read already or is being read ahead."""
    entry = correlation._entry if isinstance(correlation, CachedCorrelation) else None
    if entry is not None and (entry._ahead is not None or entry._rebuilt is not None):
        entry = None
    if facts is not None and facts._ahead is not None:
        facts = None
    reads: dict[Any, Callable[[], Any]] = {}
    for name in names:
        if name in FRAMES:
            if entry is not None and name not in entry._frames:
                reads["frame", name] = partial(entry._read_now, name)
        elif facts is not None and name not in facts.loaded:
            reads["fact", name] = partial(facts._load, name)
    if not reads:
        return
    ahead = ReadAhead(reads)
    if any(kind == "frame" for kind, _ in reads):
        entry._ahead = ahead
    if any(kind == "fact" for kind, _ in reads):
        facts._ahead = ahead


def _close_all(descriptors: dict[int, int]) -> None:
    for fd in descriptors.values():
        os.close(fd)
    descriptors.clear()


class SetEntry:
    """A set entry whose meta.json passed its checks; frames are read (and checked) on demand.

    When a frame fails its checks, the entry is deleted and `rebuild()` (ingest and correlate
    again, then store a fresh entry) supplies every frame from then on."""

    def __init__(self, cache: ResultCache, key: str, path: Path, meta: dict[str, Any],
                 rebuild: Callable[[], tuple[IngestResult, Correlation]] | None) -> None:
        self.cache = cache
        self.key = key
        self.path = path
        self.meta = meta
        self._rebuild = rebuild
        self._frames: dict[str, pl.DataFrame] = {}
        self._rebuilt: tuple[IngestResult, Correlation] | None = None
        # Of the table, before all of it is read: columns read so far, and parts read whole.
        self._columns: dict[str, pl.Series] = {}
        self._parts: dict[int, pl.DataFrame] = {}
        self._part_files: dict[int, int] = {}  # descriptors of the parts read so far
        weakref.finalize(self, _close_all, self._part_files)
        self._files: list[FileReport] | None = None
        self._texts: Texts | None = None
        self._ahead: ReadAhead | None = None
        self._keeps_table = True  # columns and parts of the table kept once read (see take_over)
        self._ingest = CachedIngest(self, int(meta["filtered_out"]))
        self._correlation = CachedCorrelation(self, [GlueWarning(k, v, int(n), bool(b)) for k, v, n, b in meta["warnings"]])

    def take_over(self, result: IngestResult, correlation: Correlation) -> None:
        """Given the read and correlation this entry was just stored from: their dictionary, actions,
        executions and file reports are used instead of read back (the analysis derived its facts
        from those very frames), and from now on the table's columns and parts are read for each
        use, not kept (pipeline._rest_on_stored_set: the cache writes after the report then hold
        only the columns each reads, not the table)."""
        self._texts = correlation.texts
        self._frames.setdefault("actions", correlation.actions)
        self._frames.setdefault("executions", correlation.executions)
        self._files = result.files
        self._keeps_table = False

    def file_reports(self) -> list[FileReport]:
        """The file reports, decoded when first used (837 of them cost a warm command 0.04 s it
        rarely needs); a report that cannot be decoded counts as a damaged entry."""
        if self._files is None:
            if self._rebuilt is None:
                try:
                    states = orjson.loads(_unchecked((self.path / FILES_NAME).read_bytes(), SET_FORMAT))
                    if len(states) != self.meta["files"]["count"]:
                        raise CorruptEntry("another number of file reports")
                    self._files = [_report_from_state(r) for r in states]
                    return self._files
                except Exception as exc:
                    self._failed(exc)
            self._files = self._rebuilt[0].files
        return self._files

    def totals(self) -> dict:
        """IngestResult.totals of the files, as stored when the entry was: over 20,000 files,
        working them out again meant decoding every file report (0.4-0.6 s)."""
        from dupfind.exact_json import decode

        if self._rebuilt is None:
            try:
                return decode(self.meta["totals"])
            except Exception as exc:
                self._failed(exc)
        return self._rebuilt[0].totals()

    def frame(self, name: str) -> pl.DataFrame:
        if name in self._frames:
            return self._frames[name]
        if self._rebuilt is None:
            try:
                frame = self._read_table() if name == "table" else self._read(name)
                if name != "table" or self._keeps_table:  # an entry that keeps no table reads it for each use
                    self._frames[name] = frame
                return frame
            except Exception as exc:
                self._failed(exc)
        return self._rebuilt_frame(name)

    def texts(self) -> Texts:
        """The dictionary of the table's coded columns."""
        if self._texts is None and self._rebuilt is None:
            try:
                values = self.frame("texts")["text"]  # a frame that fails its checks rebuilds the entry
                if self._rebuilt is None:
                    self._texts = Texts(values, tuple(self.meta["coded"]))
            except Exception as exc:
                self._failed(exc)
        return self._texts if self._rebuilt is None else self._rebuilt[1].texts

    def _failed(self, error: Exception) -> None:
        """A frame failed its checks: the entry is deleted, and every frame is rebuilt."""
        self.cache.discard(self.key)
        if self._rebuild is None:
            raise error
        self._rebuilt = self._rebuild()
        self._columns.clear()
        self._parts.clear()
        _close_all(self._part_files)

    def _rebuilt_frame(self, name: str) -> pl.DataFrame:
        result, correlation = self._rebuilt
        rebuilt = {**_set_frames(result, correlation), "table": correlation.table_slice(0, correlation.table.height)}
        self._frames.update((k, v) for k, v in rebuilt.items() if k not in self._frames)
        return self._frames[name]

    def _read(self, name: str) -> pl.DataFrame:
        if self._ahead is not None:
            return self._ahead.take(("frame", name), lambda: self._read_now(name))
        return self._read_now(name)

    def _read_now(self, name: str) -> pl.DataFrame:
        return _read_frame(self.path / f"{name}.arrow", self.meta["frames"][name])

    # -- the table, whole or by columns and parts ---------------------------------------------

    def table_column_names(self) -> list[str]:
        return [name for name, _ in self.meta["table"]["schema"]]

    def _whole_table(self) -> pl.DataFrame | None:
        """The table when it is read whole (or rebuilt); None while only columns or parts are."""
        if "table" in self._frames:
            return self._frames["table"]
        return self._rebuilt_frame("table") if self._rebuilt is not None else None

    def _part_streams(self, index: int, names: list[str] | None = None) -> list[tuple[list[str], bytes]]:
        """The streams of one part of the table that hold `names` (all when None), each checked
        against its CRC-32. Parts are read through descriptors kept open (up to MAX_OPEN_PARTS):
        the same files, even if the entry is replaced meanwhile."""
        info = self.meta["table"]["parts"][index]
        fd = self._part_files.get(index)
        opened = fd is None
        if opened:
            fd = os.open(self.path / _part_name(index), os.O_RDONLY)
        try:
            streams = _streams_at(fd, info, _part_name(index), names)
        except BaseException:
            if opened:
                os.close(fd)
            raise
        if opened and len(self._part_files) < MAX_OPEN_PARTS:
            self._part_files[index] = fd
        elif opened:  # a huge table: opened on every read instead
            os.close(fd)
        return streams

    def _part(self, index: int) -> pl.DataFrame:
        """One part of the table, whole."""
        return _frame_of(self._part_streams(index), self.meta["table"]["parts"][index], _part_name(index))

    def _read_columns(self, names: list[str]) -> dict[str, pl.Series]:
        """The columns `names`, in the columns the entry keeps, which are returned; an entry that
        keeps no table (take_over) reads them into a dictionary of their own for this use."""
        into = self._columns if self._keeps_table else {}
        missing = [n for n in dict.fromkeys(names) if n not in into]
        if not missing:
            return into
        infos = self.meta["table"]["parts"]
        types = dict(self.meta["table"]["schema"])
        expected = [[name, types[name]] for name in missing]
        frames = []
        # Polars decodes the parts of one scan in parallel; PARTS_PER_SCAN bounds the bytes held.
        for first in range(0, len(infos), PARTS_PER_SCAN):
            indexes = range(first, min(first + PARTS_PER_SCAN, len(infos)))
            # One scan per stream that holds a wanted column (the parts share one schema, so one
            # layout of columns in streams).
            streams = [self._part_streams(i, missing) for i in indexes]
            if len({tuple(tuple(names) for names, _ in found) for found in streams}) != 1:
                raise CorruptEntry("the parts of the table hold their columns in other streams")
            pieces = pl.collect_all([
                pl.scan_ipc([io.BytesIO(found[k][1]) for found in streams]).select(names)
                for k, (names, _) in enumerate(streams[0])
            ])
            frame = (pl.concat(pieces, how="horizontal") if len(pieces) > 1 else pieces[0]).select(missing)
            frames.append(_checked_shape(frame, sum(infos[i]["rows"] for i in indexes), expected,
                                         f"{_part_name(indexes[0])} and the parts after it"))
        frame = pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]
        into.update((name, frame.get_column(name)) for name in missing)
        return into

    def _read_table(self) -> pl.DataFrame:
        names = self.table_column_names()
        read = self._read_columns(names)
        table = pl.DataFrame([read.pop(n) for n in names])
        self._columns.clear()
        self._parts.clear()
        _close_all(self._part_files)
        return table

    def table_columns(self, names: list[str]) -> pl.DataFrame:
        """Some columns of the table: only those are read (once) while the whole table is not needed."""
        unknown = set(names) - set(self.table_column_names())
        if unknown:  # a caller's mistake, not a damaged entry
            raise pl.exceptions.ColumnNotFoundError(f"the table has no column {', '.join(sorted(unknown))}")
        whole = self._whole_table()
        if whole is None:
            try:
                read = self._read_columns(names)
                return pl.DataFrame([read[n] for n in names])
            except Exception as exc:
                self._failed(exc)
                whole = self._whole_table()
        return whole.select(names)

    def table_rows(self, positions) -> pl.DataFrame:
        """Rows of the table by position (= rid), in the order given: only the parts that hold them are read."""
        positions = pl.Series("pos", positions, dtype=pl.Int64)
        rows = sum(info["rows"] for info in self.meta["table"]["parts"])
        if positions.len() and (positions.min() < 0 or positions.max() >= rows):
            raise IndexError("a row position outside the table")
        whole = self._whole_table()
        if whole is None:
            try:
                return self._rows_from_parts(positions)
            except Exception as exc:
                self._failed(exc)
                whole = self._whole_table()
        return whole[positions]

    def _rows_from_parts(self, positions: pl.Series) -> pl.DataFrame:
        infos = self.meta["table"]["parts"]
        starts = pl.Series([0, *[info["rows"] for info in infos]]).cum_sum()
        part_of = starts.search_sorted(positions, side="right") - 1
        needed = sorted(set(part_of.to_list())) or [0]
        parts = self._parts if self._keeps_table else {}
        for index in needed:
            if index not in parts:
                parts[index] = self._part(index)
        held = pl.concat([parts[i] for i in needed], how="vertical") if len(needed) > 1 else parts[needed[0]]
        # Part i's rows sit in `held` after the rows of the needed parts before it.
        offset = [0] * len(infos)
        at = 0
        for index in needed:
            offset[index] = at
            at += infos[index]["rows"]
        local = positions - starts.gather(part_of) + pl.Series(offset, dtype=pl.Int64).gather(part_of)
        return held[local]

    def ingest_result(self) -> CachedIngest:
        return self._ingest

    def correlation(self) -> CachedCorrelation:
        return self._correlation


class ContextFacts:
    """What an AnalysisContext derived (its cached properties: side effects, the deploy model, the
    queue of each action, ...), stored under `sets/<set>/facts/<context key>/<name>/`, so that a
    warm trace or ticket does not derive it again. DataFrames and dataclasses made of DataFrames
    (DeployModel) up to FACT_MAX_BYTES are stored as IPC, values exact_json gives back exactly
    (dicts of ids, ...) up to FACT_VALUE_MAX_BYTES as JSON; anything else (an index object) is
    derived as usual."""

    def __init__(self, cache: ResultCache, set_key: str, context_key: str) -> None:
        self.cache = cache
        self.set_key = set_key
        self.folder = cache._entry_dir(set_key) / "facts" / context_key
        self.loaded: set[str] = set()
        self.compute_s: dict[str, float] = {}  # how long each fact derived in this run took
        self._ahead: ReadAhead | None = None

    def load(self, name: str) -> tuple[bool, Any]:
        """(True, the stored fact) or (False, None) when it is not stored (or failed its checks: deleted)."""
        if self._ahead is not None:
            return self._ahead.take(("fact", name), lambda: self._load(name))
        return self._load(name)

    def _load(self, name: str) -> tuple[bool, Any]:
        folder = self.folder / name
        try:
            raw = (folder / "meta.json").read_bytes()
        except OSError:
            return False, None
        try:
            meta = orjson.loads(_unchecked(raw, FACT_FORMAT))
            if meta["name"] != name:
                raise CorruptEntry("fact of another name")
            if "value" in meta:
                from dupfind.exact_json import decode

                self.loaded.add(name)
                return True, decode(meta["value"])
            parts = {part: _read_frame(folder / f"{part}.arrow", info) for part, info in meta["parts"].items()}
            if meta["class"] is None:
                value = parts["frame"]
            else:
                import importlib

                module, _, qualname = meta["class"].partition(":")
                cls = importlib.import_module(module)
                for attr in qualname.split("."):
                    cls = getattr(cls, attr)
                if not is_dataclass(cls) or [f.name for f in fields(cls)] != list(parts):
                    raise CorruptEntry("fact of another layout")
                value = cls(**parts)
        except Exception:
            shutil.rmtree(folder, ignore_errors=True)
            return False, None
        self.loaded.add(name)
        return True, value

    @staticmethod
    def _parts(value: Any) -> tuple[str | None, dict[str, pl.DataFrame]] | None:
        if isinstance(value, pl.DataFrame):
            return None, {"frame": value}
        if is_dataclass(value) and not isinstance(value, type):
            parts = {f.name: getattr(value, f.name) for f in fields(value)}
            if parts and all(isinstance(v, pl.DataFrame) for v in parts.values()):
                cls = type(value)
                return f"{cls.__module__}:{cls.__qualname__}", parts
        return None

    def store_new(self, ctx: Any) -> None:
        """Store every storable cached property of `ctx` that is not stored yet."""
        for name, value in list(vars(ctx).items()):
            if name in self.loaded or not isinstance(getattr(type(ctx), name, None), (cached_property, StoredFact)):
                continue
            if (self.folder / name / "meta.json").exists():
                continue
            found = self._parts(value)
            if found is None:
                # A value (a dict of ids, ...) only when deriving it took a while: decoding a large
                # dict can cost more than building it again from a frame.
                if self.compute_s.get(name, 0.0) >= VALUE_FACT_MIN_S:
                    self._store_value(name, value, self.compute_s[name])
                continue
            cls, parts = found
            if sum(p.estimated_size() for p in parts.values()) > FACT_MAX_BYTES:
                continue
            staging: Path | None = None
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.folder))
                meta = {"name": name, "class": cls,
                        "parts": {part: _write_frame(staging / f"{part}.arrow", frame) for part, frame in parts.items()}}
                (staging / "meta.json").write_bytes(_checked(orjson.dumps(meta), FACT_FORMAT))
                os.replace(staging, self.folder / name)
                staging = None
                self.loaded.add(name)
            except (OSError, pl.exceptions.PolarsError):
                if (self.folder / name / "meta.json").exists():
                    continue  # placed meanwhile by another command over the same inputs: that one is kept
                return  # an unwritable or vanished cache: derived again next time
            finally:
                if staging is not None:
                    shutil.rmtree(staging, ignore_errors=True)

    def _store_value(self, name: str, value: Any, compute_s: float) -> None:
        from dupfind.exact_json import decode, encode

        if isinstance(value, (dict, list, set, tuple)) and len(value) > FACT_VALUE_MAX_ITEMS:
            return  # a dict per action: decoding it costs about what deriving it again does
        try:
            encoded = encode(value)
            body = orjson.dumps({"name": name, "value": encoded})
            start = time.perf_counter()
            back = decode(orjson.loads(body)["value"])
            if back != value or time.perf_counter() - start > compute_s / 2:
                return
            if len(body) > FACT_VALUE_MAX_BYTES:
                return
            (self.folder / name).mkdir(parents=True, exist_ok=True)
            write_atomic(self.folder / name / "meta.json", _checked(body, FACT_FORMAT))
            self.loaded.add(name)
        except (OSError, TypeError, ValueError):
            return  # not a value exact_json gives back, or an unwritable cache


class StoredFact:
    """A cached property of a context class that first looks in the context's ContextFacts."""

    def __init__(self, name: str, func: Callable[[Any], Any]) -> None:
        self.name = name
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        facts = obj.__dict__.get(STORED_FACTS)
        found, value = facts.load(self.name) if facts is not None else (False, None)
        if not found:
            start = time.perf_counter()
            value = self.func(obj)
            if facts is not None:
                facts.compute_s[self.name] = time.perf_counter() - start
        obj.__dict__[self.name] = value
        return value


@lru_cache(maxsize=8)
def facts_class(base: type) -> type:
    """A subclass of a context class whose cached properties read stored facts first."""
    attrs = {}
    for klass in reversed(base.__mro__):
        for name, attr in vars(klass).items():
            if isinstance(attr, cached_property):
                attrs[name] = StoredFact(name, attr.func)

    def read_ahead_of_context(self: Any, *names: str) -> None:
        read_ahead(self.correlation, self.__dict__.get(STORED_FACTS), list(names))

    attrs["read_ahead"] = read_ahead_of_context
    return type(base.__name__, (base,), {**attrs, "__module__": base.__module__, "__qualname__": base.__qualname__})


class ResultCache:
    """Set entries (correlated inputs) and their analyses under `root/sets`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sets = root / SETS_DIR
        self.hits = 0
        self.misses = 0
        self.analysis_hits = 0
        self.value_hits = 0

    # -- keys -------------------------------------------------------------------------------

    def set_key(self, inputs: list[tuple[str, str]], config_digest: str, since, until,
                max_jobs_per_value: int, naming: list[tuple] = ()) -> str:
        """The key of a set: `inputs` are (path as given, sources.file_identity) in input order;
        `naming`, what other inputs' reports say of the workers these name (pipeline.load_correlated)."""
        described = {
            "format": SET_FORMAT, "version": __version__, "code": code_fingerprint(), "config": config_digest,
            "inputs": inputs, "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None, "max_jobs_per_value": max_jobs_per_value,
        }
        return _digest({**described, "naming": naming} if naming else described)

    @staticmethod
    def analysis_key(set_key: str, rules, skew_s: float, timeouts: dict[str, float],
                     config_timeouts: dict[str, float]) -> str:
        """The key of an analysis of a set: every field of every rule (--disable included), --skew, timeouts."""
        return _digest({
            "format": ANALYSIS_FORMAT, "set": set_key, "rules": [asdict(r) for r in rules],
            "skew": float(skew_s), "timeouts": timeouts, "config_timeouts": config_timeouts,
        })

    # -- set entries ------------------------------------------------------------------------

    def _entry_dir(self, key: str) -> Path:
        return self.sets / key

    def discard(self, key: str) -> None:
        shutil.rmtree(self._entry_dir(key), ignore_errors=True)

    def open_set(
        self, key: str, rebuild: Callable[[], tuple[IngestResult, Correlation]] | None = None
    ) -> SetEntry | None:
        """The entry of a set key when its meta passes the checks (else it is deleted): None on a miss."""
        entry = self._checked_set(key, rebuild)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        try:
            os.utime(entry.path)  # most recently used, for pruning
        except OSError:
            pass
        return entry

    def _checked_set(
        self, key: str, rebuild: Callable[[], tuple[IngestResult, Correlation]] | None = None
    ) -> SetEntry | None:
        """open_set without counting or touching: None when there is no entry or it fails the checks (deleted)."""
        path = self._entry_dir(key)
        try:
            raw = (path / "meta.json").read_bytes()
        except OSError:
            if path.exists():
                self.discard(key)
            return None
        try:
            meta = orjson.loads(_unchecked(raw, SET_FORMAT))
            if (meta.get("key") != key or set(meta.get("frames", {})) != set(FRAMES)
                    or not isinstance(meta.get("coded"), list) or not isinstance(meta.get("totals"), dict)):
                raise CorruptEntry("meta of another entry")
            files = [(f"{name}.arrow", info) for name, info in meta["frames"].items()]
            files += [(_part_name(i), info) for i, info in enumerate(meta["table"]["parts"])]
            files.append((FILES_NAME, meta["files"]))
            if not meta["table"]["parts"]:
                raise CorruptEntry("a table of no parts")
            for name, info in files:
                if (path / name).stat().st_size != info["bytes"]:
                    raise CorruptEntry(f"{name} has another size")
            return SetEntry(self, key, path, meta, rebuild)
        except Exception:
            self.discard(key)
            return None

    def store_set(self, key: str, result: IngestResult, correlation: Correlation) -> bool:
        """Write a set entry (atomically); False when the cache directory cannot take it."""
        from dupfind.exact_json import encode

        staging: Path | None = None
        try:
            files = _checked(orjson.dumps([f.to_state() for f in result.files]), SET_FORMAT)
            meta = {
                "key": key,
                "files": {"count": len(result.files), "bytes": len(files)},
                "filtered_out": result.filtered_out,
                "copies": result.copies,
                "totals": encode(result.totals()),  # exact_json: times come back in their zones
                "warnings": [[w.key, w.value, w.jobs, w.batch] for w in correlation.warnings],
                "coded": list(correlation.texts.columns),
            }
            self.sets.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.sets))
            frames = _set_frames(result, correlation)
            meta["frames"] = {name: _write_frame(staging / f"{name}.arrow", frame) for name, frame in frames.items()}
            # The table whole, the columns the correlation holds apart spread again a part at a time.
            meta["table"] = {"schema": _schema(correlation.table_slice(0, 0)), "parts": [
                _write_frame(staging / _part_name(i), correlation.table_slice(start, TABLE_PART_ROWS))
                for i, start in enumerate(range(0, max(correlation.table.height, 1), TABLE_PART_ROWS))
            ]}
            (staging / FILES_NAME).write_bytes(files)
            (staging / "meta.json").write_bytes(_checked(orjson.dumps(meta), SET_FORMAT))
            (staging / "analyses").mkdir()
            if self._place_set(staging, key):
                staging = None  # else removed below: another command's entry is there
        except (OSError, TypeError, ValueError, pl.exceptions.PolarsError):
            # A read-only or full cache directory (or a value it cannot hold) must never break a run.
            return False
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
        self.prune()
        return True

    def _place_set(self, staging: Path, key: str) -> bool:
        """Move a staged set entry into place (True), unless another command over the same inputs
        placed one meanwhile (False): the same rows in other bytes (the order of its categories),
        whose frames go with its meta's checksums, and which that command may be reading.
        Replaced, its reads failed their checksums (or found no file) and deleted the entry: two
        commands started together each said the cache was not updated, and kept none."""
        final = self._entry_dir(key)
        try:
            os.rename(staging, final)  # fails onto a directory that holds entries
            return True
        except OSError:
            if self._checked_set(key) is not None:
                return False
        os.rename(staging, final)  # where a damaged entry was (deleted by the check)
        return True

    # -- analyses ---------------------------------------------------------------------------

    def load_analysis(self, set_key: str, key: str) -> dict[str, Any] | None:
        """A stored analysis, or None: {"report": its other fields decoded, "findings": a function
        that reads and decodes the findings (a warm `analyze --format json` or `timeline` never needs
        them; it raises CorruptEntry when they fail their checks)}."""
        from dupfind.exact_json import decode
        from dupfind.findings import FINDING_FIELDS, FindingBrief

        folder = self._entry_dir(set_key) / "analyses"
        path = folder / f"{key}.json"
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        try:
            data = orjson.loads(_unchecked(raw, ANALYSIS_FORMAT))
            if data["set"] != set_key or data["key"] != key or data["finding_fields"] != list(FINDING_FIELDS):
                raise CorruptEntry("analysis of another entry or finding layout")
            report = {name: decode(value) for name, value in data["report"].items()}
            expected = (data["findings"]["bytes"], data["findings"]["crc32"], data["findings"]["count"])
            stored = data["findings"]
            rule_of, fingerprint_of = stored["rules"], stored["fingerprints"]
            severity_of, harmful_of, cause_of = stored["severities"], stored["harmful"], stored["causes"]
            if not len(rule_of) == len(fingerprint_of) == len(severity_of) == len(harmful_of) == len(cause_of) == expected[2] \
                    or not all(isinstance(v, str) for v in (*rule_of, *fingerprint_of, *severity_of)) \
                    or not all(v is True or v is False for v in harmful_of) \
                    or not all(v is None or isinstance(v, str) for v in cause_of):
                raise CorruptEntry("finding rules, fingerprints, severities, harm or causes of another count or type")
        except Exception:
            self.discard_analysis(set_key, key)
            return None
        self.analysis_hits += 1
        try:
            os.utime(path)
        except OSError:
            pass

        lines: list[bytes] = []  # the checked findings file, one state a line, once read

        def findings(select: Callable[[str, str], bool] | None = None, evidence: bool = True) -> list:
            """Every finding, or those whose rule code and fingerprint `select` accepts (only those
            lines parsed); with `evidence` False, without their evidence."""
            wanted = [i for i, (rule, fp) in enumerate(zip(rule_of, fingerprint_of)) if select is None or select(rule, fp)]
            if not wanted:
                return []
            try:
                if not lines:
                    body = (folder / f"{key}.findings").read_bytes()
                    if (len(body), zlib.crc32(body)) != expected[:2]:
                        raise CorruptEntry("findings differ from their checksum")
                    lines.extend(body.split(b"\n"))
                    if len(lines) != expected[2]:
                        raise CorruptEntry("another number of findings")
                found = [_finding_of_line(lines[i], evidence) for i in wanted]
                if any(FindingBrief.of(f) != (rule_of[i], fingerprint_of[i], severity_of[i], harmful_of[i], cause_of[i])
                       for f, i in zip(found, wanted)):
                    raise CorruptEntry("a finding of another rule, fingerprint, severity, harm or cause")
                return found
            except Exception as exc:
                lines.clear()
                self.discard_analysis(set_key, key)
                raise CorruptEntry(f"stored findings unusable: {exc}") from exc

        def index() -> list:
            """Each finding's FindingBrief, from the .json alone (every finding's checked with it when decoded)."""
            return [FindingBrief(*brief) for brief in zip(rule_of, fingerprint_of, severity_of, harmful_of, cause_of)]

        return {"findings": findings, "index": index, "count": expected[2], "report": report}

    def discard_analysis(self, set_key: str, key: str) -> None:
        folder = self._entry_dir(set_key) / "analyses"
        for name in (f"{key}.json", f"{key}.findings"):
            (folder / name).unlink(missing_ok=True)

    def store_analysis(self, set_key: str, key: str, findings: list, report_fields: dict[str, Any]) -> bool:
        """Write an analysis beside its set: the findings, then the report fields that name their size
        and checksum (each file atomically); False when it cannot be stored exactly."""
        from dupfind.exact_json import decode, encode
        from dupfind.findings import FINDING_FIELDS, Finding

        folder = self._entry_dir(set_key) / "analyses"
        try:
            encoded = {name: encode(value) for name, value in report_fields.items()}
            # Exactness check: what a warm run would read back must equal what this run reports.
            if {name: decode(value) for name, value in encoded.items()} != report_fields:
                return False
            if not folder.is_dir():
                return False  # the set entry is gone (pruned, or never written)
            size = crc = 0  # the findings file's, so far

            def finding_lines() -> Iterator[bytes]:
                nonlocal size, crc
                # A finding at a time (the states and their decoded copies of every finding at once
                # held 0.2 GB at 5M lines), each line written as it is made (held whole, the lines
                # and their file, 18 MB each at 1M lines, were most of what storing added to a
                # first run's peak); a line each: a subset parses alone.
                for i, finding in enumerate(findings):
                    state = finding.to_state()
                    if Finding.from_state(state) != finding:
                        raise _InexactFinding
                    line = _finding_line(state) if i == 0 else b"\n" + _finding_line(state)
                    size += len(line)
                    crc = zlib.crc32(line, crc)
                    yield line

            place_chunks(folder / f"{key}.findings", finding_lines())
            head = orjson.dumps({
                "set": set_key, "key": key, "finding_fields": list(FINDING_FIELDS), "report": encoded,
                "findings": {"bytes": size, "crc32": crc, "count": len(findings),
                             "rules": [f.rule for f in findings], "fingerprints": [f.fingerprint for f in findings],
                             "severities": [f.severity for f in findings], "harmful": [f.harmful for f in findings],
                             "causes": [f.cause for f in findings]},
            })
            write_atomic(folder / f"{key}.json", _checked(head, ANALYSIS_FORMAT))
        except (OSError, TypeError, ValueError, _InexactFinding):
            return False
        self._prune_analyses(folder)
        return True

    # -- values derived from an analysis (timeline and stats documents) ---------------------

    @staticmethod
    def value_key(base_key: str, kind: str, params: Any) -> str:
        return _digest({"format": VALUE_FORMAT, "base": base_key, "kind": kind, "params": params})

    def _value_path(self, set_key: str, key: str) -> Path:
        return self._entry_dir(set_key) / "analyses" / f"{key}.value.json"

    def has_value(self, set_key: str, key: str) -> bool:
        """Whether a value is stored under `key` (not whether it is intact: load_value checks)."""
        return self._value_path(set_key, key).is_file()

    def load_value(self, set_key: str, key: str) -> tuple[bool, Any]:
        """(True, value) for a stored value, (False, None) otherwise."""
        from dupfind.exact_json import decode

        path = self._value_path(set_key, key)
        try:
            raw = path.read_bytes()
        except OSError:
            return False, None
        try:
            data = orjson.loads(_unchecked(raw, VALUE_FORMAT))
            if data["set"] != set_key or data["key"] != key:
                raise CorruptEntry("value of another entry")
            value = data["value"] if data["plain"] else decode(data["value"])
        except Exception:
            path.unlink(missing_ok=True)
            return False, None
        self.value_hits += 1
        try:
            os.utime(path)
        except OSError:
            pass
        return True, value

    def store_value(self, set_key: str, key: str, value: Any) -> bool:
        """Store a value beside its set's analyses (exact_json, atomically); False when it cannot."""
        body = self.value_body(set_key, key, value)
        return body is not None and self.store_value_body(set_key, key, body)

    @staticmethod
    def value_body(set_key: str, key: str, value: Any) -> bytes | None:
        """What store_value writes for a value (encoded now, so that it may be written later
        whatever becomes of the value); None when it cannot be given back exactly."""
        from dupfind.exact_json import decode, encode

        try:
            # Plain JSON data (what JSON gives back equals the value: no tuples, times or
            # non-string keys) is stored and read back as is, checked at orjson's speed
            # rather than walked by exact_json (seconds for a large document).
            try:
                plain = (type(value) is list and all(type(v) is str for v in value)) \
                    or orjson.loads(orjson.dumps(value)) == value
            except (TypeError, ValueError):
                plain = False
            encoded = value
            if not plain:
                encoded = encode(value)
                if decode(encoded) != value:
                    return None
            return orjson.dumps({"set": set_key, "key": key, "plain": plain, "value": encoded})
        except (TypeError, ValueError):
            return None

    @staticmethod
    def texts_value_body(set_key: str, key: str, texts: pl.Series) -> bytes:
        """What value_body writes for `texts.to_list()` (a list of str), without that whole list:
        the texts made Python strings a slice at a time (the ids a redactor protects, 241k at 1M
        lines, took 18 MiB as a list of Python strings, and the step 43 MiB at its peak)."""
        texts = texts.drop_nulls()
        head = orjson.dumps({"set": set_key, "key": key, "plain": True, "value": []})[:-len(b"]}")]
        items = [orjson.dumps(texts.slice(at, TEXTS_SLICE).to_list())[1:-1] for at in range(0, texts.len(), TEXTS_SLICE)]
        return b"".join((head, b",".join(items), b"]}"))

    def store_value_body(self, set_key: str, key: str, body: bytes) -> bool:
        path = self._value_path(set_key, key)
        folder = path.parent
        try:
            if not folder.is_dir():
                return False
            write_atomic(path, _checked(body, VALUE_FORMAT))
        except OSError:
            return False
        self._prune_analyses(folder)
        return True

    def load_blob(self, set_key: str, key: str, suffix: str = OUTPUT_SUFFIX) -> memoryview | None:
        """Stored bytes (a rendered report, the end of the file mapped, not read: see
        mapped_file.write_end), or None. `suffix` tells outputs from other rendered parts."""
        path = self._entry_dir(set_key) / "analyses" / f"{key}{suffix}"
        try:
            raw = map_file(path)
        except OSError:
            return None
        except ValueError:  # empty
            raw = b""
        name = f"{set_key} {key}\n".encode()
        try:
            if raw[:len(name)] != name:
                raise CorruptEntry("output of another entry")
            data = _unchecked(raw, BLOB_FORMAT, len(name))
        except (CorruptEntry, ValueError):
            data = None
        if data is None:
            if isinstance(raw, MappedFile):
                close_mapped(raw)  # before the file goes (Windows deletes no mapped file)
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            return None
        self.value_hits += 1
        try:
            os.utime(path)
        except OSError:
            pass
        return data

    def store_blob_soon(self, set_key: str, key: str, *chunks: bytes, suffix: str = OUTPUT_SUFFIX) -> None:
        """Store bytes given in chunks (a rendered report may be hundreds of MB: not joined first)
        in two steps: the file is written now to a staging name (on a thread of its own when the
        chunks are large, see BACKGROUND_BLOB_BYTES), so that the bytes need not be held; it is
        moved beside its set when the command's deferred writes run (the set entry itself may be
        one of them: dupfind.background.defer)."""
        staged: list[Path] = []

        def stage() -> None:
            path = self._staged_blob(set_key, key, chunks)
            if path is not None:
                staged.append(path)

        thread = None
        if sum(len(c) for c in chunks) < BACKGROUND_BLOB_BYTES:
            stage()
        else:
            thread = background.start(stage, name="dupfind-store-output")
        background.defer(self._place_blob, set_key, key, thread, staged, suffix, if_skipped=_discard_staged)

    def stream_blob(self, set_key: str, key: str, head: bytes) -> BlobStream:
        """A stored output written as it is rendered (`head`, then each chunk given to `write`), so
        that a report of hundreds of MB is never held whole; like store_blob_soon once finished."""
        return BlobStream(self, set_key, key, head)

    def _staged_blob(self, set_key: str, key: str, chunks: tuple[bytes, ...]) -> Path | None:
        try:
            self.sets.mkdir(parents=True, exist_ok=True)
            return write_staged(self.sets, f"{set_key} {key}\n".encode(), _check_line(chunks, BLOB_FORMAT), *chunks)
        except OSError:
            return None

    def _place_blob(self, set_key: str, key: str, thread, staged: list[Path], suffix: str = OUTPUT_SUFFIX) -> None:
        """Move a staged report beside its set entry (removed when there is none)."""
        if thread is not None:
            thread.join()
        if not staged:
            return
        folder = self._entry_dir(set_key) / "analyses"
        try:
            if folder.is_dir():
                os.replace(staged[0], folder / f"{key}{suffix}")
                self._prune_analyses(folder)
        except OSError:
            pass
        finally:
            staged[0].unlink(missing_ok=True)  # not placed (no set entry): not kept

    # -- growth -----------------------------------------------------------------------------

    def _prune_analyses(self, folder: Path) -> None:
        try:
            stored = [(p, p.stat()) for p in folder.iterdir() if not p.name.startswith(".")]  # analyses, outputs
            stored.sort(key=lambda item: item[1].st_mtime_ns, reverse=True)
            total = 0
            for count, (path, stat) in enumerate(stored):
                total += stat.st_size
                if count >= KEEP_ANALYSES or (count and total > ANALYSES_MAX_BYTES):
                    path.unlink(missing_ok=True)
        except OSError:
            pass

    def prune(self) -> None:
        """Keep the KEEP_SETS most recently used sets; drop per-file entries unused for a long time."""
        try:
            found = list(self.sets.iterdir())
            now = time.time()
            # Staging folders and files a killed run left (a set entry, a rendered report).
            stale = [p for p in found if p.name.startswith(".tmp-") and now - p.stat().st_mtime > 3600]
            entries = [p for p in found if p.is_dir() and not p.name.startswith(".tmp-")]
            entries.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
            for path in stale + entries[KEEP_SETS:]:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        except OSError:
            pass
        self._prune_file_entries()

    def _prune_file_entries(self) -> None:
        """Packs and directory indexes (cache.TableCache) and kept size estimates (memory_check)
        not used for FILE_ENTRY_MAX_AGE_S; at most once a day. An index entry whose pack is gone is
        a miss, and is written again. (Per-file pointers of earlier versions, in the two-letter
        shards, go the same way.)"""
        stamp = self.root / ".pruned"
        try:
            now = time.time()
            if stamp.exists() and now - stamp.stat().st_mtime < PRUNE_EVERY_S:
                return
            stamp.touch()
            for shard in self.root.iterdir():
                if not (len(shard.name) == 2 or shard.name in (PACKS, INDEXES)) or not shard.is_dir():
                    continue
                for entry in shard.iterdir():
                    if now - entry.stat().st_mtime > FILE_ENTRY_MAX_AGE_S:
                        if entry.is_dir():
                            shutil.rmtree(entry, ignore_errors=True)
                        else:
                            entry.unlink(missing_ok=True)
        except OSError:
            pass
