"""A read that would likely exhaust memory is announced on stderr before it starts, and still runs."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from dupfind import memory_check
from dupfind.cli import app
from dupfind.memory_check import LogSize, available_bytes, log_bytes, log_size, memory_warning
from dupfind.sources import expand_inputs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LOGS = FIXTURES / "synth" / "deploy-overlap" / "logs"


def test_log_bytes_counts_decompressed_text(tmp_path: Path) -> None:
    text = b'{"ts":"2026-07-21T10:00:00Z","event":"job_started","job_id":"q-1"}\n' * 2000
    (tmp_path / "plain.log").write_bytes(text)
    (tmp_path / "packed.log.gz").write_bytes(gzip.compress(text))
    (tmp_path / "packed.log.bz2").write_bytes(bz2.compress(text))
    sources = {Path(s.path).name: s for s in expand_inputs([str(tmp_path)])}
    assert log_bytes([sources["plain.log"]]) == len(text)
    assert log_bytes([sources["packed.log.gz"]]) == len(text)  # from the gzip trailer, not the packed size
    packed = (tmp_path / "packed.log.bz2").stat().st_size
    assert log_bytes([sources["packed.log.bz2"]]) == packed * memory_check.ASSUMED_RATIO
    assert log_bytes(expand_inputs(["-"])) == 0


def test_lines_are_counted_in_each_files_first_bytes(tmp_path: Path) -> None:
    """A small file's lines are counted; a larger one's are scaled from its first bytes, read
    through gzip and xz too; a bz2 file's (whose first block is larger than the sample) are
    assumed short, so that the estimate errs high."""
    line = b'{"ts":"2026-07-21T10:00:00.000001Z","event":"job_started","job_id":"q-00001"}\n'
    many = line * 20000  # 1.5 MB, far more than the sample
    (tmp_path / "small.log").write_bytes(line * 3 + line[:-1])  # the last line without its newline
    (tmp_path / "large.log").write_bytes(many)
    (tmp_path / "large.log.gz").write_bytes(gzip.compress(many))
    (tmp_path / "large.log.xz").write_bytes(lzma.compress(many))
    (tmp_path / "large.log.bz2").write_bytes(bz2.compress(many))
    (tmp_path / "one-document.json").write_bytes(b'{"records": [' + b"1," * 40000 + b"1]}")
    (tmp_path / "empty.log").write_bytes(b"")
    sizes = {Path(s.path).name: log_size([s]) for s in expand_inputs([str(tmp_path)])}
    assert sizes["small.log"] == LogSize(4 * len(line) - 1, 4)
    assert sizes["large.log"].bytes == sizes["large.log.gz"].bytes == len(many)
    for name in ("large.log", "large.log.gz"):
        assert 20000 <= sizes[name].lines <= 20100, (name, sizes[name])
    xz = sizes["large.log.xz"]  # no size kept: assumed 5 times the packed bytes, lines as dense as its start
    assert xz.bytes == (tmp_path / "large.log.xz").stat().st_size * memory_check.ASSUMED_RATIO
    assert xz.lines == -(-xz.bytes // len(line))
    packed = (tmp_path / "large.log.bz2").stat().st_size
    assert sizes["large.log.bz2"] == LogSize(packed * memory_check.ASSUMED_RATIO,
                                             -(-packed * memory_check.ASSUMED_RATIO // memory_check.DEFAULT_LINE_BYTES))
    document = sizes["one-document.json"]  # no newline in its first bytes: a line a sample's bytes
    assert document.lines == -(-document.bytes // memory_check.SAMPLE_BYTES) > 1
    assert sizes["empty.log"] == LogSize(0, 0)


def test_a_json_document_s_records_are_counted_not_its_lines(tmp_path: Path) -> None:
    """A pretty-printed document holds 10-20 lines a record and is read a block at a time: its
    records are counted from its first bytes (objects that follow objects), in an array, under a
    key, or as gzip members back to back (Firehose: the sample reads on through the members), and
    each costs what a record read from a document costs; NDJSON is counted by its lines, as before."""
    import json

    records = [{"insertId": f"{k:012x}", "jsonPayload": {"event": "job_started", "job_id": f"j{k}", "note": "x},{y"},
                "resource": {"labels": {"pod_name": f"w-{k % 3}"}}, "timestamp": f"2026-07-21T10:00:{k % 60:02d}Z"}
               for k in range(5000)]
    (tmp_path / "array.json").write_bytes(json.dumps(records, indent=2).encode())
    (tmp_path / "events.json").write_bytes(json.dumps({"events": records, "searchedLogStreams": []}, indent=4).encode())
    (tmp_path / "objects").write_bytes(b"".join(gzip.compress(json.dumps({"logEvents": records[k:k + 5]}).encode())
                                                for k in range(0, 5000, 5)))
    (tmp_path / "records.ndjson").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    sizes = {Path(s.path).name: log_size([s]) for s in expand_inputs([str(tmp_path)])}
    for name in ("array.json", "events.json"):
        assert sizes[name].lines == 0 and 4500 <= sizes[name].records <= 6000, (name, sizes[name])
    # gzip's text is estimated high from its first bytes (see START_RATIO_BIAS), its records with it
    assert sizes["objects"].lines == 0 and 4500 <= sizes["objects"].records <= 5000 * memory_check.START_RATIO_BIAS * 1.1
    assert sizes["records.ndjson"].records == 0 and 4900 <= sizes["records.ndjson"].lines <= 5100
    lines = sum(1 for _ in (tmp_path / "array.json").open())
    assert memory_check.needed_bytes(sizes["array.json"]) < memory_check.needed_bytes(
        LogSize(sizes["array.json"].bytes, lines))  # as lines, it was estimated far higher


def _varied_lines(n: int) -> bytes:
    """Log lines that compress as real ones do (ids and times change from line to line)."""
    return b"".join(
        b'{"ts":"2026-07-21T10:%02d:%02d.%06dZ","event":"job_started","job_id":"q-%07d","worker":"w-%d"}\n'
        % (i // 60 % 60, i % 60, i * 7919 % 1000000, i * 104729 % 10**7, i % 17) for i in range(n)
    )


def test_a_gzip_files_trailer_is_only_believed_where_its_first_bytes_agree(tmp_path: Path) -> None:
    """The size a gzip file states in its last 4 bytes is taken when the ratio of its first bytes
    agrees; a file cut off while it was compressed, or ending in other bytes, is estimated from that
    ratio instead (before: up to 4 GB for a file of a few hundred bytes, read in windows of time);
    several members (whose trailer is the last one's) too."""
    text = _varied_lines(40000)  # 3.6 MB
    packed = gzip.compress(text)
    (tmp_path / "whole.log.gz").write_bytes(packed)
    (tmp_path / "cut-off.log.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "false-trailer.log.gz").write_bytes(packed[:-4] + (4_000_000_000).to_bytes(4, "little"))
    (tmp_path / "members.log.gz").write_bytes(packed + gzip.compress(text[:1000]))
    (tmp_path / "small-cut.log.gz").write_bytes(packed[:600])
    sizes = {Path(s.path).name: log_size([s]) for s in expand_inputs([str(tmp_path)])}
    assert sizes["whole.log.gz"].bytes == len(text)  # the trailer
    for name, holds in [("cut-off.log.gz", len(text) // 2), ("false-trailer.log.gz", len(text)),
                        ("members.log.gz", len(text) + 1000), ("small-cut.log.gz", len(text) * 600 // len(packed))]:
        assert holds / 2 <= sizes[name].bytes <= holds * 2, (name, sizes[name], holds)
        line = len(text) // 40000
        assert holds / line / 2 <= sizes[name].lines <= holds / line * 2, (name, sizes[name])


def test_a_gzip_trailer_of_4_gb_or_more_is_read_modulo_2_to_the_32(tmp_path: Path) -> None:
    """The trailer holds the size modulo 2^32: of the sizes it may stand for, the one nearest the
    estimate from the file's first bytes (a 5 GB log packed to 600 MB is not 0.7 GB)."""
    sparse = tmp_path / "large.log.gz"
    with open(sparse, "wb") as fh:
        fh.truncate(600_000_000 - 4)  # a hole: no disk used
        fh.seek(0, 2)
        fh.write((5_000_000_000 - 2**32).to_bytes(4, "little"))
    fd = os.open(sparse, os.O_RDONLY)
    try:  # the first bytes of a file packed 8 to 1 (the start twice as dense as the whole)
        first = memory_check._Sample(b"x" * memory_check.SAMPLE_BYTES, memory_check.SAMPLE_BYTES // 4)
        assert memory_check._gzip_text_bytes(fd, 600_000_000, b"", first) == 5_000_000_000
        off = memory_check._Sample(b"x" * memory_check.SAMPLE_BYTES, memory_check.SAMPLE_BYTES // 2)  # 4 to 1
        # The nearest reading, 0.7 GB, is not within 3x of the 2.4 GB estimated: the estimate.
        assert memory_check._gzip_text_bytes(fd, 600_000_000, b"", off) == 2_400_000_000
    finally:
        os.close(fd)


def test_short_lines_need_more_memory_than_long_lines_of_the_same_bytes(tmp_path: Path) -> None:
    """What a read keeps grows with its rows: the same bytes in shorter lines are estimated higher."""
    short = b'{"ts":"2026-07-21T10:00:00Z","job_id":"q-1"}\n'
    long = short[:-2] + b',"message":"' + b"x" * (4 * len(short)) + b'"}\n'
    (tmp_path / "short.log").write_bytes(short * (200_000 // len(short)))
    (tmp_path / "long.log").write_bytes(long * (200_000 // len(long)))
    sources = {Path(s.path).name: s for s in expand_inputs([str(tmp_path)])}
    short_size, long_size = log_size([sources["short.log"]]), log_size([sources["long.log"]])
    assert abs(short_size.bytes - long_size.bytes) < len(long)
    assert short_size.lines > 4 * long_size.lines
    assert memory_check.needed_bytes(short_size) > memory_check.needed_bytes(long_size)


def test_the_estimate_is_kept_under_the_files_sizes_and_times(tmp_path: Path, monkeypatch) -> None:
    """With the cache directory, a second estimate of the same unchanged files reads the kept one
    and opens none of them; a changed file, a damaged entry or an unwritable directory mean an
    estimate made afresh, never a wrong one."""
    logs, memo = tmp_path / "logs", tmp_path / "cache"
    logs.mkdir()
    text = b'{"ts":"2026-07-21T10:00:00Z","event":"job_started","job_id":"q-1"}\n' * 500
    (logs / "plain.log").write_bytes(text)
    (logs / "packed.log").write_bytes(gzip.compress(text))  # no .gz: found by its magic bytes
    monkeypatch.setattr(memory_check, "_totals", {})
    total = log_bytes(expand_inputs([str(logs)]))
    assert total == 2 * len(text)
    memory_check._totals.clear()
    assert log_bytes(expand_inputs([str(logs)]), memo=memo) == total
    [kept] = memo.glob("??/*.logbytes")
    real = memory_check._log_size
    memory_check._totals.clear()  # what this process knows: the kept entry is read

    def forbidden(sources):
        raise AssertionError("the files were opened again")

    monkeypatch.setattr(memory_check, "_log_size", forbidden)
    assert log_bytes(expand_inputs([str(logs)]), memo=memo) == total
    with pytest.raises(AssertionError):  # other files (one of them): another entry
        log_bytes(expand_inputs([str(logs / "plain.log")]), memo=memo)
    monkeypatch.setattr(memory_check, "_log_size", real)

    (logs / "packed.log").write_bytes(gzip.compress(text * 2))  # changed: another size and time
    assert log_bytes(expand_inputs([str(logs)]), memo=memo) == 3 * len(text)
    assert len(list(memo.glob("??/*.logbytes"))) == 2

    current = Path(memory_check._memo_path(memo, memory_check._memo_key(expand_inputs([str(logs)]))))
    good = current.read_bytes()
    another = orjson.loads(kept.read_bytes())  # the first files' entry, valid where it is
    damaged = [{**orjson.loads(good), "log_bytes": 7}, {**orjson.loads(good), "lines": 7}, {**orjson.loads(good), "lines": True}]
    for damage in (b"garbage", b"", b"[1]", *map(orjson.dumps, damaged), orjson.dumps(another)):
        current.write_bytes(damage)
        memory_check._totals.clear()
        assert log_bytes(expand_inputs([str(logs)]), memo=memo) == 3 * len(text), damage
        assert current.read_bytes() == good  # written anew

    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory should be")
    memory_check._totals.clear()
    assert log_bytes(expand_inputs([str(logs)]), memo=blocked) == 3 * len(text)


def test_a_kept_estimate_is_pruned_when_unused_for_a_month(tmp_path: Path, monkeypatch) -> None:
    """Kept among the per-file entries, it goes with them: a use refreshes it."""
    from dupfind.result_cache import FILE_ENTRY_MAX_AGE_S, ResultCache

    monkeypatch.setattr(memory_check, "_totals", {})
    log_bytes(expand_inputs([str(LOGS)]), memo=tmp_path)
    [kept] = tmp_path.glob("??/*.logbytes")
    old = time.time() - FILE_ENTRY_MAX_AGE_S - 3600
    os.utime(kept, (old, old))
    memory_check._totals.clear()
    log_bytes(expand_inputs([str(LOGS)]), memo=tmp_path)
    ResultCache(tmp_path)._prune_file_entries()
    assert kept.exists()
    os.utime(kept, (old, old))
    (tmp_path / ".pruned").unlink()  # pruned at most once a day
    ResultCache(tmp_path)._prune_file_entries()
    assert not kept.exists()


def test_available_memory_is_capped_by_the_cgroup_limit_of_this_process(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n")
    root = tmp_path / "cgroup"
    job = root / "memory" / "runner" / "job-7"
    job.mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    (root / "memory" / "runner" / "memory.limit_in_bytes").write_text("6000000000\n")
    (job / "memory.limit_in_bytes").write_text("3000000000\n")
    v1 = tmp_path / "v1-cgroup"
    v1.write_text("5:devices:/\n4:memory:/runner/job-7\n1:cpu:/\n0::/\n")
    assert available_bytes(meminfo, root, v1) == 3_000_000_000
    (job / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert available_bytes(meminfo, root, v1) == 6_000_000_000  # an ancestor's limit applies too
    (root / "pod").mkdir()
    (root / "pod" / "memory.max").write_text("max\n")
    v2 = tmp_path / "v2-cgroup"
    v2.write_text("0::/pod\n")
    assert available_bytes(meminfo, root, v2) == 20_000_000 * 1024  # "max": only MemAvailable counts
    (root / "pod" / "memory.max").write_text("2500000000\n")
    assert available_bytes(meminfo, root, v2) == 2_500_000_000
    assert available_bytes(tmp_path / "missing", tmp_path / "none", tmp_path / "none") is None


def test_warning_only_when_the_estimate_exceeds_what_is_available() -> None:
    sources = expand_inputs([str(LOGS)])
    size = log_size(sources)
    needed = memory_check.PEAK_PER_LOG_BYTE * size.bytes + memory_check.PEAK_PER_LINE * size.lines + memory_check.PEAK_FIXED_BYTES
    assert memory_warning(sources, available=int(needed) + 1) is None
    warning = memory_warning(sources, available=int(needed) - 1)
    assert warning is not None and "may be killed" in warning and "--since/--until" in warning


@pytest.mark.parametrize(("command", "available", "window", "said"), [
    ("stats", 10**12, [], None), ("analyze", 10**12, [], None),
    # inputs that do not fit are read one window of time at a time
    ("analyze", 10**6, [], "windows"), ("stats", 10**6, [], "windows"),
    ("analyze", 10**6, ["--memory-limit", "100G"], "warning"),  # one read asked for: it may be killed
    ("analyze", 10**6, ["--since", "2026-07-21T10:00:30Z"], None),  # a window keeps an unknown share: no estimate
])
def test_a_read_too_large_is_said_on_stderr_and_still_completes(
    monkeypatch, command: str, available: int, window: list, said: str | None,
) -> None:
    monkeypatch.setattr(memory_check, "available_bytes", lambda: available)
    result = CliRunner().invoke(app, [command, str(LOGS), "--format", "json", "--no-cache", *window])
    assert result.exit_code in (0, 1), result.output
    assert orjson.loads(result.stdout)  # the report is whole and on stdout only
    assert ("dupfind: warning: these inputs hold about" in result.stderr) == (said == "warning")
    assert ("analysing them in 1 window of time" in result.stderr) == (said == "windows")
    if said != "windows":
        assert result.stderr.count("\n") <= 1


def test_a_pipe_named_on_the_command_line_is_not_read_by_the_estimate() -> None:
    """bash's `<(zcat logs.gz)` names a pipe: the estimate leaves its bytes to ingest (read once,
    they are gone) and counts nothing for it."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b'{"ts":"2026-07-21T10:00:00Z","event":"job_started","job_id":"q-1"}\n' * 10)
        os.close(write_end)
        [source] = expand_inputs([f"/dev/fd/{read_end}"])
        assert not source.regular
        assert log_size([source]) == LogSize(0, 0)
        assert os.read(read_end, 1 << 16).count(b"\n") == 10
    finally:
        os.close(read_end)


def _analyze_a_pipe(text: bytes, *args: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    """`dupfind analyze /dev/fd/N ARGS` as bash runs `dupfind analyze <(...)`: `text` written into a pipe."""
    read_end, write_end = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write_end, text), os.close(write_end)))
    writer.start()
    try:
        return subprocess.run(
            [sys.executable, "-m", "dupfind", "analyze", f"/dev/fd/{read_end}", *args],
            pass_fds=(read_end,), capture_output=True, timeout=300, cwd=FIXTURES.parent, check=False,
            env={**os.environ, **({"DUPFIND_CACHE_DIR": str(cache)} if cache else {})},
        )
    finally:
        os.close(read_end)
        writer.join()


@pytest.mark.parametrize("limit", [None, "1MB"])
def test_a_process_substitution_is_analysed_line_for_line(limit: str | None) -> None:
    """`dupfind analyze <(cat logs/*.log)`: every line of the pipe is read, none eaten before; with
    a memory limit it is still read whole (windows would read it twice), and stderr says so."""
    text = b"".join(path.read_bytes() for path in sorted(LOGS.iterdir()))
    done = _analyze_a_pipe(text, "--format", "json", "--no-cache", *(["--memory-limit", limit] if limit else []))
    assert done.returncode == 0, done.stderr
    totals = orjson.loads(done.stdout)["inputs"]["totals"]
    assert totals["lines"] == text.count(b"\n") and totals["rejected_total"] == 0
    said = ("is not a regular file and cannot be read twice: these inputs are read whole, "
            "whatever --memory-limit says.\n")
    assert done.stderr.decode().endswith(said) if limit else done.stderr == b""


def test_a_rejected_line_of_a_pipe_keeps_its_text(tmp_path: Path) -> None:
    """A file's rejected lines are read again for their text; a pipe's cannot be: it keeps them."""
    lines = (LOGS / "producer-api-1.log").read_bytes().splitlines(keepends=True)
    stray = b'{"level":"info","event":"job_started","job_id":"no-time-1"}\n'
    rejects = tmp_path / "rejects.ndjson"
    done = _analyze_a_pipe(b"".join([*lines[:5], stray, *lines[5:]]), "--format", "json", "--no-cache",
                           "--rejects", str(rejects))
    assert done.returncode == 0, done.stderr
    [rejected] = [orjson.loads(line) for line in rejects.read_bytes().splitlines()]
    assert (rejected["line"], rejected["reason"], rejected["text"]) == (6, "no_timestamp", stray.decode().strip())


def test_a_pipe_is_never_cached(tmp_path: Path) -> None:
    """A pipe's stat does not name what it holds (the next `<(...)` is another pipe with other
    lines): with the cache on, nothing of its read is stored, and a second run reads it again."""
    text = b"".join(path.read_bytes() for path in sorted(LOGS.iterdir()))
    cache = tmp_path / "cache"
    first = _analyze_a_pipe(text, "--format", "json", cache=cache)
    assert first.returncode == 0, first.stderr
    stored = [p.relative_to(cache) for p in cache.rglob("*") if p.is_file() and p.suffix != ".parsed"]
    assert stored == [], stored  # the rules' parsed TOML aside: no pack, set, index or estimate
    half = b"".join(text.splitlines(keepends=True)[: text.count(b"\n") // 2])
    second = _analyze_a_pipe(half, "--format", "json", cache=cache)
    assert orjson.loads(second.stdout)["inputs"]["totals"]["lines"] == half.count(b"\n")
