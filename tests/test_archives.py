"""Archives among the inputs (a support bundle's tar.gz, a zip of logs) are read as the files they hold."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import orjson
import pytest
import zstandard
from conftest import FIXTURES, run_cli
from test_rotated_logs import _findings

from dupfind import archives
from dupfind.config import load_config
from dupfind.errors import DupfindError
from dupfind.ingest import ingest
from dupfind.sources import expand_inputs

CASE = FIXTURES / "synth" / "lock-nonatomic" / "logs"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(tmp_path / "cache"))


def _tar(path: Path, members: dict[str, bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1784628000
            archive.addfile(info, io.BytesIO(data))
    return path


def _case_members(prefix: str = "bundle/pods/") -> dict[str, bytes]:
    return {f"{prefix}{log.name}": log.read_bytes() for log in sorted(CASE.iterdir())}


@pytest.mark.parametrize("kind", ["tar.gz", "tgz", "tar.xz", "tar.zst", "zip"])
def test_an_archive_of_logs_gives_the_findings_of_its_folder(tmp_path, kind):
    """Before, a tar.gz was one file of every member's lines after each other (records merged into
    one file, tar's headers rejected lines) and a zip one rejected line."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    if kind == "zip":
        with zipfile.ZipFile(inputs / "support-bundle.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in _case_members().items():
                archive.writestr(name, data)
    elif kind == "tar.zst":  # tarfile writes none before Python 3.14: `tar --zstd -cf`'s
        plain = _tar(tmp_path / "support-bundle.tar", _case_members(), "w")
        (inputs / "support-bundle.tar.zst").write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    else:
        _tar(inputs / f"support-bundle.{kind}", _case_members(), "w:xz" if kind == "tar.xz" else "w:gz")
    read = ingest([str(inputs)], load_config(cwd=Path("/")))
    names = [Path(r.path).relative_to(inputs).as_posix() for r in read.files]
    assert names == [f"support-bundle.{kind}/bundle/pods/{log.name}" for log in sorted(CASE.iterdir())]
    assert all(r.rejected_total <= 1 for r in read.files)  # the case's own line without a time
    whole = _findings(CASE)
    assert whole and _findings(inputs) == whole


def test_an_archive_is_extracted_once_and_again_when_it_changes(tmp_path, monkeypatch):
    bundle = _tar(tmp_path / "logs.tar.gz", _case_members())
    first = expand_inputs([str(bundle)], fresh=True)
    extracted = Path(first[0].file)
    assert extracted.is_file() and "archives" in extracted.parts and first[0].path.startswith(str(bundle) + "/")

    def no_extraction(*args):
        raise AssertionError("extracted again")

    monkeypatch.setattr(archives, "_extract", no_extraction)
    again = expand_inputs([str(bundle)], fresh=True)
    assert [(s.path, s.file) for s in again] == [(s.path, s.file) for s in first]
    assert [s.identity() for s in again] == [s.identity() for s in first]  # the result cache's keys hold
    monkeypatch.undo()
    members = _case_members()
    members["bundle/pods/deploy.log"] += b'{"ts":"2026-07-21T10:03:00Z","event":"deploy_finished"}\n'
    _tar(bundle, members)
    changed = expand_inputs([str(bundle)], fresh=True)
    assert {s.path for s in changed} == {s.path for s in first} and changed[0].file != first[0].file


def test_unsafe_members_are_not_extracted_and_are_said(tmp_path, capfd):
    """A name that is absolute or goes above the archive, a link, a device: not read (said on
    stderr); hidden members (a Mac's `__MACOSX/`, `.DS_Store`) left out as a folder's are."""
    good = (CASE / "deploy.log").read_bytes()
    path = tmp_path / "evil.tar"
    with tarfile.open(path, "w") as archive:
        for name, data in {"logs/deploy.log": good, "../escaped.log": good, "/etc/absolute.log": good,
                           "logs/.DS_Store": b"\0\0", "__MACOSX/logs/._deploy.log": b"\0"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("logs/link.log")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    sources = expand_inputs([str(path)], fresh=True)
    assert [s.path for s in sources] == [f"{path}/logs/deploy.log"]
    err = capfd.readouterr().err
    assert "3 archive members not read" in err and "../escaped.log" in err and "/etc/absolute.log" in err
    assert "logs/link.log (a link)" in err and "DS_Store" not in err
    assert not (tmp_path / "escaped.log").exists() and not any(tmp_path.parent.glob("escaped.log"))


def test_an_archive_cut_short_gives_the_members_before_the_cut(tmp_path, capfd):
    data = _tar(tmp_path / "full.tar.gz", _case_members()).read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    read = ingest([str(cut)], load_config(cwd=Path("/")))
    assert 1 <= len(read.files) < len(list(CASE.iterdir())) and read.table.height > 0
    assert "damaged or cut short" in capfd.readouterr().err


def test_a_file_named_like_an_archive_that_is_not_one_is_read_as_a_file(tmp_path):
    lines = (CASE / "deploy.log").read_bytes()
    (tmp_path / "deploy.tar.gz").write_bytes(lines)
    read = ingest([str(tmp_path)], load_config(cwd=Path("/")))
    assert [Path(r.path).name for r in read.files] == ["deploy.tar.gz"] and read.files[0].records == lines.count(b"\n")


def test_archives_inside_an_archive_are_read(tmp_path):
    inner = _tar(tmp_path / "pods.tar.gz", _case_members("")).read_bytes()
    with zipfile.ZipFile(tmp_path / "incident.zip", "w") as archive:
        archive.writestr("attachments/pods.tar.gz", inner)
        archive.writestr("attachments/notes.txt", "deploy at 09:59, duplicates after\n")
    names = [s.path for s in expand_inputs([str(tmp_path / "incident.zip")], fresh=True)]
    assert names == [f"{tmp_path}/incident.zip/attachments/notes.txt",
                     *(f"{tmp_path}/incident.zip/attachments/pods.tar.gz/{log.name}" for log in sorted(CASE.iterdir()))]


def test_an_archive_larger_than_the_disk_has_room_for_is_a_one_line_error(tmp_path, monkeypatch):
    bundle = _tar(tmp_path / "logs.tar.gz", _case_members())
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10 << 30, 10 << 30, 1 << 20))
    with pytest.raises(DupfindError, match="more than the disk"):
        expand_inputs([str(bundle)], fresh=True)
    assert not any(p.name.endswith(".partial") for p in (tmp_path / "cache" / "archives").iterdir())


def test_the_cli_reads_an_archive_and_reports_on_stdout_only(tmp_path):
    _tar(tmp_path / "bundle.tgz", _case_members())
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    proc = run_cli("analyze", "--format", "json", str(tmp_path / "bundle.tgz"), env=env)
    assert proc.returncode == 0 and proc.stderr == b""
    report = orjson.loads(proc.stdout)
    assert len(report["findings"]) == len(_findings(CASE))
    assert os.listdir(tmp_path / "cache" / "archives")


def test_a_zip_s_links_and_folders_are_not_files_and_its_windows_names_are_paths(tmp_path, capfd):
    with zipfile.ZipFile(tmp_path / "logs.zip", "w") as archive:
        archive.writestr("logs/", b"")
        archive.writestr("logs/deploy.log", (CASE / "deploy.log").read_bytes())
        archive.writestr("logs\\queue-broker.log", (CASE / "queue-broker.log").read_bytes())  # a Windows tool's name
        link = zipfile.ZipInfo("logs/current.log")
        link.external_attr = (0o120777 << 16)
        archive.writestr(link, "deploy.log")
    assert [s.path for s in expand_inputs([str(tmp_path / "logs.zip")], fresh=True)] == [
        f"{tmp_path}/logs.zip/logs/deploy.log", f"{tmp_path}/logs.zip/logs/queue-broker.log"]
    assert "logs/current.log (a link)" in capfd.readouterr().err


def test_a_damaged_extraction_is_made_again_and_an_empty_archive_is_said(tmp_path, capfd):
    bundle = _tar(tmp_path / "logs.tar.gz", _case_members())
    first = expand_inputs([str(bundle)], fresh=True)
    Path(first[0].file).unlink()  # a file of the extraction gone (a disk cleaner, a hand)
    again = expand_inputs([str(bundle)], fresh=True)
    assert [s.path for s in again] == [s.path for s in first] and all(Path(s.file).is_file() for s in again)
    _tar(tmp_path / "empty.tar", {}, "w")
    (tmp_path / "deploy.log").write_bytes((CASE / "deploy.log").read_bytes())
    listed = expand_inputs([str(tmp_path / "empty.tar"), str(tmp_path / "deploy.log")], fresh=True)
    assert [s.path for s in listed] == [str(tmp_path / "deploy.log")]
    assert "an archive holds no files to read" in capfd.readouterr().err
