"""Before reading logs: warn when they look too large for the memory this process can get."""

from __future__ import annotations

import contextlib
import hashlib
import lzma
import os
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

import orjson

from dupfind.atomic_files import write_atomic
from dupfind.json_values import objects_cut
from dupfind.sources import Source, detect_compression, identities

# Peak RSS of a first `analyze` that reads its inputs whole (the cache on, the default, which
# peaks a little higher than --no-cache), fitted above bench/compare.py's exports at 62261e3: 1M
# lines 389 MB for 403 MB of logs (the same rows with 22 % fewer bytes: 363 MB); 5M 1,411 MB for
# 2,019 MB; 10M 2,624 MB for 4,037 MB; a 703-line fixture 117 MB. What a read keeps grows with its
# rows (codes, dictionaries, executions) more than with its bytes (a key no alias names is not
# kept): 134 MB, 0.29 bytes a byte of log text and 139 bytes a line fit the four exports within
# 2 %. The fixed part is 0.22 GB, for other logs' shapes and the page cache a memory cgroup
# charges: 1.23x the 1M read, 1.08x at 5M and 10M. The 1M export's first run completes read whole
# in a cgroup of 410 MB (12.1 s) and 600 MB (11.3 s, where 4 windows took 12.7 s and 401 MiB).
# (0.85 bytes a byte plus 0.3 GB before, fitted at c5a7125: 1.65x, 1.43x and 1.42x of those reads
# now, and blind to short lines, which hold more rows a byte.)
PEAK_PER_LOG_BYTE = 0.3
PEAK_PER_LINE = 140
# A JSON document's records are counted, not its lines (a pretty-printed record is 20-30 lines).
# Fitted above bench/documents.py's exports of 323k records at 3abec72 (peaks of 353-408 MiB):
# 1.0x a Firehose object, 1.08x an indented filter-log-events output, 1.23x a gcloud array and
# 1.25x search hits; with their elements read by polars (d6b174e: 354-419 MiB) still above them.
PEAK_PER_DOCUMENT_RECORD = 450
PEAK_FIXED_BYTES = 220 * 10**6
# A read of part of the inputs (a window of time, the records a view needs) is planned with more
# room: what earlier reads left stays (findings, pages the allocators return later). Windows
# planned to 0.85 of --memory-limit with this peaked at 340 MB of 400 MB (1M lines) and 948 MB of
# 1 GB (5M lines).
PART_PEAK_PER_LOG_BYTE = 1.2
PART_PEAK_FIXED_BYTES = 250 * 10**6
# The estimate of some files kept in the cache directory (see log_size): `<key[:2]>/<key>.logbytes`.
MEMO_FORMAT = "log-bytes/3"
MEMO_SUFFIX = ".logbytes"
# Estimates made by this process, by _memo_key.
_totals: dict[str, LogSize] = {}
# bz2 and xz keep no uncompressed size; text logs shrink at least this much.
ASSUMED_RATIO = 5
# A gzip file's text, from its first bytes: the start of a deflate stream compresses worse than
# the rest, so the first 16 KB of text took about twice the file's share of its packed bytes
# (this times the sample's ratio was 0.87-1.87x the trailer's size over the 1M export gzipped at
# levels 1, 6 and 9, short lines, and the fixtures).
START_RATIO_BIAS = 2
# The trailer's size (modulo 2^32) is taken when within this factor of that estimate: a file cut
# off while it was written (a log being compressed by logrotate), a damaged one, or several
# members (`cat a.gz b.gz`, whose trailer is the last one's) end in other bytes, up to 4 GB for a
# file of a few hundred bytes (whose read then chose windows of time).
TRAILER_TRUSTED_WITHIN = 3
# A file's lines are counted in its first bytes (decompressed) and scaled to its size: 16 KB hold
# about 40 lines of 400 bytes (the 1M, 5M and 10M exports' lines estimated within 2 %). Reading
# them rather than the 8 bytes that name a compression costs about 10 ms for 837 files, 30 ms for 4,155.
SAMPLE_BYTES = 16 << 10
# The length of a line where no sample can be read (a bz2 block needs more than the sample): short,
# so that the estimate errs high.
DEFAULT_LINE_BYTES = 200
# A cgroup "limit" this large means no limit (cgroup v1 writes 2^63 rounded to a page).
NO_LIMIT = 1 << 60


class LogSize(NamedTuple):
    """About how much log text some files hold once decompressed: bytes, lines, and the records of
    JSON documents (whose lines are not counted)."""

    bytes: int
    lines: int
    records: int = 0


def log_bytes(sources: list[Source], memo: Path | None = None) -> int:
    """About how many bytes of log text the files hold once decompressed (stdin counts nothing)."""
    return log_size(sources, memo).bytes


def log_size(sources: list[Source], memo: Path | None = None) -> LogSize:
    """About how many bytes and lines of log text the files hold once decompressed (stdin counts
    nothing).

    The estimate is kept under the files' identities (resolved paths, sizes, modification times):
    for the process, and with `memo` (the cache directory) there too. A command estimates its
    inputs twice when it reads them (the choice of a whole read, the warning before it), and a
    command over the same unchanged files reads one small file instead of opening each input
    (20,000 files: 0.1-0.25 s each time)."""
    key = _memo_key(sources)
    if key is not None:
        found = _totals.get(key)
        if found is None and memo is not None:
            found = _memo_read(memo, key)
        if found is not None:
            _totals[key] = found
            return found
    total = _log_size(sources)
    if key is not None:
        if len(_totals) >= 64:
            _totals.clear()
        _totals[key] = total
        if memo is not None:
            _memo_write(memo, key, total)
    return total


def _log_size(sources: list[Source]) -> LogSize:
    total = lines = records = 0
    for src in sources:
        if not src.rereadable:  # stdin, a pipe: unknown, and what is read of it here is gone
            continue
        # os-level calls: through Path objects and a buffered file, 20,000 small files took 0.26 s
        # instead of 0.1 s, before every command that may read them.
        try:
            fd = os.open(src.file, os.O_RDONLY)
        except OSError:
            continue
        try:
            size = os.fstat(fd).st_size
            head = os.read(fd, SAMPLE_BYTES)
            compression = detect_compression(head[:8])
            sample = _decompressed(head, compression)
            text = size
            if compression == "gzip":
                text = _gzip_text_bytes(fd, size, head, sample)
            elif compression in ("bz2", "xz"):
                text = size * ASSUMED_RATIO
        except (OSError, struct.error):
            continue
        finally:
            os.close(fd)
        total += text
        whole, start = compression == "none" and len(head) == size, sample.text if sample else None
        in_document = _document_records(text, start, whole)
        if in_document:
            records += in_document
        else:
            lines += _lines_in(text, start, whole)
    return LogSize(total, lines, records)


class _Sample(NamedTuple):
    """The text at the start of a file, and how many of its packed bytes gave it (gzip; for a
    plain or xz file, the bytes read)."""

    text: bytes
    packed: int


def _gzip_text_bytes(fd: int, size: int, head: bytes, sample: _Sample | None) -> int:
    """About how many bytes of text a gzip file holds: its trailer's size (of its last member,
    modulo 2^32) where that agrees with the ratio of its first bytes, else that ratio's estimate."""
    if sample is None or not sample.packed:  # not readable from its start: its read rejects it
        return size
    if len(head) == size and len(sample.text) < SAMPLE_BYTES:
        return len(sample.text)  # the whole file, decompressed
    estimate = max(size, round(size * len(sample.text) / sample.packed * START_RATIO_BIAS))
    if size < 18:
        return estimate
    os.lseek(fd, -4, os.SEEK_END)
    trailer = struct.unpack("<I", os.read(fd, 4))[0]
    stated = trailer + max(0, round((estimate - trailer) / 2**32)) * 2**32  # a text of 4 GB or more wraps
    if estimate / TRAILER_TRUSTED_WITHIN <= stated <= estimate * TRAILER_TRUSTED_WITHIN:
        return max(stated, size)
    return estimate


def _lines_in(text: int, sample: bytes | None, whole: bool) -> int:
    """About how many lines `text` bytes of log hold, from the text at the file's start (`sample`;
    `whole`: the whole file)."""
    if not sample:  # nothing to count in (an empty file: no text, no line)
        return -(-text // DEFAULT_LINE_BYTES)
    newlines = sample.count(b"\n")
    if whole:
        return newlines + (not sample.endswith(b"\n"))
    if not newlines:  # one line longer than the sample: at most a line a sample's bytes
        return -(-text // len(sample))
    return -(-text * newlines // (sample.rfind(b"\n") + 1))  # the sample's whole lines


def _document_records(text: int, sample: bytes | None, whole: bool) -> int:
    """About how many records `text` bytes of a JSON document hold (not NDJSON: its first line is
    not a whole value), from its objects in the sample; 0 if it is not such a document."""
    start = (sample or b"").lstrip(b"\xef\xbb\xbf \t\r\n")
    if not start.startswith((b"[", b"{")):
        return 0
    if start.startswith(b"{"):
        try:
            orjson.loads(start.split(b"\n", 1)[0])
            return 0  # a record a line
        except orjson.JSONDecodeError:
            pass
    cuts = objects_cut(start)
    if not cuts:
        return 0
    return cuts + 1 if whole else -(-text * cuts // len(sample))


def _decompressed(head: bytes, compression: str) -> _Sample | None:
    """The text at the start of a file from its first bytes; None or nothing when they do not give it."""
    try:
        if compression == "none":
            return _Sample(head, len(head))
        if compression == "gzip":  # through the members that follow (Firehose: one a message)
            text, packed = b"", 0
            while len(text) < SAMPLE_BYTES and packed < len(head) and head[packed:packed + 2] == b"\x1f\x8b":
                inflate = zlib.decompressobj(wbits=31)
                text += inflate.decompress(head[packed:], SAMPLE_BYTES - len(text))
                packed = len(head) - len(inflate.unconsumed_tail) - len(inflate.unused_data)
                if not inflate.eof:
                    break
            return _Sample(text, packed)
        if compression == "xz":
            return _Sample(lzma.LZMADecompressor().decompress(head, max_length=SAMPLE_BYTES), len(head))
    except (zlib.error, lzma.LZMAError, EOFError):
        return None
    return None  # bz2 (a block is larger than the sample), formats dupfind does not read


def _memo_key(sources: list[Source]) -> str | None:
    """What the estimate of these files depends on: each one's sources.file_identity (its
    resolved path, size and modification time), from the stat its listing took; None when a file
    cannot be examined. Standard input counts nothing, and is left out."""
    found = identities([src for src in sources if src.file is not None])
    if found is None:
        return None
    return hashlib.sha256("\0".join([MEMO_FORMAT, *(identity for _, identity in found)]).encode()).hexdigest()[:32]


def _memo_check(key: str, total: LogSize) -> int:
    """A damaged entry, or one moved from another key, is not trusted."""
    return zlib.crc32(f"{key}|{total.bytes}|{total.lines}|{total.records}".encode())


def _memo_path(root: Path, key: str) -> str:
    # In the cache's shards of per-file entries: pruned with them when unused for long.
    return os.path.join(root, key[:2], f"{key}{MEMO_SUFFIX}")


def _memo_read(root: Path, key: str) -> LogSize | None:
    path = _memo_path(root, key)
    try:
        with open(path, "rb") as fh:
            kept = orjson.loads(fh.read())
        numbers = kept.get("log_bytes"), kept.get("lines"), kept.get("records")
        if not all(type(n) is int and n >= 0 for n in numbers):
            raise ValueError("not an estimate")
        found = LogSize(*numbers)
        if kept.get("check") != _memo_check(key, found):
            raise ValueError("not this estimate")
    except OSError:
        return None
    except (ValueError, AttributeError):  # damaged or foreign: estimated again, and written anew
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used
    return found


def _memo_write(root: Path, key: str, total: LogSize) -> None:
    path = _memo_path(root, key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        kept = {"log_bytes": total.bytes, "lines": total.lines, "records": total.records, "check": _memo_check(key, total)}
        write_atomic(path, orjson.dumps(kept))
    except OSError:
        pass  # a read-only or full cache directory only means no memo


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_limit_files(cgroup: Path, membership: Path) -> list[Path]:
    """The memory limit files of this process's cgroup and of each of its ancestors (v2 and v1)."""
    files: list[Path] = []
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if controllers == "":
            base, name = cgroup, "memory.max"  # v2: one unified hierarchy
        elif "memory" in controllers.split(","):
            base, name = cgroup / "memory", "memory.limit_in_bytes"
        else:
            continue
        parts = [p for p in path.split("/") if p]
        files += [base.joinpath(*parts[:depth]) / name for depth in range(len(parts), -1, -1)]
    return files


def available_bytes(
    meminfo: Path = Path("/proc/meminfo"), cgroup: Path = Path("/sys/fs/cgroup"),
    membership: Path = Path("/proc/self/cgroup"),
) -> int | None:
    """Memory this process can get: the kernel's MemAvailable, capped by the memory limit of its
    cgroup or any ancestor (v2 `memory.max`, v1 `memory.limit_in_bytes`); None where neither is known."""
    found: list[int] = []
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
                break
    except (OSError, ValueError, IndexError):
        pass
    for limit_file in _cgroup_limit_files(cgroup, membership):
        limit = _read_int(limit_file)
        if limit is not None and limit < NO_LIMIT:
            found.append(limit)
    return min(found) if found else None


def needed_bytes(size: LogSize) -> float:
    """About the peak memory of a cold analysis of `size` (log text), read whole."""
    return PEAK_PER_LOG_BYTE * size.bytes + PEAK_PER_LINE * size.lines + PEAK_PER_DOCUMENT_RECORD * size.records + PEAK_FIXED_BYTES


def part_needed_bytes(size: float) -> float:
    """About the peak memory of a read of `size` bytes of log text that is part of the inputs."""
    return PART_PEAK_PER_LOG_BYTE * size + PART_PEAK_FIXED_BYTES


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def _lines(n: int) -> str:
    return f"about {n / 1e6:.1f} million lines" if n >= 10**6 else f"about {n:,} lines"


def memory_warning(sources: list[Source], available: int | None = None) -> str | None:
    """One sentence when a cold analysis of these inputs would likely need more memory than is
    available (it may then be killed by the kernel), else None."""
    size = log_size(sources)
    if size.bytes == 0:
        return None
    available = available if available is not None else available_bytes()
    needed = needed_bytes(size)
    if available is None or needed <= available:
        return None
    return (
        f"these inputs hold about {_gb(size.bytes)} of log text ({_lines(size.lines + size.records)}); analysing them needs about {_gb(needed)} "
        f"of memory and about {_gb(available)} is available, so the run may be killed: narrow it with "
        "--since/--until (records outside the window are dropped as they are read) or fewer files."
    )
