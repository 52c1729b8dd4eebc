"""Inputs: compression by magic bytes, truncation, binary, stdin, directories, encodings, JSON documents back to back."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import shutil
from pathlib import Path

import orjson
import pytest
import zstandard
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

import dupfind.ingest as ingest_module
from dupfind.config import load_config
from dupfind.document_frames import RecordReader
from dupfind.errors import DupfindError
from dupfind.ingest import ingest
from dupfind.json_values import ValueCutter, array_within, concatenated_values
from dupfind.schema import as_strings
from dupfind.sources import Source, expand_inputs, file_identity, identities, listings_kept

WORKER_LOG = FIXTURES / "formats" / "ndjson-workers" / "logs" / "notifier-worker-1.ndjson"


@pytest.fixture(scope="module")
def config():
    return load_config(cwd=Path("/"))


def _zstd(data: bytes) -> bytes:
    """As the zstd command writes a file (logrotate's `compresscmd /usr/bin/zstd`): one frame, streamed."""
    packer = zstandard.ZstdCompressor(level=3).compressobj()
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("name, compress", [("gzip", gzip.compress), ("bz2", bz2.compress), ("xz", lzma.compress), ("zstd", _zstd)])
def test_compression_detected_by_magic_not_extension(tmp_path, config, name, compress):
    plain = ingest([str(WORKER_LOG)], config)
    target = tmp_path / "worker.log"  # misleading extension on purpose
    target.write_bytes(compress(WORKER_LOG.read_bytes()))
    result = ingest([str(target)], config)
    assert result.files[0].compression == name
    assert result.files[0].records == plain.files[0].records == 8
    assert as_strings(result.text_table().drop("source")).equals(as_strings(plain.text_table().drop("source")))  # labels as text: a pool each


def test_truncated_gzip_keeps_what_was_read_and_says_so(tmp_path, config):
    data = b"".join(
        f'{{"ts":"2026-07-21T10:00:{i % 60:02d}.000Z","event":"job_started","job_id":"q-{i}"}}\n'.encode()
        for i in range(5000)
    )
    packed = gzip.compress(data)
    target = tmp_path / "cut.gz"
    target.write_bytes(packed[: len(packed) // 2])
    result = ingest([str(target)], config)
    report = result.files[0]
    assert report.truncated
    assert any("truncated" in note for note in report.notes)
    assert 0 < report.records < 5000
    assert report.lines == report.parsed + report.blank + report.rejected_total


def test_truncated_zstd_keeps_what_was_read_and_says_so(tmp_path, config):
    data = b"".join(
        f'{{"ts":"2026-07-21T10:00:{i % 60:02d}.000Z","event":"job_started","job_id":"q-{i}","n":"{i * 7919 % 100003}"}}\n'.encode()
        for i in range(20000)
    )
    packed = _zstd(data)
    (tmp_path / "worker.log.zst").write_bytes(packed[: len(packed) // 2])
    report = ingest([str(tmp_path / "worker.log.zst")], config).files[0]
    assert report.compression == "zstd" and report.truncated
    assert 0 < report.records < 20000
    assert report.lines == report.parsed + report.blank + report.rejected_total


def test_binary_file_is_rejected_whole_not_crashing(tmp_path, config):
    target = tmp_path / "core.bin"
    target.write_bytes(b"\x7fELF\x00\x00\x01\x02\nmore\x00binary\n" * 10)
    other = tmp_path / "ok.log"
    other.write_text('{"ts":"2026-07-21T10:00:00Z","event":"job_started","job_id":"x"}\n')
    result = ingest([str(tmp_path)], config)
    by_name = {Path(f.path).name: f for f in result.files}
    assert by_name["core.bin"].rejected == {"binary_file": 20}
    assert by_name["core.bin"].lines == 20
    assert by_name["ok.log"].records == 1


def test_undecodable_lines_are_rejected_individually(tmp_path, config):
    target = tmp_path / "latin1.log"
    target.write_bytes(
        b'{"ts":"2026-07-21T10:00:00Z","event":"job_started","job_id":"a"}\n'
        b'{"ts":"2026-07-21T10:00:01Z","event":"job_started","job_id":"caf\xe9"}\n'
        b'{"ts":"2026-07-21T10:00:02Z","event":"job_acked","job_id":"a"}\n'
    )
    result = ingest([str(target)], config)
    assert result.files[0].rejected == {"undecodable": 1}
    assert result.files[0].examples == {"undecodable": 2}
    assert result.text_table()["job_id"].to_list() == ["a", "a"]


def test_directories_are_recursive_sorted_and_skip_hidden(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "b" / "z.log").write_text("x")
    (tmp_path / "a.log").write_text("x")
    (tmp_path / ".hidden.log").write_text("x")
    (tmp_path / ".git" / "config").write_text("x")
    names = [Path(s.path).relative_to(tmp_path).as_posix() for s in expand_inputs([str(tmp_path)])]
    assert names == ["a.log", "b/z.log"]


def test_directories_list_what_a_recursive_glob_lists(tmp_path, monkeypatch):
    """The walk gives the files `sorted(rglob)` gives, in its order (by parts, not text: `a/b/c`
    before `a/b-c`), without hidden entries; links to files kept, to directories not followed."""
    for rel in ("a/b-c.log", "a/b/c.log", "a/B.log", "a.log", "a-b/x.log", "a/.h.log", "z/.d/y.log",
                "deep/er/f.log", "Z.log", "\u00e9.log", "a b/c.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "to-dir").symlink_to(tmp_path / "a")
    # To a hidden file: listed only through the link (a file listed under two names is read once).
    (tmp_path / "to-file.log").symlink_to(tmp_path / "z" / ".d" / "y.log")
    (tmp_path / "broken.log").symlink_to(tmp_path / "missing")
    monkeypatch.chdir(tmp_path)
    for root in (tmp_path, Path("."), Path("a")):
        reference = sorted(
            p for p in root.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
        )
        assert [s.path for s in expand_inputs([str(root)])] == [str(p) for p in reference]
    assert "to-file.log" in [s.path for s in expand_inputs(["."])]
    # However the directory is spelled, its files are named as Path names them.
    for raw in ("./a", "a/", "a//.", "./", f"{tmp_path}/", "a/../a"):
        reference = sorted(p for p in Path(raw).rglob("*") if p.is_file() and ".h.log" not in p.name)
        assert [s.path for s in expand_inputs([raw])] == [str(p) for p in reference if "/.d/" not in str(p)], raw


def test_a_command_keeps_its_listing_unless_asked_afresh(tmp_path):
    """Within listings_kept() (a command), the same paths give the same files, each examined once;
    `fresh` (the check before storing a cache entry) and a listing outside it see the files now."""
    (tmp_path / "a.log").write_text("x\n")
    with listings_kept():
        first = expand_inputs([str(tmp_path)])
        (tmp_path / "b.log").write_text("x\n")
        again = expand_inputs([str(tmp_path)])
        assert again == first and again is not first
        assert again[0].identity() is first[0].identity() is not None
        assert [Path(s.path).name for s in expand_inputs([str(tmp_path)], fresh=True)] == ["a.log", "b.log"]
        assert len(expand_inputs([str(tmp_path / "a.log"), str(tmp_path)])) == 2  # other paths: listed now
    assert [Path(s.path).name for s in expand_inputs([str(tmp_path)])] == ["a.log", "b.log"]


def test_a_listing_s_identities_are_each_file_s_own(tmp_path, monkeypatch):
    """identities() of a whole listing (what keys it in the caches): each is what file_identity
    gives the file alone, whether it is reached through a linked directory, a link to it, `..` after a link or a
    relative path; one that can no longer be examined makes the whole None."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "real" / "f.log").write_text("one\n")
    (tmp_path / "real" / "sub" / "g.log").write_text("two\n")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    (tmp_path / "deeper").symlink_to(tmp_path / "real" / "sub")
    (tmp_path / "real" / "link.log").symlink_to(tmp_path / "real" / "f.log")
    monkeypatch.chdir(tmp_path)
    paths = ["alias", "deeper/../f.log", "./real/sub/../sub/g.log", f"../{tmp_path.name}/real/f.log", "real"]
    listed = expand_inputs(paths)
    found = identities(listed)
    assert found == [(src.path, file_identity(src.path)) for src in listed]
    real = str(tmp_path.resolve() / "real")
    assert {identity.split("|")[0] for _, identity in found} == {f"{real}/f.log", f"{real}/sub/g.log"}
    # `alias` and `real`: 3 files each; 3 paths to a file: 2 files, each read once (by its first name)
    assert [path for path, _ in found] == ["alias/f.log", "alias/sub/g.log"]
    gone = [Source(path, path) for path in ("real/f.log", "real/sub/g.log")]  # a listing takes them as it lists
    (tmp_path / "real" / "sub" / "g.log").unlink()
    assert identities(gone) is None


def test_empty_input_is_an_error(tmp_path, config):
    target = tmp_path / "empty.log"
    target.write_bytes(b"")
    with pytest.raises(DupfindError, match="empty"):
        ingest([str(target)], config)


def test_empty_directory_is_an_error(tmp_path):
    with pytest.raises(DupfindError, match="no files"):
        expand_inputs([str(tmp_path)])


def test_crlf_and_bom_are_tolerated(tmp_path, config):
    target = tmp_path / "windows.log"
    target.write_bytes(
        "\ufeff".encode() + b'{"ts":"2026-07-21T10:00:00Z","event":"job_started","job_id":"a"}\r\n'
        b"2026-07-21T10:00:01Z worker=A job_id=a event=job_acked\r\n"
    )
    result = ingest([str(target)], config)
    assert result.files[0].rejected_total == 0
    assert result.table["kind"].to_list() == ["start", "ack"]
    assert result.table["worker_id"].to_list() == [None, "A"]


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf", gzip.compress(b"\xef\xbb\xbf\x00\x00\x00\x01")[:14]])
def test_a_file_holding_only_a_bom_is_one_blank_line(tmp_path, config, data):
    # Found by the hypothesis property test: the BOM was stripped before the trailing empty
    # element was dropped, so the one line was neither parsed, blank nor rejected.
    path = tmp_path / "bom.log"
    path.write_bytes(data)
    report = ingest([str(path)], config).files[0]
    assert (report.lines, report.blank, report.parsed, report.rejected_total) == (1, 1, 0, 0)


def test_bad_lines_only_cost_their_sub_block(tmp_path, config):
    lines = [
        f'{{"ts":"2026-07-21T10:{i // 60 % 60:02d}:{i % 60:02d}Z","event":"job_started","job_id":"q-{i}","attempt":{i % 3 + 1}}}'
        for i in range(20000)
    ]
    lines[123] = '{"ts": "2026-07-21T10:00:00Z", "event": oops}'
    lines[15000] = '{"truncated": "line'
    target = tmp_path / "big.ndjson"
    target.write_text("\n".join(lines) + "\n")
    result = ingest([str(target)], config)
    assert result.files[0].rejected == {"invalid_json": 2}
    assert result.files[0].examples == {"invalid_json": 124}
    assert result.files[0].records == 19998
    table = result.text_table()
    assert table.filter(table["job_id"] == "q-124")["attempt"].to_list() == [2]


def test_since_until_filter_and_count(config):
    from datetime import datetime, timezone

    since = datetime(2026, 7, 21, 10, 0, 1, 200000, tzinfo=timezone.utc)
    result = ingest([str(WORKER_LOG)], config, since=since)
    assert result.filtered_out == 4
    assert result.table.height == 4
    assert result.table["ts"].min() >= since


def test_entries_a_listing_leaves_out_are_said_once_on_stderr(tmp_path, capsys, monkeypatch):
    """A directory's entries that are not read (a broken link, a link to a directory, a pipe, a
    directory that cannot be listed) are named on stderr, escaped, once a process: nothing is left
    out without a word. Hidden entries are left out quietly."""
    import dupfind.sources

    monkeypatch.setattr(dupfind.sources, "_said_left_out", set())
    (tmp_path / "a.log").write_text("x\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.log").write_text("x\n")
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "c.log").write_text("x\n")
    (tmp_path / "broken.log").symlink_to(tmp_path / "missing")
    (tmp_path / "to-dir").symlink_to(tmp_path / "sub")
    (tmp_path / "evil\x1b[31m.log").symlink_to(tmp_path / "missing")
    os.mkfifo(tmp_path / "pipe.log")
    real_scandir = os.scandir

    def scandir(path):  # root can list any directory: this one refuses as it would refuse a user
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(dupfind.sources.os, "scandir", scandir)
    listed = [Path(s.path).relative_to(tmp_path).as_posix() for s in expand_inputs([str(tmp_path)])]
    assert listed == ["a.log", "sub/b.log"]
    assert capsys.readouterr().err == (
        f"dupfind: 5 entries under {tmp_path} not read: broken.log (a broken link), "
        "evil\\x1b[31m.log (a broken link), locked (a directory that cannot be listed: permission denied), "
        "pipe.log (a pipe), to-dir (a link to a directory, not followed)\n"
    )
    expand_inputs([str(tmp_path)])  # listed again (a command lists its inputs more than once)
    assert capsys.readouterr().err == ""
    for k in range(4):
        (tmp_path / f"gone-{k}.log").symlink_to(tmp_path / "missing")
    expand_inputs([str(tmp_path)])  # only what was not said yet, the first five named
    assert capsys.readouterr().err == (
        f"dupfind: 4 entries under {tmp_path} not read: gone-0.log (a broken link), gone-1.log (a broken link), "
        "gone-2.log (a broken link), gone-3.log (a broken link)\n"
    )
    for k in range(7):
        (tmp_path / f"more-{k}.log").symlink_to(tmp_path / "missing")
    expand_inputs([str(tmp_path)])
    assert capsys.readouterr().err.endswith("more-4.log (a broken link) and 2 more\n")


def test_a_name_that_is_not_utf8_is_left_out_with_a_word_or_refused(tmp_path, capsys, monkeypatch, cli):
    """A file or directory whose name is not UTF-8 (an old system's Latin-1) reaches Python as lone
    surrogates, which polars, JSON and the cache keys cannot hold: every command over its directory
    failed with an internal error. Under a directory it is now left out and named on stderr (its
    bytes as \\xNN); named on the command line it is refused in one sentence."""
    import dupfind.sources

    monkeypatch.setattr(dupfind.sources, "_said_left_out", set())
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "worker.log").write_bytes(WORKER_LOG.read_bytes())
    latin1 = os.fsdecode(b"caf\xe9.log")
    (logs / latin1).write_bytes(WORKER_LOG.read_bytes())
    (logs / os.fsdecode(b"r\xe9gion")).mkdir()
    (logs / os.fsdecode(b"r\xe9gion") / "w.log").write_bytes(WORKER_LOG.read_bytes())
    listed = [Path(s.path).relative_to(logs).as_posix() for s in expand_inputs([str(logs)])]
    assert listed == ["worker.log"]
    assert capsys.readouterr().err == (
        f"dupfind: 2 entries under {logs} not read: caf\\xe9.log (a name that is not UTF-8: rename it to read it), "
        "r\\xe9gion/w.log (a name that is not UTF-8: rename it to read it)\n"
    )
    analyzed = cli("analyze", str(logs), "--format", "json", env={"DUPFIND_CACHE_DIR": str(tmp_path / "cache")})
    assert analyzed.returncode == 0, analyzed.stderr
    assert b"caf\\xe9.log (a name that is not UTF-8" in analyzed.stderr
    named = cli("analyze", os.fsencode(logs / latin1).decode("utf-8", "surrogateescape"))
    assert named.returncode == 2 and named.stdout == b""
    assert named.stderr.decode().endswith("caf\\xe9.log is a name that is not UTF-8, which reports cannot show: rename it to read it.\n")


def test_a_file_named_twice_is_read_once_and_said(tmp_path, capsys, monkeypatch):
    """A file reached by two names (a directory named as `logs` and by its absolute path, a link to
    a file beside it such as `current.log`, a hard link) is read once: read twice, each of its
    records was a duplicate of itself. The name kept is the first that is not a symbolic link."""
    import dupfind.sources

    monkeypatch.setattr(dupfind.sources, "_said_left_out", set())
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "worker-a.log").write_bytes(WORKER_LOG.read_bytes())
    (logs / "worker-b.log").write_bytes(WORKER_LOG.read_bytes())  # the same bytes, another file: kept
    (logs / "a-current.log").symlink_to("worker-a.log")
    os.link(logs / "worker-b.log", logs / "worker-b.hard.log")
    monkeypatch.chdir(tmp_path)
    listed = [s.path for s in expand_inputs(["logs", str(logs / "worker-a.log")])]
    assert listed == ["logs/worker-a.log", "logs/worker-b.hard.log"]
    assert capsys.readouterr().err == (
        "dupfind: 3 inputs name files already named, read once: "
        f"{logs / 'worker-a.log'} (same file as logs/worker-a.log), "
        "logs/a-current.log (same file as logs/worker-a.log), "
        "logs/worker-b.log (same file as logs/worker-b.hard.log)\n"
    )


def test_an_export_named_twice_finds_no_duplicate(tmp_path, cli):
    """The quiet baseline named as a relative and an absolute path (and holding a link to one of its
    logs) stays quiet: before, every action of it was reported a harmful duplicate."""
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "synth" / "baseline" / "logs", logs)
    first = min(logs.glob("worker-*.log"))
    (logs / "current.log").symlink_to(first.name)
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    once = orjson.loads(cli("analyze", "logs", "--format", "json", cwd=tmp_path, env=env).stdout)
    twice = cli("analyze", "logs", str(logs), "--format", "json", cwd=tmp_path, env=env)
    report = orjson.loads(twice.stdout)
    assert report["verdict"] == once["verdict"] == "no_harmful_duplicates"
    assert report["summary"] == once["summary"]
    assert "inputs name files already named, read once" in twice.stderr.decode()


def test_a_first_line_longer_than_the_format_sample_is_judged_by_its_start(tmp_path, config):
    """A format is judged from the file's first 64 KB: a first line longer than that was an empty
    file with its line rejected. An NDJSON record with a long message is a record; a plain line is
    parsed as text."""
    long_json = orjson.dumps({"ts": "2026-07-21T10:00:00.000Z", "event": "job_failed", "job_id": "j-1",
                              "worker_id": "w-1", "error": "x" * 100_000}).decode()
    short = orjson.dumps({"ts": "2026-07-21T10:00:01.000Z", "event": "job_started", "job_id": "j-2", "worker_id": "w-1"}).decode()
    (tmp_path / "w.ndjson").write_text(f"{long_json}\n{short}\n")
    (tmp_path / "w.log").write_text(f"2026-07-21T10:00:02.000Z INFO job_started job_id=j-3 {'y' * 100_000}\n")
    files = {Path(f.path).name: f for f in ingest([str(tmp_path)], config).files}
    assert (files["w.ndjson"].records, files["w.ndjson"].rejected_total) == (2, 0)
    assert (files["w.log"].records, files["w.log"].rejected_total) == (1, 0) and files["w.log"].format != "empty"


def _subscription(stream: str, events: list[tuple[str, int, str]]) -> bytes:
    return orjson.dumps({"messageType": "DATA_MESSAGE", "owner": "481516234200", "logGroup": "/ecs/notifier",
                         "logStream": stream, "subscriptionFilters": ["to-firehose"],
                         "logEvents": [{"id": i, "timestamp": ts, "message": m} for i, ts, m in events]})


def _event(k: int) -> tuple[str, int, str]:
    line = orjson.dumps({"ts": f"2026-07-21T10:00:0{k}.{k:06d}Z", "event": "job_started", "job_id": f"j{k}"}).decode()
    return f"{k:056d}", 1784628000000 + 1000 * k, line


def test_json_documents_back_to_back_are_one_list(tmp_path, config):
    """Kinesis Data Firehose writes a subscription's messages back to back in one object, each a
    gzip member of its own (no extension): every event is a record, its stream the worker, its id
    the origin; a message Firehose delivered again is counted once by its ids."""
    first, second = _subscription("ecs/worker/a1", [_event(1), _event(2)]), _subscription("ecs/worker/b2", [_event(3)])
    (tmp_path / "notifier-logs-1-2026-07-21-10-00-00-5f2b").write_bytes(
        b"".join(gzip.compress(m) for m in (first, second, first)))
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "objects").write_bytes(first + b"\n " + second)
    gz, plain = ingest([str(tmp_path / "notifier-logs-1-2026-07-21-10-00-00-5f2b")], config), ingest([str(tmp_path / "plain")], config)
    assert [f.records for f in gz.files] == [5] and not gz.files[0].rejected and gz.table.height == 3
    assert gz.copies[0][2:] == [2, "sent again"]
    assert plain.files[0].format == "cloudwatch-subscription (json-document [].logEvents[])" and plain.table.height == 3
    table = plain.texts.decoded(plain.table)
    assert table["worker_id"].cast(str).to_list() == ["ecs/worker/a1", "ecs/worker/a1", "ecs/worker/b2"]
    assert table["job_id"].cast(str).to_list() == ["j1", "j2", "j3"]


@pytest.mark.parametrize("data", [
    b'{"a": 1}{"a": ',  # cut in the middle of the second
    b'{"a": 1}{"a": NaN}',  # not JSON, whatever Python's decoder accepts
    b'{"a": "\\ud800"}{"a": 2}',  # a lone surrogate
    b'{"a": 1}\xff{"a": 2}',  # not UTF-8
    b"[" * 100_000 + b"]" * 100_000 + b"{}",  # nested too deep for the decoder
])
def test_what_is_not_json_documents_back_to_back_is_read_line_by_line(tmp_path, config, data):
    (tmp_path / "objects").write_bytes(data)
    result = ingest([str(tmp_path / "objects")], config)
    assert result.table.height == 0 and sum(result.files[0].rejected.values()) == result.files[0].lines >= 1


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lambda data: lzma.compress(data, preset=0), _zstd],
                         ids=["gzip", "bz2", "xz", "zstd"])
def test_many_small_members_are_read_whole_across_every_feed(tmp_path, config, compress):
    """A file of thousands of compressed members, one a record (Kinesis Data Firehose writes one a
    message), ending in zero padding: every record read, members ending anywhere in a feed of the
    decompressor or a block of the file, and nothing said to be truncated."""
    lines = WORKER_LOG.read_bytes().splitlines(keepends=True)
    records = [lines[k % len(lines)] for k in range(2000)]
    (tmp_path / "objects").write_bytes(b"".join(compress(record) for record in records) + b"\x00" * 700)
    result = ingest([str(tmp_path / "objects")], config)
    assert result.files[0].records == 2000 and not result.files[0].truncated and not result.files[0].rejected


def test_a_document_without_the_records_path_is_a_position_rejected_not_lost(tmp_path, config):
    """Back to back, a message whose logEvents is not a list (and a search hit without _source)
    holds no record: each is a rejected position of its file, not nothing."""
    broken = orjson.dumps({"messageType": "DATA_MESSAGE", "logStream": "ecs/worker/b2", "logEvents": "x"})
    (tmp_path / "objects").write_bytes(_subscription("ecs/worker/a1", [_event(1), _event(2)]) + broken)
    hits = {"hits": {"hits": [{"_id": "a", "_source": {"@timestamp": "2026-07-21T10:00:01.000Z", "message": "ok"}},
                              {"_id": "b"}]}}
    (tmp_path / "search.json").write_bytes(orjson.dumps(hits))
    result = ingest([str(tmp_path)], config)
    by_name = {Path(f.path).name: f for f in result.files}
    assert (by_name["objects"].lines, by_name["objects"].records, dict(by_name["objects"].rejected)) == (
        3, 2, {"not_a_record": 1})
    assert (by_name["search.json"].lines, by_name["search.json"].records, dict(by_name["search.json"].rejected)) == (
        2, 1, {"not_a_record": 1})


_TEXTS = st.lists(st.sampled_from(["}{", "}", "{", '"', "\\", "x", " ", "\n", "é", "}\n{"]), max_size=8).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.dictionaries(st.sampled_from(["m", "id", "n"]), st.one_of(_TEXTS, st.integers(-2**53, 2**53)), min_size=1),
                          st.lists(_TEXTS, max_size=3)), min_size=2, max_size=6),
       st.lists(st.sampled_from(["", " ", "\n", "\r\n", "\t"]), min_size=6, max_size=6), st.booleans())
def test_json_values_back_to_back_are_each_what_was_written(values, gaps, ascii_only):
    """Whatever the values' strings hold (`}{` among them, where an object may seem to end) and
    whatever whitespace is between them: each value as it was written, in order."""
    data = "".join((json.dumps(v) if ascii_only else orjson.dumps(v).decode()) + gap
                   for v, gap in zip(values, gaps)).encode()
    assert concatenated_values(data) == values
    assert concatenated_values(data.rstrip()[:-1]) is None  # cut short: not JSON values


def test_many_cuts_inside_strings_are_found_by_decoding():
    """More `}{` inside one value's strings than cuts are tried: its end is found by decoding."""
    values = [{"m": "}{" * 200}, {"m": "ok"}, ["}{"]]
    assert concatenated_values(b"".join(orjson.dumps(v) for v in values)) == values


def _firehose_object(messages: int) -> list[bytes]:
    """Subscription messages as Firehose writes them: control messages, events whose lines hold
    `}{` and characters of several bytes, a message delivered again."""
    control = orjson.dumps({"messageType": "CONTROL_MESSAGE", "owner": "CloudwatchLogs", "logGroup": "",
                            "logStream": "", "subscriptionFilters": [], "logEvents": []})
    out = [control]
    for m in range(messages):
        events = []
        for e in range(3):
            k = m * 3 + e
            line = orjson.dumps({"ts": f"2026-07-21T10:{k // 600 % 60:02d}:{k // 10 % 60:02d}.{k % 10}00123Z", "event": "job_started",
                                 "job_id": f"j{k}", "note": "café }{ \u00e9" * (k % 3)}).decode()
            events.append((f"{k:056d}", 1784628000000 + 100 * k, line))
        out.append(_subscription(f"ecs/worker/w{m % 4}", events))
    return out[:50] + [control] * 40 + out[50:] + [out[5]]  # 40 control messages fill a block of 4 KB


def _read_in_blocks(tmp_path, config, monkeypatch, block_bytes: int = 4096, polars_batches: list | None = None):
    """What ingest reads whole and in blocks, and how many records each block's batch held (those
    polars read as NDJSON lines, RecordReader, also in `polars_batches`)."""
    whole = ingest([str(tmp_path)], config)
    batches: list[int] = []
    polars_batches = [] if polars_batches is None else polars_batches
    parse_records, read_elements = ingest_module.Ingestor._parse_records, RecordReader.read

    def counted(self, records, preset, block):
        batches.append(len(records))
        return parse_records(self, records, preset, block)

    def counted_elements(self, *args):
        got = read_elements(self, *args)
        if got is not None:
            batches.append(got[2])
            polars_batches.append(got[2])
        return got

    monkeypatch.setattr(ingest_module.Ingestor, "_parse_records", counted)
    monkeypatch.setattr(RecordReader, "read", counted_elements)
    small = ingest([str(tmp_path)], config, block_bytes=block_bytes)
    monkeypatch.undo()
    assert as_strings(small.table).equals(as_strings(whole.table))
    assert [(r.lines, r.records, r.format, r.notes, dict(r.rejected)) for r in small.files] == \
        [(r.lines, r.records, r.format, r.notes, dict(r.rejected)) for r in whole.files]
    return whole, batches


def test_json_documents_back_to_back_are_read_a_block_at_a_time(tmp_path, config, monkeypatch):
    """An object of many messages is read a block at a time, each block's messages parsed as they
    are cut (a Firehose object of 55 MB held 580 MiB read whole): read in blocks of 4 KB, cut
    anywhere (in a message, inside a character of several bytes), a block holding only a control
    message, it gives what it gives read whole."""
    (tmp_path / "objects").write_bytes(b"".join(gzip.compress(m) for m in _firehose_object(120)))
    whole, batches = _read_in_blocks(tmp_path, config, monkeypatch)
    assert len(batches) > 20 and max(batches) < 40 and sum(batches) == 363 and whole.table.height == 360
    assert whole.files[0].format == "cloudwatch-subscription (json-document [].logEvents[])" and not whole.files[0].rejected
    assert whole.copies[0][2:] == [3, "sent again"]


@pytest.mark.parametrize("block_bytes", [None, 4096])
def test_an_object_cut_short_keeps_its_whole_messages(tmp_path, config, block_bytes):
    """A Firehose object whose last gzip member is cut off (a download that stopped): every whole
    message's events are read, the message cut short is one rejected position, and the file is
    said to be truncated (it was all rejected, read line by line, before)."""
    data = b"".join(gzip.compress(m) for m in _firehose_object(60))
    (tmp_path / "objects").write_bytes(data[:-25])
    result = ingest([str(tmp_path)], config, block_bytes=block_bytes)
    report = result.files[0]
    assert report.truncated and (report.records, report.lines, dict(report.rejected)) == (180, 181, {"invalid_json": 1})
    assert result.rejects["line"].to_list() == [181] and result.rejects["text"][0].startswith('{"messageType":"DATA_MESSAGE"')


_CUTS = st.lists(st.integers(1, 60), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["m", "id", "n"]), st.one_of(_TEXTS, st.integers(-2**53, 2**53)), min_size=1),
                min_size=1, max_size=6),
       st.lists(st.sampled_from(["", " ", "\n", "\r\n", "\t"]), min_size=6, max_size=6), _CUTS, st.booleans())
def test_json_values_fed_in_pieces_are_each_what_was_written(values, gaps, cuts, cut_short):
    """Objects back to back, fed in pieces cut anywhere (inside a string, between the bytes of one
    character): each value as it was written, in order, and nothing left; cut short, the values
    before the last and what is left of the last, which is not JSON."""
    data = "".join(orjson.dumps(v).decode() + gap for v, gap in zip(values, gaps)).encode()
    if cut_short:
        data = data.rstrip()[:-1]
    cutter, got, at = ValueCutter(), [], 0
    for size in cuts:
        got.extend(cutter.feed(data[at:at + size]))
        at += size
    got.extend(cutter.feed(data[at:]))
    last, rest = cutter.finish()
    if cut_short:
        assert got + last == values[:-1] and rest and not rest.isspace()
    else:
        assert (got + last, rest) == (values, b"")


def test_many_cuts_inside_strings_are_found_by_decoding_fed_in_pieces():
    """A value whose strings hold more `}{` than cuts are tried, fed a few bytes at a time: its
    end is found by decoding once it is whole, and the values after it are cut again."""
    values = [{"m": "}{" * 200}, {"m": "ok"}, {"m": "é}{"}, {"n": 1}]
    data = b"".join(orjson.dumps(v) for v in values)
    cutter, got = ValueCutter(), []
    for at in range(0, len(data), 7):
        got.extend(cutter.feed(data[at:at + 7]))
    last, rest = cutter.finish()
    assert (got + last, rest) == (values, b"")


def _gcloud_entries(count: int) -> list[dict]:
    """`gcloud logging read --format=json` entries: records holding arrays of objects (`},{`
    inside an element) and strings holding `},{`."""
    return [{"insertId": f"{k:014x}", "jsonPayload": {"ts": f"2026-11-29T07:{k // 60 % 60:02d}:{k % 60:02d}.{k:06d}Z",
                                                        "event": "job_started", "job_id": f"j{k}", "note": "a },{ b" * (k % 2),
                                                        "spans": [{"n": k}, {"n": k + 1}]},
             "logName": "projects/acme-prod/logs/stdout",
             "resource": {"type": "k8s_container", "labels": {"pod_name": f"notifier-worker-{k % 3}"}},
             "timestamp": f"2026-11-29T07:{k // 60 % 60:02d}:{k % 60:02d}.{k:06d}Z"} for k in range(count)]


def test_an_array_document_is_read_a_block_at_a_time(tmp_path, config, monkeypatch):
    """A top-level array (gcloud's export, pretty-printed) is read a block at a time, as its
    elements are cut (a 323 MB export held 2.4 GB read whole): in blocks of 4 KB it gives what it
    gives read whole."""
    (tmp_path / "gcloud-read.json").write_bytes(json.dumps(_gcloud_entries(300), indent=2).encode())
    by_polars: list[int] = []
    whole, batches = _read_in_blocks(tmp_path, config, monkeypatch, polars_batches=by_polars)
    assert len(batches) > 20 and max(batches) < 20 and sum(batches) == 300 == whole.table.height
    # after the first block, polars reads the elements (nested arrays of objects indented deeper)
    assert len(by_polars) > 20 and sum(by_polars) > 280
    assert whole.files[0].format == "gcp-logging (json-document [])" and not whole.files[0].rejected


def test_an_array_on_one_line_is_read_by_polars(tmp_path, config, monkeypatch):
    """An array on one line whose strings hold what lies between two elements (`}, {`): the
    elements are cut where an object with a key begins, and polars reads nearly every block."""
    entries = _gcloud_entries(300)
    for entry in entries:
        entry["jsonPayload"]["note"] = "a }, { b"
        del entry["jsonPayload"]["spans"]
    (tmp_path / "gcloud-read.json").write_bytes(json.dumps(entries).encode())
    by_polars: list[int] = []
    whole, batches = _read_in_blocks(tmp_path, config, monkeypatch, polars_batches=by_polars)
    assert sum(batches) == 300 == whole.table.height and sum(by_polars) > 280


def test_a_compact_array_polars_keeps_refusing_is_cut_in_python(tmp_path, config, monkeypatch):
    """A compact array whose elements hold arrays of objects (`},{` inside each one): polars is
    given a few blocks, refuses each, and the rest is cut and parsed as before; the same table."""
    (tmp_path / "gcloud-read.json").write_bytes(json.dumps(_gcloud_entries(300)).encode())
    calls: list[bool] = []
    read_elements = RecordReader.read

    def counted(self, *args):
        got = read_elements(self, *args)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(RecordReader, "read", counted)
    whole, batches = _read_in_blocks(tmp_path, config, monkeypatch)
    assert calls == [False] * ingest_module.REFUSED_BLOCKS and sum(batches) == 300 == whole.table.height


@pytest.mark.parametrize("block_bytes", [None, 4096])
def test_an_array_cut_short_keeps_its_whole_elements(tmp_path, config, block_bytes):
    """An export cut off in its last elements (a download that stopped): the elements before are
    read, what is left one rejected position (it was read line by line, every line rejected)."""
    data = json.dumps(_gcloud_entries(100), indent=2).encode()
    (tmp_path / "gcloud-read.json").write_bytes(data[:data.rfind(b'"insertId"')])
    report = ingest([str(tmp_path)], config, block_bytes=block_bytes).files[0]
    assert (report.records, report.lines, dict(report.rejected)) == (99, 100, {"invalid_json": 1})


_VALUES = st.one_of(st.dictionaries(st.sampled_from(["m", "id", "n"]), st.one_of(_TEXTS, st.integers(-2**53, 2**53)), min_size=1),
                    st.lists(_TEXTS, max_size=3), st.integers(-2**53, 2**53), st.just({}))


@settings(max_examples=200, deadline=None)
@given(st.lists(_VALUES, max_size=6), st.sampled_from([None, 1, 2]), _CUTS, st.booleans())
def test_an_array_fed_in_pieces_is_each_element_as_written(values, indent, cuts, cut_short):
    """An array of objects (and of anything else), compact or pretty-printed, fed in pieces cut
    anywhere: each element as written; cut short (no `]`), the elements before the last."""
    data = json.dumps(values, indent=indent, ensure_ascii=False).encode()
    if cut_short:
        data = data.rstrip()[:-1]
    cutter, got, at = ValueCutter(in_array=True), [], 0
    for size in cuts:
        got.extend(cutter.feed(data[at:at + size]))
        at += size
    got.extend(cutter.feed(data[at:]))
    last, rest = cutter.finish()
    if cut_short and values:
        assert got + last == values[:-1] and rest.strip()
    else:
        assert (got + last, rest.strip()) == ([] if cut_short else values, b"")


def _filter_log_events(count: int, streams: int = 40) -> dict:
    """`aws logs filter-log-events` as the CLI writes it once it has paged through: the events,
    then the streams it searched."""
    events = [{"logStreamName": f"ecs/notifier/{k % 3}", "timestamp": 1784628000000 + 100 * k,
               "message": orjson.dumps({"ts": f"2026-07-21T10:{k // 600 % 60:02d}:{k // 10 % 60:02d}.{k % 10}00Z",
                                        "event": "job_started", "job_id": f"j{k}", "note": "a },{ b" * (k % 2)}).decode(),
               "ingestionTime": 1784628000420 + 100 * k, "eventId": f"{k:056d}"} for k in range(count)]
    return {"events": events, "searchedLogStreams": [{"logStreamName": f"ecs/notifier/{s}", "searchedCompletely": True}
                                                     for s in range(streams)]}


def _search_response(count: int) -> dict:
    hits = [{"_index": "logs-notifier", "_id": f"{k:020x}", "_score": None, "sort": [k],
             "_source": {"@timestamp": f"2026-07-21T10:{k // 600 % 60:02d}:{k // 10 % 60:02d}.{k % 10}00Z",
                         "message": orjson.dumps({"event": "job_started", "job_id": f"j{k}"}).decode(),
                         "kubernetes": {"pod": {"name": f"notifier-{k % 3}"}}, "tags": [{"k": "a"}, {"k": "b"}]}}
            for k in range(count)]
    return {"took": 9, "timed_out": False, "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {"total": {"value": count, "relation": "eq"}, "max_score": None, "hits": hits}}


@pytest.mark.parametrize("document, label", [
    (_filter_log_events(300), "cloudwatch-logs (json-document events[])"),
    (_search_response(300), "elasticsearch (json-document hits.hits[]._source)"),
], ids=["filter-log-events", "search-hits"])
def test_a_document_s_array_of_records_is_read_a_block_at_a_time(tmp_path, config, monkeypatch, document, label):
    """A document whose records are one array inside it (`aws logs filter-log-events`' `events`,
    search hits in `hits.hits`), longer than a block, is read a block at a time from that array (a
    238 MB filter-log-events output held 1.5 GiB read whole): what is before the array and after
    it is read too, and it gives what it gives read whole."""
    (tmp_path / "export.json").write_bytes(json.dumps(document, indent=4).encode())
    by_polars: list[int] = []
    whole, batches = _read_in_blocks(tmp_path, config, monkeypatch, polars_batches=by_polars)
    assert len(batches) > 20 and max(batches) < 20 and sum(batches) == 300 == whole.table.height
    assert whole.files[0].format == label and not whole.files[0].rejected
    assert len(by_polars) > 20 and sum(by_polars) > 280


def test_a_document_whose_first_array_is_not_its_records_is_read_whole(tmp_path, config, monkeypatch):
    """An array of something else cut off in the first block (notes before the events): the
    document is read whole, not taken for its records."""
    document = {"notes": [{"n": k, "text": "x" * 40} for k in range(200)], **_filter_log_events(50)}
    (tmp_path / "export.json").write_bytes(json.dumps(document, indent=2).encode())
    whole, batches = _read_in_blocks(tmp_path, config, monkeypatch)
    assert batches == [50] and whole.table.height == 50


@pytest.mark.parametrize("block_bytes", [None, 4096])
@pytest.mark.parametrize("ending", ["cut short", "broken after"])
def test_a_document_cut_short_keeps_its_whole_records(tmp_path, config, block_bytes, ending):
    """An export cut off in its events, or whose end after them is not JSON: the whole events are
    read, what is left is one rejected position."""
    data = json.dumps(_filter_log_events(300), indent=4).encode()
    if ending == "cut short":
        data = data[:data.rfind(b'"eventId"')]
    else:
        data = data[:data.rfind(b"}")] + b"}, ]"
    (tmp_path / "export.json").write_bytes(data)
    result = ingest([str(tmp_path)], config, block_bytes=block_bytes)
    report = result.files[0]
    kept = 299 if ending == "cut short" else 300
    assert (report.records, report.lines, dict(report.rejected)) == (kept, kept + 1, {"invalid_json": 1})


_KEYS = st.sampled_from(["events", "hits", "data", "meta", "k"])
_SCALARS = st.one_of(st.integers(-2**53, 2**53), _TEXTS, st.none(), st.booleans())


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_KEYS, st.one_of(_SCALARS, st.lists(_SCALARS, max_size=2), st.dictionaries(_KEYS, _SCALARS, max_size=2)), max_size=3),
       st.booleans(),
       st.lists(st.dictionaries(st.sampled_from(["m", "id", "n"]), st.one_of(_TEXTS, st.integers(-2**53, 2**53)), min_size=1), min_size=2, max_size=6),
       st.dictionaries(_KEYS, _SCALARS, max_size=2), st.sampled_from([None, 2]), st.integers(0, 10_000), _CUTS)
def test_an_array_within_a_document_fed_in_pieces_is_each_element(before, nested, elements, after, indent, where, cuts):
    """A document `{...before, "records": [elements], ...after}` (or one level deeper) whose first
    block ends anywhere in its array: the array is found with the keys down to it, its elements
    fed in pieces are each as written, what follows them closes the document, and the document
    each batch is put back in holds what was before the array."""
    inner = {**before, "records": elements, **after}
    document = {"took": 1, "outer": inner} if nested else inner
    data = json.dumps(document, indent=indent, ensure_ascii=False).encode()
    opening = data.index(b"[", data.index(b'"records"'))
    first_end = opening + 1 + where % (data.rindex(b"]") - opening - 1)  # inside the array, before its `]`
    within = array_within(data[:first_end])
    if within is None:  # no element begun yet: nothing to cut
        assert not data[opening + 1:first_end].strip(b" \n{")
        return
    assert within.path == (["outer", "records"] if nested else ["records"]) and within.prefix == data[:opening]
    cutter, got, at = ValueCutter(within=within), [], opening
    for size in [first_end - opening, *cuts]:
        got.extend(cutter.feed(data[at:at + size]))
        at += size
    got.extend(cutter.feed(data[at:]))
    last, rest = cutter.finish()
    assert (got + last, rest) == (elements, b"")
    keys = list(inner)
    held = {**{k: inner[k] for k in keys[:keys.index("records")]}, "records": elements}  # what was before the array
    assert cutter.document(elements) == ({"took": 1, "outer": held} if nested else held)


@pytest.mark.parametrize("block_bytes", [None, 4096])
@pytest.mark.parametrize("bad", [b'{"message": "\xff\xfe"}', b'{"timestamp": NaN}', b'{"message": "\\ud800"}'],
                         ids=["not-utf8", "nan", "lone-surrogate"])
def test_an_element_that_is_not_json_is_one_position(tmp_path, config, block_bytes, bad):
    """One element of an export that is not JSON (bytes that are not UTF-8, NaN, a lone
    surrogate) is one rejected position in its place; the elements after it are read (the whole
    file was rejected before)."""
    events = [orjson.dumps(event) for event in _filter_log_events(300)["events"]]
    events[150] = bad
    (tmp_path / "export.json").write_bytes(b'{"events": [\n' + b",\n".join(events) + b'\n], "searchedLogStreams": []}')
    result = ingest([str(tmp_path)], config, block_bytes=block_bytes)
    report = result.files[0]
    assert (report.records, report.lines, dict(report.rejected)) == (299, 300, {"invalid_json": 1})
    assert result.rejects["line"].to_list() == [151]
    assert sorted(int(j[1:]) for j in result.texts.decoded(result.table)["job_id"].cast(str)) == [k for k in range(300) if k != 150]


def _decoded_hits(count: int) -> list[dict]:
    """Search hits of an ECS logger writing to Elasticsearch (the record's own fields in `_source`,
    some messages a provider's JSON response) and of Filebeat without a JSON parser (the
    application's line in `message`, ECS's `event` object beside it)."""
    hits = []
    for k in range(count):
        ts = f"2026-07-21T10:{k // 60 % 60:02d}:{k % 60:02d}.{k % 1000:03d}Z"
        if k % 3 == 2:
            line = {"ts": ts, "event": "job_acked", "job_id": f"q-{k}", "worker_id": "w-2"}
            source = {"@timestamp": ts, "message": json.dumps(line), "event": {"dataset": "kubernetes.container_logs"},
                      "kubernetes": {"pod": {"name": "worker-notifier-2"}}, "stream": "stdout"}
        else:
            message = json.dumps({"status": "queued", "id": k}) if k % 3 == 1 else f"{{user}} acked job {k}"
            source = {"@timestamp": ts, "log.level": "info", "event": "email_sent" if k % 3 == 1 else "job_acked",
                      "job_id": f"q-{k}", "worker_id": "w-1", "message": message}
            if k % 6 == 4:  # a job id written as a number names the job as well, and no event
                del source["event"]
                source["job_id"] = 10_000 + k
        hits.append({"_index": ".ds-logs-notifier-default", "_id": f"h{k:05d}", "_score": None, "_source": source})
    return hits


def test_a_decoded_hit_keeps_its_fields_when_its_message_is_json(tmp_path, config, monkeypatch):
    """A hit whose `_source` names its event or job was decoded already: its message is a message,
    even one that holds JSON (it replaced the record's fields, or rejected the record when it began
    with a brace and was not JSON); Filebeat's undecoded hits are still unwrapped, ECS's `event`
    object notwithstanding. Read whole (in Python) and in blocks (polars), alike."""
    hits = _decoded_hits(300)
    (tmp_path / "search.json").write_text(json.dumps({"took": 5, "hits": {"hits": hits}}, indent=2))
    polars_batches: list[int] = []
    whole, _ = _read_in_blocks(tmp_path, config, monkeypatch, polars_batches=polars_batches)
    assert sum(polars_batches) > 200  # most hits were read by polars
    table = as_strings(whole.text_table())
    assert table.height == 300 and not whole.files[0].rejected
    rows = {r["job_id"]: r for r in table.select("job_id", "name", "worker_id", "message").to_dicts()}
    assert rows["q-1"] == {"job_id": "q-1", "name": "email_sent", "worker_id": "w-1", "message": '{"status": "queued", "id": 1}'}
    assert rows["q-3"]["message"] == "{user} acked job 3" and rows["q-3"]["name"] == "job_acked"
    assert rows["q-2"]["name"] == "job_acked" and rows["q-2"]["worker_id"] == "w-2"  # Filebeat's line unwrapped
    assert rows["10004"]["message"] == '{"status": "queued", "id": 4}' and rows["10004"]["worker_id"] == "w-1"
    lines = tmp_path / "hits"
    lines.mkdir()
    (lines / "hits.ndjson").write_text("".join(json.dumps(h) + "\n" for h in hits))
    one_a_line = as_strings(ingest([str(lines)], config).text_table())
    assert one_a_line.drop("source", "line", "format").sort("job_id").equals(table.drop("source", "line", "format").sort("job_id"))


@pytest.mark.parametrize("layout", ["compact", "pretty", "cut-short"])
def test_search_pages_appended_each_longer_than_a_block_are_read_whole(tmp_path, config, monkeypatch, layout):
    """A scroll's pages appended to one file (`curl .../_search/scroll >> pages.json`, each page
    longer than a block): the first page's hits are read as its array is cut, and the pages after
    it too (before, the rest of the file was held to its end and rejected as one position). Read
    in blocks of 4 KB as read whole; a last page cut short keeps its hits before the cut."""
    hits = _decoded_hits(300)
    pages = [
        {"_scroll_id": "FGluY2x1ZGVfY29udGV4dF91dWlkDXF1ZXJ5QW5kRmV0Y2gBFkR", "took": 4, "timed_out": False,
         "hits": {"total": {"value": 300, "relation": "eq"}, "max_score": None, "hits": hits[p:p + 60]}}
        for p in range(0, 300, 60)
    ]
    pages.insert(3, {**pages[0], "hits": {"total": {"value": 300, "relation": "eq"}, "max_score": None, "hits": []}})
    if layout == "compact":  # Elasticsearch's responses end without a line break
        data = b"".join(orjson.dumps(page) for page in pages)
    else:
        data = b"".join(json.dumps(page, indent=2).encode() + b"\n" for page in pages)
    if layout == "cut-short":
        data = data[: data.rfind(b'"_id": "h00290"')]
    assert len(data) // len(pages) > 3 * 4096
    (tmp_path / "pages.json").write_bytes(data)
    whole, _ = _read_in_blocks(tmp_path, config, monkeypatch)
    report = whole.files[0]
    assert report.format == "elasticsearch (json-document hits.hits[]._source)"
    whole_pages = len(pages) - (layout == "cut-short")
    assert f"{whole_pages:,} JSON documents one after the other" in report.notes
    read = as_strings(whole.text_table())["job_id"].to_list()
    if layout == "cut-short":
        assert read == [str(10_000 + k) if k % 6 == 4 else f"q-{k}" for k in range(290)]
        assert dict(report.rejected) == {"invalid_json": 1}
    else:
        assert len(read) == 300 and not report.rejected
