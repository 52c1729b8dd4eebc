"""Archives among the inputs (a support bundle's tar.gz, a zip of logs): their files extracted once, read as files."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import IO

import orjson

from dupfind.errors import DupfindError
from dupfind.sources import ZSTD_MAGIC

ARCHIVES = "archives"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
# An extraction unused this long is removed when another archive is extracted.
UNUSED_SECONDS = 30 * 24 * 3600
# Room left on the disk after extracting (an archive's members may be far larger than it).
SPARE_BYTES = 256 << 20
COPY_BYTES = 1 << 20
SAID_BYTES = 64 << 20  # an archive this large is said on stderr as its extraction starts
NESTED_MAX = 2  # archives inside archives read this deep


class _Extraction:
    """Where one archive's files go, and what was left out of them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.members: list[str] = []  # relative posix names, as extracted under folder/files
        self.left_out: list[str] = []  # "name (why)"
        self.cut_short: str | None = None  # the member where the archive ended or broke


def archive_members(path: str, label: str) -> list[tuple[str, str]] | None:
    """(label/member, extracted file) of each file an archive holds, extracted once under the
    cache directory (again only when the archive changes); None when `path` is not an archive
    (read as a file). Members that are not regular files, or whose names are absolute, go above
    the archive or are hidden, are left out and said on stderr."""
    from dupfind.sources import file_identity

    identity = file_identity(path)
    if identity is None:
        return None
    root = _archives_root()
    key = hashlib.sha256(f"{MANIFEST_FORMAT}|{identity}".encode()).hexdigest()[:24]
    folder = root / key
    done = _read_manifest(folder)
    if done is None:
        shutil.rmtree(folder, ignore_errors=True)  # a damaged earlier extraction, if any
        done = _extract(path, label, root, key)
        if done is None:
            return None
    else:
        os.utime(folder / MANIFEST)  # in use: not pruned
    members, left_out, cut_short = done
    _say(label, members, left_out, cut_short)
    files = folder / "files"
    return [(f"{label}/{name}", str(files / name)) for name in sorted(members)]  # as a folder's files are


def _archives_root() -> Path:
    """The archives' folder in the cache directory, or a temporary one removed at exit when the
    cache directory cannot be written."""
    from dupfind.cache import default_cache_dir

    root = default_cache_dir() / ARCHIVES
    try:
        root.mkdir(parents=True, exist_ok=True)
        if os.access(root, os.W_OK | os.X_OK):
            return root
    except OSError:
        pass
    return _temporary_root()


_TEMPORARY: list[Path] = []


def _temporary_root() -> Path:
    if not _TEMPORARY:
        import atexit

        _TEMPORARY.append(Path(tempfile.mkdtemp(prefix="dupfind-archives-")))
        atexit.register(shutil.rmtree, _TEMPORARY[0], ignore_errors=True)
    return _TEMPORARY[0]


def _read_manifest(folder: Path) -> tuple[list[str], list[str], str | None] | None:
    """What an earlier extraction left (its manifest is written last); None when there is none or
    it is damaged or foreign (extracted again)."""
    try:
        kept = orjson.loads((folder / MANIFEST).read_bytes())
        members, left_out, cut_short = kept["members"], kept["left_out"], kept["cut_short"]
        if kept.get("format") != MANIFEST_FORMAT or not all(isinstance(m, str) for m in [*members, *left_out]):
            return None
        if any(not _safe_name(m) or _hidden(m) or not (folder / "files" / m).is_file() for m in members):
            return None
        return members, left_out, cut_short if isinstance(cut_short, str) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _extract(path: str, label: str, root: Path, key: str) -> tuple[list[str], list[str], str | None] | None:
    """Extract an archive's files into root/key (through a folder of its own, renamed when done);
    None when it is not an archive after all."""
    _prune(root)
    work = Path(tempfile.mkdtemp(prefix=f"{key}.", suffix=".partial", dir=root))
    extraction = _Extraction(work)
    try:
        if zipfile.is_zipfile(path):
            _said(path, label, root)
            _extract_zip(path, label, extraction)
        else:
            try:
                archive, stream = _open_tar(path)
            except _BROKEN:
                shutil.rmtree(work, ignore_errors=True)
                return None
            _said(path, label, root)
            with archive, stream or contextlib.nullcontext():
                _extract_tar(archive, label, extraction)
        manifest = {"format": MANIFEST_FORMAT, "members": extraction.members, "left_out": extraction.left_out,
                    "cut_short": extraction.cut_short}
        (work / MANIFEST).write_bytes(orjson.dumps(manifest))
        target = root / key
        try:
            work.rename(target)
        except OSError:  # another command extracted it meanwhile: theirs is read
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return extraction.members, extraction.left_out, extraction.cut_short


def _said(path: str, label: str, root: Path) -> None:
    """A large archive's extraction, said as it starts."""
    if os.path.getsize(path) > SAID_BYTES:
        from dupfind.render.safe import safe_str

        sys.stderr.write(f"dupfind: {safe_str(label)}: extracting its files under {safe_str(str(root))} (once: read from there"
                         " while the archive is unchanged)\n")


def _prune(root: Path) -> None:
    """Extractions unused for UNUSED_SECONDS, and ones a stopped command left half done."""
    now = time.time()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.name.endswith(".partial"):
                stale = now - entry.stat().st_mtime > 24 * 3600
            else:
                stale = now - os.stat(os.path.join(entry.path, MANIFEST)).st_mtime > UNUSED_SECONDS
        except OSError:
            stale = not entry.name.endswith(".partial")
        if stale and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)


def _safe_name(name: str) -> bool:
    """A relative name that stays inside the archive's folder."""
    path = PurePosixPath(name)
    return bool(path.parts) and not path.is_absolute() and ".." not in path.parts and "\0" not in name


def _hidden(name: str) -> bool:
    """A hidden member (`.DS_Store`, `__MACOSX/`, `._a.log`): left out as a folder's are."""
    return any((part.startswith(".") and part not in (".", "..")) or part == "__MACOSX" for part in PurePosixPath(name).parts)


def _member_name(raw: str) -> str:
    """A member's name as a relative path (`./logs/a.log` -> `logs/a.log`)."""
    name = raw.replace("\\", "/")  # a zip made on Windows by some tools
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/")


def _admit(extraction: _Extraction, raw: str, size: int, other: str | None, label: str) -> Path | None:
    """Where a member goes, or None (left out, and why): `other` says what it is when it is not a
    regular file (a folder is left out without a word), hidden, a name that is absolute or goes
    above the archive, a second member of one name; more than the disk can take is an error."""
    name = _member_name(raw)
    if _hidden(name) or other == "folder":
        return None
    if other is not None:
        extraction.left_out.append(f"{raw} ({other})")
        return None
    if not _safe_name(name):
        extraction.left_out.append(f"{raw} (a name outside the archive)")
        return None
    target = extraction.folder / "files" / name
    if target.exists():
        extraction.left_out.append(f"{raw} (a second member of that name)")
        return None
    if size + SPARE_BYTES > shutil.disk_usage(extraction.folder).free:
        raise DupfindError(f"{label} holds {name} of {size:,} bytes, more than the disk under {extraction.folder.parent} has room "
                           "for: extract it where there is room and give dupfind that folder.")
    target.parent.mkdir(parents=True, exist_ok=True)
    extraction.members.append(name)
    return target


def _copy(source: IO[bytes], target: Path, label: str) -> None:
    """A member's bytes to its file. Reading may fail (the archive damaged or cut short: raised as
    it is); writing fails as a one-line error."""
    with open(target, "wb") as out:
        while chunk := source.read(COPY_BYTES):
            try:
                out.write(chunk)
            except OSError as exc:
                raise DupfindError(f"{label} cannot be extracted under {target.parent}: {exc.strerror or exc}.") from None


# What reading a damaged or cut-off archive raises (gzip's, bz2's and lzma's errors are OSError,
# EOFError or their own ValueError kinds).
_BROKEN = (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error)


def _open_tar(path: str) -> tuple[tarfile.TarFile, IO[bytes] | None]:
    """A tar archive, compressed or not, and the stream it is read from when that is to be closed
    with it: zstd's (`.tar.zst`, which tarfile reads from Python 3.14 only), read as a stream, its
    damaged or cut-off tail the end of what it holds."""
    with open(path, "rb") as fh:
        zstd = fh.read(4) == ZSTD_MAGIC
    if not zstd:
        return tarfile.open(path, "r:*"), None
    from dupfind.sources import decompressed_stream

    stream = decompressed_stream(path, "zstd")
    try:
        return tarfile.open(fileobj=stream, mode="r|"), stream
    except BaseException:
        stream.close()
        raise


def _extract_tar(archive: tarfile.TarFile, label: str, extraction: _Extraction) -> None:
    member = None
    try:
        for member in archive:
            target = _admit(extraction, member.name, member.size, _tar_other(member), label)
            if target is None:
                continue
            source = archive.extractfile(member)
            if source is not None:
                _copy(source, target, label)
            os.utime(target, (member.mtime, member.mtime))
    except _BROKEN:
        extraction.cut_short = _member_name(member.name) if member is not None else "its first member"


def _extract_zip(path: str, label: str, extraction: _Extraction) -> None:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            target = _admit(extraction, info.filename, info.file_size, _zip_other(info), label)
            if target is None:
                continue
            try:
                with archive.open(info) as source:
                    _copy(source, target, label)
            except (*_BROKEN, NotImplementedError, RuntimeError) as exc:  # damaged, encrypted, a method zipfile lacks
                target.unlink(missing_ok=True)
                extraction.members.remove(_member_name(info.filename))
                extraction.left_out.append(f"{info.filename} (cannot be read: {exc})")
                continue
            stamp = time.mktime((*info.date_time, 0, 0, -1))
            os.utime(target, (stamp, stamp))


def _tar_other(member: tarfile.TarInfo) -> str | None:
    """What a tar member is when it is not a regular file."""
    if member.isfile():
        return None
    return "folder" if member.isdir() else "a link" if member.issym() or member.islnk() else "not a file"


def _zip_other(info: zipfile.ZipInfo) -> str | None:
    """What a zip member is when it is not a regular file (Unix mode bits in the external
    attributes, when the zip has them: a symbolic link)."""
    if info.is_dir():
        return "folder"
    kind = (info.external_attr >> 16) & 0o170000
    return None if kind in (0, 0o100000) else "a link" if kind == 0o120000 else "not a file"


def _say(label: str, members: list[str], left_out: list[str], cut_short: str | None) -> None:
    from dupfind.sources import say_once

    if left_out:
        say_once(lambda n: f"{n} archive member{'s' if n > 1 else ''} not read", [f"{label}: {entry}" for entry in left_out])
    if cut_short:
        say_once(lambda n: "an archive is damaged or cut short; read up to", [f"{label}: {cut_short}"])
    if not members:
        say_once(lambda n: f"{'an archive holds' if n == 1 else 'archives hold'} no files to read", [label])
