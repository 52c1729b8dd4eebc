"""Input sources: expand paths, detect compression by magic bytes, read line chunks."""

from __future__ import annotations

import bz2
import io
import lzma
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISFIFO, S_ISLNK, S_ISREG, S_ISSOCK
from typing import BinaryIO

from dupfind.errors import DupfindError

MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (ZSTD_MAGIC := b"\x28\xb5\x2f\xfd", "zstd"),
    (b"PK\x03\x04", "zip"),
)
SUPPORTED_COMPRESSION = {"none", "gzip", "bz2", "xz", "zstd"}
# A file is read (and its lines parsed) this many bytes at a time. 8 MB rather than 16: a cold
# 1M-line run peaked at 518-538 MB instead of 574-605 MB, in the same time within the noise (5M
# lines: the same peak, 74.6 s against 79.3 s; 20,000 small files: 285 MB against 330 MB).
CHUNK_BYTES = 8 << 20
IDENTITY_FIELDS = 4  # what file_identity gives after the path, each after a `|`
# The suffixes log rotation adds after a log's own extension: a number (logrotate, Python's
# RotatingFileHandler, Docker's json-file `-json.log.1`), a date (logrotate's `dateext`, Python's
# TimedRotatingFileHandler, the kubelet's `0.log.20261205-101500`), then compression.
_ROTATED = re.compile(
    r"(\.(?:log|json|ndjson|jsonl|txt|out|err))"
    r"(?:\.\d{1,4}|[.-]\d{8}(?:[-_]?\d{2,10})?|[.-]\d{10}|\.\d{4}-\d{2}-\d{2}(?:[_T-]\d{2}(?:[-:]?\d{2}){0,2})?)?"
    r"(?:\.(?:gz|bz2|xz|zst|lz4))?$"
)


# What an archive is called (dupfind.archives): a name is enough (reading every input's first
# bytes to find one would cost a warm run over 20,000 small files an open each).
ARCHIVE_NAME = re.compile(r"\.(?:zip|tar|tgz|tbz2?|txz|tzst|tar\.(?:gz|bz2|xz|zst))$", re.IGNORECASE)


@dataclass(slots=True)
class Source:
    """One input: a file path or standard input."""

    path: str
    file: str | None  # the file's path as listed (the same text as `path`); None for stdin
    # A regular file: a directory's files are; a path named on the command line may be a pipe
    # (bash's `<(zcat logs.gz)`) or a device, whose bytes are gone once read: only ingest reads it.
    regular: bool = True
    # Resolved directories shared by the files of one listing (see file_identity).
    _real_dirs: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    _identity: str | None = field(default=None, repr=False, compare=False)

    @property
    def is_stdin(self) -> bool:
        return self.file is None

    @property
    def rereadable(self) -> bool:
        """Whether its lines can be read again by number: a regular file (a read in windows reads
        it more than once; a rejected line's text is read again), not standard input or a pipe."""
        return self.file is not None and self.regular

    def identity(self) -> str | None:
        """file_identity of the file, taken once per listing (None: standard input, a pipe, or a
        file that cannot be examined)."""
        if self._identity is None and self.file is not None:
            self._identity = file_identity(self.file, real_dirs=self._real_dirs)
        return self._identity


def log_stem(path: str) -> str:
    """The path of the log a rotated part belongs to: `worker.log.1`, `worker.log-20261205.gz`
    and `worker.log` name one log (one worker's, one clock)."""
    return _ROTATED.sub(r"\1", path, count=1)


_COMPRESSED = re.compile(r"\.(?:gz|bz2|xz|zst|lz4)$")
_NUMBERED = re.compile(r"\d+(?:\.log)?")
# The kubelet's folder of a pod's logs, `/var/log/pods/<namespace>_<pod>_<pod uid>/<container>/0.log`.
_KUBELET_POD = re.compile(r"[^_/]+_(?P<pod>[^_/]+)_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


# A second download's name (`worker (1).log`, as browsers and desktops name it): the same log.
_DOWNLOAD_COPY = re.compile(r" \(\d{1,3}\)(?=(?:\.[\w-]+)*$)")


def log_owner(path: str) -> str:
    """The path whose last name names the process that wrote a log: its stem (log_stem, without
    compression, nor a second download's ` (1)`), or for a file named by a number its folder: the
    pod of the kubelet's `<namespace>_<pod>_<uid>/<container>/0.log`, the log stream of a
    CloudWatch Logs export to S3 (`<task>/<stream>/000000.gz`)."""
    head, sep, name = path.rpartition("/")
    if " (" in name:
        path = head + sep + _DOWNLOAD_COPY.sub("", name, count=1)
    stem = _COMPRESSED.sub("", log_stem(path))
    folder, _, name = stem.rpartition("/")
    if not folder or not _NUMBERED.fullmatch(name):
        return stem
    above, _, pods = folder.rpartition("/")[0].rpartition("/")
    pod = _KUBELET_POD.fullmatch(pods)
    return f"{above}/{pod.group('pod')}".lstrip("/") if pod else folder


def identities(sources: list[Source]) -> list[tuple[str, str]] | None:
    """(path, identity) of each source, what keys a set of inputs in the caches; None when one is
    standard input or a file that cannot be examined."""
    found = []
    for src in sources:
        identity = src.identity()
        if identity is None:
            return None
        found.append((src.path, identity))
    return found


def file_identity(path: str, real_dirs: dict[str, str] | None = None) -> str | None:
    """What names a file's contents for the caches, `resolved path|size|mtime_ns|ctime_ns|inode`
    (None when it cannot be examined, or is not a regular file: a pipe's stat does not name what
    it holds), from one lstat. Size and mtime alone miss a file rewritten at the same size whose
    mtime was put back (`tar x`, `cp -p`, `rsync -t`, a same-length masking of personal data): its
    change time moves with any write and cannot be set back, and a file replaced by another (`mv`)
    has another inode. Resolving a path is a system call a part: `real_dirs` keeps each
    directory's, by its text (for one command, which does not change its working directory, while
    links may change between commands)."""
    try:
        stat = os.lstat(path)
        if S_ISLNK(stat.st_mode) or (".." in path and _dot_dot_inside(path)):
            stat, resolved = os.stat(path), str(Path(path).resolve())
        else:
            directory, name = _split(path)
            prefix = real_dirs.get(directory) if real_dirs is not None else None
            if prefix is None:
                real = os.path.realpath(os.path.abspath(directory))
                prefix = real if real.endswith(os.sep) else real + os.sep
                if real_dirs is not None:
                    real_dirs[directory] = prefix
            resolved = prefix + name
    except OSError:
        return None
    if not S_ISREG(stat.st_mode):
        return None
    return f"{resolved}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}|{stat.st_ino}"


def _split_posix(path: str) -> tuple[str, str]:
    """os.path.split for paths as listed (no trailing separator), in a fifth of its time."""
    directory, sep, name = path.rpartition("/")
    return (directory or sep), name  # `/f.log`: `/`; `f.log`: ``


_split = os.path.split if os.name == "nt" else _split_posix


def _dot_dot_inside(path: str) -> bool:
    """Whether `..` follows a named part of the path: after a link it is not lexical (`../logs`,
    from the working directory the kernel already resolved, is)."""
    parts = Path(path).parts
    start = 0
    while start < len(parts) and parts[start] == "..":
        start += 1
    return ".." in parts[start:]


# Listings kept for the command that runs (see listings_kept); None: every listing is made afresh.
_kept_listings: dict[tuple[str, ...], list[Source]] | None = None


@contextmanager
def listings_kept() -> Iterator[None]:
    """Within it, listing the same paths again gives the same files, each examined once: a command
    lists its inputs for its memory estimate, its cache keys and its read (an export of 20,000
    files: 0.03 s a listing, 0.05 s for the files' identities). What must see the files as they
    are now (the check before a cache entry is stored) lists them with `fresh`."""
    global _kept_listings
    outer, _kept_listings = _kept_listings, {} if _kept_listings is None else _kept_listings
    try:
        yield
    finally:
        _kept_listings = outer


def expand_inputs(paths: list[str], fresh: bool = False) -> list[Source]:
    """Files, directories (recursive, sorted, hidden entries skipped) and `-` for stdin; within
    listings_kept(), the listing already made of the same paths unless `fresh`."""
    kept = _kept_listings
    if kept is None or fresh:
        return _expand(paths)
    listed = kept.get(tuple(paths))
    if listed is None:
        listed = kept[tuple(paths)] = _expand(paths)
    return list(listed)


def _expand(paths: list[str]) -> list[Source]:
    sources: list[Source] = []
    real_dirs: dict[str, str] = {}
    seen: set[str] = set()
    for raw in paths:
        if raw == "-":
            if "-" not in seen:
                sources.append(Source("-", None))
                seen.add("-")
            continue
        path = Path(raw)
        if not path.exists():
            raise DupfindError(f"{raw} does not exist.")
        if not _is_utf8(raw):
            raise DupfindError(f"{raw} is a name that is not UTF-8, which reports cannot show: rename it to read it.")
        regular = True
        if path.is_dir():
            left_out: list[str] = []
            files = _files_under(path, left_out)
            _say_left_out(raw, left_out)
            if not files:
                raise DupfindError(f"{raw} is a directory with no files in it.")
        else:
            files, regular = [str(path)], path.is_file()
        for file in files:
            for name, real in _archive_files(file, file) if regular and ARCHIVE_NAME.search(file) else [(file, file)]:
                if name not in seen:
                    seen.add(name)
                    sources.append(Source(name, real, regular, real_dirs))
    if not sources:
        raise DupfindError("no input given: name log files or directories, or - for standard input.")
    return _read_once(sources)


def _archive_files(path: str, label: str, depth: int = 0) -> list[tuple[str, str]]:
    """(name, file) of the files an archive holds (its path and the member's, the file extracted:
    dupfind.archives), archives in it too; [(label, path)] when it is not one."""
    from dupfind.archives import NESTED_MAX, archive_members

    members = archive_members(path, label) if depth <= NESTED_MAX else None
    if members is None:
        return [(label, path)]
    return [found for name, real in members
            for found in (_archive_files(real, name, depth + 1) if ARCHIVE_NAME.search(name) else [(name, real)])]


def _read_once(sources: list[Source]) -> list[Source]:
    """The sources, less those that are a file already among them under another name (a directory
    named twice, `logs/` and `/abs/logs/`; a link to a file beside it, as `current.log`; a hard
    link): read twice, each of its records would be a duplicate of itself. Of the names of one
    file the first that is not a symbolic link is kept (a file's name may name its worker). Said on
    stderr."""
    identities = [(i, identity) for i, src in enumerate(sources) if src.regular and (identity := src.identity())]
    inodes = [identity[identity.rindex("|") + 1:] for _, identity in identities]
    if len(set(inodes)) == len(inodes):  # the common case, at 0.2 us a file (20,000 files: 4 ms, not 15)
        return sources
    names: dict[str, list[int]] = {}  # size|mtime|ctime|inode -> the sources that name the file
    for i, identity in identities:
        names.setdefault("|".join(identity.rsplit("|", IDENTITY_FIELDS)[1:]), []).append(i)
    dropped: dict[int, int] = {}  # a source left out -> the one kept for its file
    for same in names.values():
        if len(same) > 1:
            keep = next((i for i in same if not os.path.islink(sources[i].file)), same[0])
            dropped.update((i, keep) for i in same if i != keep)
    if not dropped:
        return sources
    say_once(lambda n: f"{n} {'input names a file' if n == 1 else 'inputs name files'} already named, read once",
              [f"{sources[i].path} (same file as {sources[keep].path})" for i, keep in dropped.items()])
    return [src for i, src in enumerate(sources) if i not in dropped]


def _files_under(root: Path, left_out: list[str] | None = None) -> list[str]:
    """The files under a directory, as `sorted(str(p) for p in root.rglob("*") if p.is_file())`
    gives them without hidden entries: symbolic links to directories not followed, directories that
    cannot be listed skipped. Walked with os.scandir, sorted by their parts as text and joined as
    text (an export of 20,000 files: rglob's Path objects, a stat per entry and Path comparisons
    took 0.5 s; a Path per file was still 0.05 s). `left_out` gets each entry that is not read,
    other than hidden ones, with why (relative to `root`)."""
    # Relative paths with their parts joined by NUL, which no name holds: they sort as their parts do.
    found: list[str] = []
    pending = [""]
    while pending:
        relative = pending.pop()
        head = relative + "\0" if relative else ""
        try:
            with os.scandir(os.path.join(root, *relative.split("\0"))) as entries:
                listed = list(entries)
        except (PermissionError, FileNotFoundError, NotADirectoryError) as exc:
            if left_out is not None and relative:
                left_out.append(f"{_as_path(relative)} ({_unlisted(exc)})")
            continue
        for entry in listed:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(head + name)
                elif entry.is_file():
                    found.append(head + name)
                elif left_out is not None:
                    left_out.append(f"{_as_path(head + name)} ({_not_read(entry)})")
            except OSError:
                continue
    if not _is_utf8("\0".join(found)):  # one check for every name; the names apart only when one fails
        kept: list[str] = []
        for relative in found:
            if _is_utf8(relative):
                kept.append(relative)
            elif left_out is not None:
                left_out.append(f"{_as_path(relative)} (a name that is not UTF-8: rename it to read it)")
        found = kept
    # Path orders by its parts (case-folded on Windows), not by the text of the whole path.
    found.sort(key=os.path.normcase if os.name == "nt" else None)
    base = str(root)  # as Path writes it: `logs/`, `./logs` and `logs//` are `logs`
    bare = base.endswith(os.sep) or (os.name == "nt" and base.endswith(":"))  # `/`, `C:\\`; `C:` joins as `C:a`
    prefix = "" if base == "." else base if bare else base + os.sep
    return [prefix + _as_path(relative) for relative in found]


def _is_utf8(name: str) -> bool:
    """Whether a name as the system gave it is text: the bytes of one that is not UTF-8 come as
    lone surrogates, which polars, JSON and the cache keys cannot hold (every command failed)."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def _as_path(relative: str) -> str:
    """A relative path of _files_under (its parts joined by NUL) as a path."""
    return relative.replace("\0", os.sep)


def _unlisted(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "a directory that cannot be listed: permission denied"
    return "a directory gone while it was listed"


def _not_read(entry: os.DirEntry) -> str:
    """Why a directory's entry that is neither a file nor a directory is not read."""
    try:
        if entry.is_symlink():
            if not os.path.exists(entry.path):
                return "a broken link"
            return "a link to a directory, not followed"
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return "cannot be examined"
    if S_ISFIFO(mode):
        return "a pipe"
    if S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


# Entries a listing left out, said once a process (a command lists its inputs more than once).
_said_left_out: set[tuple[str, str]] = set()
LEFT_OUT_NAMED = 5


def _say_left_out(root: str, left_out: list[str]) -> None:
    """One line on stderr naming the entries under `root` that are not read (nothing is left out
    without a word), each said once a process; names are the export's, shown escaped."""
    from dupfind.render.safe import safe_str

    say_once(lambda n: f"{n} {'entry' if n == 1 else 'entries'} under {safe_str(root)} not read", left_out, root)


def say_once(what: Callable[[int], str], entries: list[str], scope: str = "") -> None:
    """`dupfind: {what(n)}: ` and the first LEFT_OUT_NAMED of the n `entries` not said yet this
    process (escaped); nothing when every one was."""
    new = sorted(entry for entry in entries if (scope, entry) not in _said_left_out)
    if not new:
        return
    from dupfind.render.safe import safe_str

    _said_left_out.update((scope, entry) for entry in new)
    named = ", ".join(safe_str(entry) for entry in new[:LEFT_OUT_NAMED])
    if len(new) > LEFT_OUT_NAMED:
        named += f" and {len(new) - LEFT_OUT_NAMED} more"
    sys.stderr.write(f"dupfind: {what(len(new))}: {named}\n")


def _open_raw(source: Source) -> BinaryIO:
    if source.file is None:
        return sys.stdin.buffer
    try:
        return open(source.file, "rb")
    except PermissionError:
        raise DupfindError(f"{source.path} cannot be read: permission denied.") from None
    except OSError as exc:
        raise DupfindError(f"{source.path} cannot be read: {exc.strerror or exc}.") from None


def detect_compression(head: bytes) -> str:
    for magic, name in MAGIC:
        if head.startswith(magic):
            return name
    return "none"


def _new_decompressor(compression: str):
    if compression == "gzip":
        return zlib.decompressobj(wbits=31)
    if compression == "bz2":
        return bz2.BZ2Decompressor()
    if compression == "zstd":
        return _ZstdFrame()
    return lzma.LZMADecompressor()


class _ZstdFrame:
    """zstandard's decompressor of one frame, as the standard library's decompressors are used
    (decompress, eof, unused_data), its errors a ValueError. Imported when a file needs it."""

    def __init__(self) -> None:
        import zstandard  # logrotate's `compresscmd zstd`, a `.tar.zst` bundle: not on every run

        self._error = zstandard.ZstdError
        self._frame = zstandard.ZstdDecompressor().decompressobj()

    def decompress(self, data) -> bytes:
        try:
            return self._frame.decompress(data)
        except self._error as exc:
            raise ValueError(str(exc)) from None

    @property
    def eof(self) -> bool:
        return self._frame.eof

    @property
    def unused_data(self) -> bytes:
        return self._frame.unused_data


MEMBER_FEED = 32 << 10  # compressed bytes given to a decompressor at once


class _Decompressing(io.RawIOBase):
    """Streams decompressed bytes; concatenated members are followed, and a truncated or
    corrupt tail ends the stream with `truncated` set instead of losing what was read."""

    def __init__(self, raw: BinaryIO, compression: str) -> None:
        self.raw = raw
        self.compression = compression
        self.decompressor = _new_decompressor(compression)
        self.unfed = memoryview(b"")  # what was read of the raw stream and not yet decompressed
        self.pending = b""
        self.truncated = False
        self.error = ""
        self.done = False

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        """Closes the compressed file too (a file's handle was held until collected)."""
        if not self.closed:
            self.raw.close()
        super().close()

    def _fill(self) -> None:
        while not self.pending and not self.done:
            if not self.unfed:
                block = self.raw.read(1 << 20)
                if not block:
                    if not self.decompressor.eof:
                        self.truncated = True
                        self.error = "the compressed stream ends before its end marker"
                    self.done = True
                    return
                self.unfed = memoryview(block)
            # Fed a piece at a time: at each member's end the decompressor copies what it was
            # given after it, so a feed of the whole block made many small members (Kinesis
            # Data Firehose's objects: one a message) cost the block again each.
            data, self.unfed = self.unfed[:MEMBER_FEED], self.unfed[MEMBER_FEED:]
            out = []
            try:
                while data:
                    if self.decompressor.eof:
                        # zero padding after the last member (a member begins with its magic
                        # bytes: only data that begins with a zero is copied to be looked at)
                        if not data[0] and not bytes(data).strip(b"\x00"):
                            break
                        self.decompressor = _new_decompressor(self.compression)
                    out.append(self.decompressor.decompress(data))
                    data = self.decompressor.unused_data if self.decompressor.eof else b""
            except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError) as exc:
                self.truncated = True
                self.error = str(exc) or type(exc).__name__
                self.done = True
                return
            finally:
                self.pending = b"".join(out)

    def readinto(self, buffer) -> int:  # type: ignore[override]
        self._fill()
        if not self.pending:
            return 0
        size = min(len(buffer), len(self.pending))
        buffer[:size] = self.pending[:size]
        self.pending = self.pending[size:]
        return size


def decompressed_stream(path: str, compression: str) -> BinaryIO:
    """A compressed file's bytes decompressed as read (a damaged or cut-off tail ends them)."""
    return io.BufferedReader(_Decompressing(open(path, "rb"), compression), 1 << 20)


@dataclass
class OpenedSource:
    """A source opened for reading decompressed bytes."""

    source: Source
    compression: str
    stream: BinaryIO
    tolerant: _Decompressing | None

    @property
    def truncated(self) -> bool:
        return bool(self.tolerant and self.tolerant.truncated)

    @property
    def truncation_error(self) -> str:
        return self.tolerant.error if self.tolerant else ""


def open_source(source: Source) -> OpenedSource:
    """Open a source and transparently decompress gzip, bz2, xz and zstd by magic bytes."""
    raw = _open_raw(source)
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type]
    head = buffered.peek(8)[:8]
    compression = detect_compression(head)
    if compression == "none":
        return OpenedSource(source, compression, buffered, None)
    if compression not in SUPPORTED_COMPRESSION:
        return OpenedSource(source, compression, buffered, None)
    tolerant = _Decompressing(buffered, compression)
    return OpenedSource(source, compression, io.BufferedReader(tolerant, 1 << 20), tolerant)


def iter_blocks(stream: BinaryIO, chunk_bytes: int = CHUNK_BYTES, head: bytes = b"") -> Iterator[bytes]:
    """Yield blocks as read, cut anywhere (`head`: the first, read already)."""
    if head:
        yield head
    while block := stream.read(chunk_bytes):
        yield block


def iter_chunks(stream: BinaryIO, chunk_bytes: int = CHUNK_BYTES, head: bytes = b"") -> Iterator[bytes]:
    """Yield blocks of whole lines (split at the last newline); the last may lack one (`head`:
    the start of the first, read already)."""
    carry = b""
    while True:
        block, head = head or stream.read(chunk_bytes), b""
        if not block:
            break
        cut = block.rfind(b"\n")
        if cut < 0:
            carry += block
            continue
        # One copy of the block's whole lines, with the line the last block began (a concatenation
        # and then a slice copied each 8 MB block twice); the block read is let go before the
        # reader takes the lines.
        lines = block if not carry and cut + 1 == len(block) else b"".join((carry, memoryview(block)[: cut + 1]))
        carry, block = block[cut + 1 :], b""
        yield lines
        del lines
    if carry:
        yield carry
