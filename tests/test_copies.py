"""Records an earlier input file holds exactly (a log read twice), and the repeats of a file whose logger
writes every record several times, are counted once; nothing else is."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.copies import copies_warning, merged_copies
from dupfind.echoes import ECHO_MIN_RECORDS, STRETCH_MIN
from dupfind.ingest import ingest
from dupfind.record_lines import record_runs
from dupfind.rules_registry import load_rules

from conftest import FIXTURES


def _line(ms: int, event: str, worker: str = "w-1", job: str = "job-1") -> str:
    return json.dumps({"ts": f"2026-07-21T10:00:00.{ms:03d}Z", "level": "info", "event": event, "job_id": job,
                       "worker_id": worker, "msg": f"{event} {job}"})


def _at(second: float, event: str, worker: str = "w-1", job: str | None = "job-1", **fields) -> str:
    return json.dumps({"ts": f"2026-07-21T10:{int(second) // 60:02d}:{second % 60:06.3f}Z", "level": "info",
                       "event": event, "job_id": job, "worker_id": worker, "msg": event, **fields})


def _read(tmp_path: Path, files: dict[str, list[str]]):
    for name, lines in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("".join(line + "\n" for line in lines))
    return ingest([str(tmp_path)], load_config(cwd=Path("/")))


def test_a_file_read_twice_is_counted_once_and_named(tmp_path):
    lines = [_line(1, "job_started"), _line(5, "email_sent"), _line(9, "job_succeeded")]
    result = _read(tmp_path, {"a.log": lines, "a (1).log": lines, "b.log": [_line(3, "job_started", "w-2", "job-2")]})
    assert result.table.height == 4
    assert sorted(Path(p).name for p in result.table["source"].cast(str).unique()) == ["a (1).log", "b.log"]
    assert result.copies == [[str(tmp_path / "a.log"), str(tmp_path / "a (1).log"), 3]]
    assert [f.records for f in result.files] == [3, 3, 1]  # every line still parsed and accounted for


def test_the_same_records_without_their_envelope_are_the_same_records(tmp_path):
    """A worker's stdout as the container runtime wrote it and as `kubectl logs` gives it: other
    format, no stream, the same records."""
    inner = [_line(1, "job_started"), _line(5, "email_sent")]
    cri = [f"2026-07-21T10:00:00.{k:03d}000000Z stdout F {line}" for k, line in zip((2, 6), inner)]
    result = _read(tmp_path, {"pods/w-1/0.log": cri, "kubectl/w-1.log": inner})
    assert result.table.height == 2
    assert [[Path(p).relative_to(tmp_path).as_posix(), Path(of).relative_to(tmp_path).as_posix(), n]
            for p, of, n in result.copies] == [["pods/w-1/0.log", "kubectl/w-1.log", 2]]


def test_a_file_copied_from_two_as_much_is_named_with_the_first(tmp_path):
    """Which earlier file a warning names does not depend on the order polars happens to give; it
    counts every record of the file counted once, the other file's too."""
    a, b = [_line(1, "job_started"), _line(2, "email_sent")], [_line(3, "job_started", job="job-2"), _line(4, "email_sent", job="job-2")]
    result = _read(tmp_path, {"a.log": a, "b.log": b, "c.log": a + b})
    assert result.table.height == 4
    assert result.copies == [[str(tmp_path / "c.log"), str(tmp_path / "a.log"), 4]]


@pytest.mark.parametrize("other", [
    _line(6, "email_sent"),  # a millisecond later
    _line(5, "email_sent", worker="w-2"),  # another worker
    _line(5, "email_sent", job="job-9"),  # another job
])
def test_records_that_differ_in_anything_are_kept(tmp_path, other):
    result = _read(tmp_path, {"a.log": [_line(5, "email_sent")], "b.log": [other]})
    assert result.table.height == 2 and result.copies == []


def test_a_record_repeated_within_one_file_is_kept(tmp_path):
    """Within one file a repeat is the log's own (a retry in the same millisecond, a handler added
    twice): not a second reading of the file."""
    result = _read(tmp_path, {"a.log": [_line(5, "email_sent")] * 2, "b.log": [_line(7, "job_started")]})
    assert result.table.height == 3 and result.copies == []


LIFECYCLE = ("job_received", "job_started", "provider_request", "provider_response", "job_succeeded")


def _jobs(count: int, worker: str = "w-1") -> list[str]:
    """`count` jobs' lifecycles, each record at a millisecond of its own."""
    return [_line(5 * j + k, event, worker, f"job-{j}") for j in range(count) for k, event in enumerate(LIFECYCLE)]


def _each(lines: list[str], times: int) -> list[str]:
    return [line for line in lines for _ in range(times)]


@pytest.mark.parametrize("times", [2, 3])
def test_a_file_whose_logger_writes_every_record_several_times_is_counted_once(tmp_path, times):
    """A logging handler attached twice (or a module's setup run three times) writes each record
    again on the next line: each record once, the file named with how many times it wrote them."""
    lines = _jobs(4)
    result = _read(tmp_path, {"w-1.log": _each(lines, times), "w-2.log": _jobs(2, "w-2")})
    assert result.table.height == len(lines) + 10
    assert result.copies == [[str(tmp_path / "w-1.log"), str(tmp_path / "w-1.log"), (times - 1) * len(lines), times]]
    kept = result.table.filter(result.table["source"].cast(str).str.ends_with("w-1.log"))["line"].to_list()
    assert kept == list(range(1, times * len(lines) + 1, times))  # the first line of each
    assert [f.records for f in result.files] == [times * len(lines), 10]


def test_a_record_written_once_to_stdout_and_once_to_stderr_is_one_record(tmp_path):
    """A StreamHandler (stderr) beside a handler on stdout: in the container runtime's file the two
    lines differ only in their stream and the runtime's own time."""
    cri = [f"2026-07-21T10:00:00.{k:03d}{n}00000Z {stream} F {line}"
           for k, line in enumerate(_jobs(3)) for n, stream in enumerate(("stdout", "stderr"))]
    result = _read(tmp_path, {"w-1.log": cri})
    assert result.table.height == 15 and result.copies[0][2:] == [15, 2]


def test_a_pools_children_that_log_twice_beside_a_parent_that_logs_once_are_told_apart(tmp_path):
    """A handler attached again in each pool child (Celery's worker_process_init): on the node's one
    file, the children's records come twice and the parent's (received, acknowledged) once; a
    redelivery the parent receives twice stays two records."""
    lines = []
    for j in range(6):
        child, base = 11 + j % 2, j
        lines.append(_at(base, "job_received", job=f"job-{j}", pid=1))
        lines += _each([_at(base + (10 + k) / 1000, event, job=f"job-{j}", pid=child) for k, event in enumerate(LIFECYCLE[1:])], 2)
        lines.append(_at(base + 0.02, "job_acked", job=f"job-{j}", pid=1))
    lines += [_at(9, "job_received", job="job-5", pid=1)] * 2  # redelivered twice to the parent at once
    result = _read(tmp_path, {"w-1.log": lines})
    assert result.table.height == 6 * 6 + 2 and result.copies[0][2:] == [24, 2]
    received = result.texts.decoded(result.table.filter(result.table["name"].cast(str) == "job_received"))
    assert received["job_id"].cast(str).to_list() == [*(f"job-{j}" for j in range(6)), "job-5", "job-5"]


def test_a_workers_lines_that_name_no_process_follow_their_file(tmp_path):
    """Too few to judge alone (started, stopping: no pid), they are written twice as the file's
    other records are."""
    jobs = [_at((100 * j + k) / 1000, event, job=f"job-{j}", pid=7) for j in range(1, 5) for k, event in enumerate(LIFECYCLE)]
    lines = _each([_at(0, "worker_started", job=None), *jobs, _at(9, "sigterm_received", job=None)], 2)
    result = _read(tmp_path, {"w-1.log": lines})
    assert result.table.height == 22 and result.copies[0][2:] == [22, 2]
    assert result.table["kind"].cast(str).to_list()[::21] == ["worker_start", "stop_signal"]


def test_a_worker_whose_logger_writes_twice_is_judged_over_the_small_files_its_log_was_cut_into(tmp_path):
    """An export of many small files (a shipper's objects of a few lines each): too few records in
    any one file to judge, the worker's process over all of them writes every record twice. Another
    worker's records, written once, and its one record written twice in the same millisecond, stay."""
    doubled = _each(_jobs(4, "w-1"), 2)
    other = _jobs(2, "w-2")
    files = {f"w-1/part-{at // 4:03d}.log": doubled[at:at + 4] for at in range(0, len(doubled), 4)}
    files["w-2/part-000.log"] = other[:3] + [other[2]] + other[3:]
    result = _read(tmp_path, files)
    assert result.table.height == 20 + 11
    assert sum(entry[2] for entry in result.copies) == 20 and all(entry[3] == 2 for entry in result.copies)


def test_a_record_written_twice_as_often_as_the_files_others_is_two_records(tmp_path):
    """In a file that writes everything twice, a side effect requested twice in one millisecond (an
    HTTP client's retry) is four lines: two records, still a duplicate to report."""
    lines = _each(_jobs(3), 2)
    effect = _line(7, "provider_request", job="job-1")
    at = lines.index(effect) + 2
    result = _read(tmp_path, {"w-1.log": lines[:at] + [effect, effect] + lines[at:]})
    assert result.table.height == 16 and result.copies[0][2:] == [16, 2]
    effects = result.texts.decoded(result.table.filter(result.table["name"].cast(str) == "provider_request"))
    assert effects["job_id"].cast(str).to_list() == ["job-0", "job-1", "job-1", "job-2"]


def test_a_few_records_repeated_in_a_file_that_writes_each_once_are_kept(tmp_path):
    """Two records written twice among a file's others are the service's own doing (a retry within
    the same millisecond): kept, whatever share of the file's lines they are."""
    lines = _jobs(3)
    result = _read(tmp_path, {"w-1.log": lines[:3] + [lines[2]] + lines[3:9] + [lines[8]] + lines[9:]})
    assert result.table.height == 17 and result.copies == []


def test_an_idle_poll_loops_repeated_lines_do_not_make_a_files_repeats_its_loggers(tmp_path):
    """A worker polling five times a second, its log to the second: its poll lines repeat, its
    lifecycle records do not, and a side effect done twice in one second stays two records."""
    def at(second: int, event: str, job: str = "job-1") -> str:
        return json.dumps({"ts": f"2026-07-21T10:00:{second:02d}Z", "level": "info", "event": event, "job_id": job,
                           "worker_id": "w-1", "msg": event})
    polls = [at(s, "polling_queue", job=None) for s in range(40) for _ in range(5)]
    effect = at(41, "email_sent")
    result = _read(tmp_path, {"w-1.log": polls + [at(41, "job_started"), effect, effect, at(42, "job_succeeded")]})
    assert result.table.height == 204 and result.copies == []


def test_a_short_file_written_twice_is_not_judged(tmp_path):
    """Too few records to tell a logger's repeats from the service's: kept as they are."""
    lines = _jobs(1)[:3]
    assert 2 * len(lines) < ECHO_MIN_RECORDS
    result = _read(tmp_path, {"w-1.log": _each(lines, 2)})
    assert result.table.height == 6 and result.copies == []


def _second(line: str) -> float:
    record = json.loads(line)
    return 60 * int(record["ts"][14:16]) + float(record["ts"][17:-1])


def _busy(workers: list[str], jobs: int) -> list[str]:
    """`jobs` jobs a worker, one lifecycle record every 0.3 s on each, workers interleaved in time."""
    return [_at(1.5 * j + 0.3 * k + 0.01 * w, event, worker, f"{worker}-job-{j}")
            for j in range(jobs) for k, event in enumerate(LIFECYCLE) for w, worker in enumerate(workers)]


def test_a_stretch_of_records_exported_again_is_counted_once(tmp_path):
    """Two overlapping exports joined into one file (`cat 10h00.json 10h20.json`): the records of
    the overlap follow again, each once more."""
    lines = _busy(["w-1"], 8)
    result = _read(tmp_path, {"w-1.log": lines[:30] + lines[20:]})
    assert result.table.height == 40
    assert result.copies == [[str(tmp_path / "w-1.log"), str(tmp_path / "w-1.log"), 10, "stretches"]]


def test_a_shippers_batch_sent_again_is_counted_once_over_its_nodes_pods(tmp_path):
    """An export of a platform's logs where the shipper re-sent a batch: what three pods logged in
    two seconds, a few records each (too few for one pod alone), indexed again; the fourth pod's
    records of the same seconds, on another node, are there once."""
    lines = _busy(["w-1", "w-2", "w-3", "w-4"], 6)
    batch = [line for line in lines if 3.0 <= _second(line) < 5.0 and json.loads(line)["worker_id"] != "w-4"]
    assert 8 <= len(batch) and all(sum(json.loads(b)["worker_id"] == w for b in batch) < 8 for w in ("w-1", "w-2", "w-3"))
    result = _read(tmp_path, {"export.ndjson": sorted(lines + batch, key=_second)})
    assert result.table.height == len(lines)
    assert result.copies == [[str(tmp_path / "export.ndjson"), str(tmp_path / "export.ndjson"), len(batch), "stretches"]]


@pytest.mark.parametrize("again", [
    LIFECYCLE,  # one job's records written again at once (a second-resolution log, a loop run twice)
    ["polling_queue"] * 12,  # a poll loop's lines
])
def test_a_short_or_idle_stretch_written_twice_is_kept(tmp_path, again):
    lines = [_at(1.0 + k * 0.001 if event != "polling_queue" else 1.0, event, job=None if event == "polling_queue" else "job-1")
             for k, event in enumerate(again)]
    before = _busy(["w-1"], 2)
    result = _read(tmp_path, {"w-1.log": before + lines + lines})
    assert result.table.height == len(before) + 2 * len(lines) and result.copies == []


def test_a_record_written_once_breaks_a_stretch(tmp_path):
    """Two runs of six records written twice, a record written once between them: neither run
    is a stretch, and the records are kept."""
    lines = _busy(["w-1"], 4)
    again = lines[2:8] + lines[9:15]
    result = _read(tmp_path, {"w-1.log": sorted(lines + again, key=_second)})
    assert result.table.height == len(lines) + len(again) and result.copies == []


def _shipped(lines: list[tuple[str, int]]) -> list[str]:
    """Each app line with its offset in its pod's container log, as Filebeat ships it and an
    Elasticsearch export of hits one a line gives it."""
    def hit(n: int, line: str, offset: int) -> str:
        record = json.loads(line)
        return json.dumps({"_index": "filebeat-8.15.3", "_id": f"id-{n}", "_source": {
            "@timestamp": record["ts"], "stream": "stdout", "kubernetes": {"pod": {"name": record["worker_id"]}},
            "log": {"offset": offset, "file": {"path": f"/var/log/containers/{record['worker_id']}.log"}},
            "message": line}})

    return [hit(n, line, offset) for n, (line, offset) in enumerate(lines)]


def _offsets(lines: list[str]) -> list[tuple[str, int]]:
    """Each line and its offset in its pod's log, the pods' lines one after the other."""
    ends: dict[str, int] = {}
    placed = []
    for line in lines:
        pod = json.loads(line)["worker_id"]
        placed.append((line, ends.get(pod, 0)))
        ends[pod] = ends.get(pod, 0) + len(line) + 1
    return placed


def _harmful(result) -> int:
    cfg = load_config(cwd=Path("/"))
    return sum(f.harmful for f in analyze(result, cfg, load_rules(cfg)).findings)


def test_a_quiet_workers_few_records_delivered_again_are_counted_once_by_their_origin(tmp_path):
    """Filebeat re-sent a batch that held only a quiet worker's three records, its provider request
    among them: too few for a stretch. Each came again with its offset in the pod's log: one record
    each, no duplicate. Shipped without their offsets, the same records stay two each (a service
    writes one action's few lines again too) and make a duplicate side effect."""
    quiet = [_at(4.0 + 0.2 * k, event, "w-3", "w-3-job-0") for k, event in enumerate(LIFECYCLE)]
    lines = sorted(_busy(["w-1", "w-2"], 6) + quiet, key=_second)
    placed = _offsets(lines)
    again = [entry for entry in placed if entry[0] in quiet[1:4]]
    shipped = _shipped(sorted(placed + again, key=lambda entry: _second(entry[0])))
    result = _read(tmp_path / "with", {"export.ndjson": shipped})
    path = str(tmp_path / "with" / "export.ndjson")
    assert result.table.height == len(lines) and result.copies == [[path, path, 3, "sent again"]]
    assert _harmful(result) == 0
    bare = [re.sub(r',"log":\{"offset":\d+,', ',"log":{', line.replace(" ", "")) for line in shipped]
    assert all('"offset"' not in line for line in bare)
    without = _read(tmp_path / "without", {"export.ndjson": bare})
    assert without.table.height == len(lines) + 3 and without.copies == []
    assert _harmful(without) == 1


def test_a_delivery_again_split_across_two_pages_is_named_with_its_origin(tmp_path):
    """An export's pages split a re-sent batch: its records are on one page, their deliveries again
    on the next. Counted once as a file's records another holds, and said to name their origin."""
    placed = _offsets(_busy(["w-1"], 4))
    pages = {"page-001.json": _shipped(placed[:10]), "page-002.json": _shipped(placed[8:10] + placed[10:])}
    result = _read(tmp_path, pages)
    first, second = str(tmp_path / "page-001.json"), str(tmp_path / "page-002.json")
    assert result.table.height == len(placed) and result.copies == [[second, first, 2, "origin_id"]]
    assert copies_warning(result.copies).endswith("counted once, as one log read twice, or delivered again by its "
                                                  "pipeline (the same origin).")
    bare = _read(tmp_path / "bare", {"a.log": [line for line, _ in placed[:10]], "b.log": [line for line, _ in placed[8:]]})
    assert [entry[2:] for entry in bare.copies] == [[2]]


def test_records_a_service_wrote_alike_at_two_offsets_are_two(tmp_path):
    """One action's records written again by the service itself: each at an offset of its own in
    the pod's log, two records each."""
    quiet = [_at(4.0 + 0.2 * k, event, "w-3", "w-3-job-0") for k, event in enumerate(LIFECYCLE)]
    lines = sorted(_busy(["w-1", "w-2"], 6) + quiet + quiet[1:4], key=_second)
    result = _read(tmp_path, {"export.ndjson": _shipped(_offsets(lines))})
    assert result.table.height == len(lines) and result.copies == []


def test_a_logger_writing_twice_whose_batch_was_sent_again_is_counted_once(tmp_path):
    """A logging handler attached twice under Filebeat: each record at two offsets (one record, by
    its logger's k), and a batch of them delivered again with theirs (one record, by its origin)."""
    placed = _offsets(_each(_jobs(3), 2))
    shipped = _shipped(placed + placed[4:8])
    result = _read(tmp_path, {"export.ndjson": sorted(shipped, key=lambda hit: json.loads(hit)["_source"]["@timestamp"])})
    path = str(tmp_path / "export.ndjson")
    assert result.table.height == 15
    assert result.copies == [[path, path, 15, 2], [path, path, 4, "sent again"]]


def _at_us(second: float, event: str, worker: str = "w-1", job: str | None = "job-1") -> str:
    """A record whose time is written to the microsecond (structlog, zap, a container runtime)."""
    return json.dumps({"ts": f"2026-07-21T10:{int(second) // 60:02d}:{second % 60:09.6f}Z", "level": "info",
                       "event": event, "job_id": job, "worker_id": worker, "msg": event})


def _busy_us(workers: list[str], jobs: int) -> list[str]:
    """As _busy, each record's time 0-999 microseconds past its millisecond."""
    return [_at_us(1.5 * j + 0.3 * k + 0.01 * w + ((37 * j + 11 * k + 5 * w) % 997 + 1) * 1e-6, event, worker,
                   f"{worker}-job-{j}")
            for j in range(jobs) for k, event in enumerate(LIFECYCLE) for w, worker in enumerate(workers)]


def test_a_quiet_workers_few_records_delivered_again_are_counted_once_when_the_same_to_the_microsecond(tmp_path):
    """A pipeline re-sent a chunk that held a quiet worker's three records, its provider request
    among them, and the export names no origin (Fluent Bit, Loki, plain files): too few for a
    stretch, but each record is the same to the microsecond, which no service writes twice. One
    record each, no duplicate. Logged to the millisecond, the same repeats stay two records (a
    retry in the same millisecond repeats a record) and make a duplicate side effect."""
    quiet = [_at_us(4.0 + 0.2 * k + 0.000123, event, "w-3", "w-3-job-0") for k, event in enumerate(LIFECYCLE)]
    lines = sorted(_busy_us(["w-1", "w-2"], 6) + quiet, key=_second)
    result = _read(tmp_path / "us", {"export.ndjson": sorted(lines + quiet[1:4], key=_second)})
    path = str(tmp_path / "us" / "export.ndjson")
    assert result.table.height == len(lines) and result.copies == [[path, path, 3, "same microsecond"]]
    assert _harmful(result) == 0
    to_ms = [re.sub(r'(\.\d{3})\d{3}Z', r"\1Z", line) for line in lines + quiet[1:4]]
    assert len({json.loads(line)["ts"] for line in to_ms}) < len(lines)  # only the repeats share a time
    ms = _read(tmp_path / "ms", {"export.ndjson": sorted(to_ms, key=_second)})
    assert ms.table.height == len(lines) + 3 and ms.copies == []
    assert _harmful(ms) == 1


def test_a_side_effect_done_twice_a_microsecond_apart_is_two_records(tmp_path):
    effect = _at_us(4.000123, "provider_request", "w-3", "w-3-job-0")
    again = _at_us(4.000124, "provider_request", "w-3", "w-3-job-0")
    result = _read(tmp_path, {"w-3.log": [effect, again]})
    assert result.table.height == 2 and result.copies == []


@pytest.mark.parametrize("extra, by_k, by_instant", [(1, 19, 2), (2, 21, 1)])
def test_a_logger_writing_each_record_twice_to_the_microsecond_is_named_by_its_k(tmp_path, extra, by_k, by_instant):
    """Each record the same to the microsecond twice, as a handler attached twice writes it: said
    as the logger's doing (k). A record there three or four times (another copy or two: a chunk
    re-sent) is one record too, not two: what k leaves of it is the same to the microsecond."""
    lines = _each(_busy_us(["w-1"], 4), 2)
    result = _read(tmp_path, {"w-1.log": lines + lines[6:6 + extra]})
    path = str(tmp_path / "w-1.log")
    assert result.table.height == 20
    assert result.copies == [[path, path, by_k, 2], [path, path, by_instant, "same microsecond"]]


def test_a_file_read_twice_whose_logger_writes_twice_is_counted_once_for_both(tmp_path):
    lines = _each(_jobs(3), 2)
    result = _read(tmp_path, {"a.log": lines, "a (1).log": lines})
    a, copy = str(tmp_path / "a.log"), str(tmp_path / "a (1).log")
    assert result.table.height == 15
    assert result.copies == [[copy, copy, 15, 2], [a, copy, 30]]  # "a (1).log" is the first by path


def test_the_warnings_of_records_counted_once():
    assert copies_warning([["w.log", "w.log", 12, 2]]) == (
        "The logger of w.log wrote each record twice (a logging handler attached twice?): 12 repeated records counted once.")
    both = copies_warning([["b.log", "a.log", 5], ["w.log", "w.log", 24, 3], ["x.log", "x.log", 2, 2]])
    assert both.startswith("5 records of b.log are exactly records of a.log") and (
        "The loggers of 2 files wrote each record several times (a logging handler attached more than once?): 26 "
        "repeated records counted once: w.log (three times), x.log (twice).") in both
    assert merged_copies([[["w.log", "w.log", 4, 2]], [["w.log", "a.log", 1], ["w.log", "w.log", 6, 2]]]) == [
        ["w.log", "a.log", 1], ["w.log", "w.log", 6, 2]]
    assert merged_copies([[["w.log", "w.log", 9, "stretches"], ["w.log", "w.log", 4, 2]], [["w.log", "w.log", 3, "stretches"]]]) == [
        ["w.log", "w.log", 4, 2], ["w.log", "w.log", 9, "stretches"]]
    assert copies_warning([["x.log", "x.log", 9, "stretches"]]) == (
        "x.log holds stretches of its records twice, one after the other (a log shipper re-sending a batch, or "
        "overlapping exports joined into one file?): 9 repeated records counted once.")
    assert copies_warning([["x.log", "x.log", 3, "sent again"]]) == (
        "x.log holds 3 records again with the same origin (the offset, cursor or event id its log pipeline gave it): "
        "delivered again by the pipeline, not written again: counted once.")
    assert merged_copies([[["w.log", "w.log", 3, "sent again"], ["w.log", "w.log", 9, "stretches"]]]) == [
        ["w.log", "w.log", 9, "stretches"], ["w.log", "w.log", 3, "sent again"]]
    assert copies_warning([["x.log", "x.log", 4, "same microsecond"]]) == (
        "x.log holds 4 records again, each the same to the microsecond (time, event, ids, worker): a log pipeline "
        "re-sending a chunk, or a logger writing twice; a service doing a thing twice logs it at two instants: "
        "counted once.")
    assert merged_copies([[["w.log", "w.log", 2, "same microsecond"]], [["w.log", "w.log", 5, "same microsecond"],
                                                                         ["w.log", "w.log", 1, "sent again"]]]) == [
        ["w.log", "w.log", 1, "sent again"], ["w.log", "w.log", 5, "same microsecond"]]


def test_windows_keep_each_files_largest_count_and_the_warning_names_the_files():
    assert merged_copies([[["b.log", "a.log", 3]], [["b.log", "a.log", 5], ["c.log", "a.log", 1]], []]) == [
        ["b.log", "a.log", 5], ["c.log", "a.log", 1]]
    assert copies_warning([]) is None
    assert copies_warning([["b.log", "a.log", 5]]) == (
        "5 records of b.log are exactly records of a.log (time, event, ids, worker): counted once, as one log read twice.")
    many = copies_warning([[f"{k}.log", "a.log", 2] for k in range(7)])
    assert many.startswith("14 records of 7 files are exactly records of earlier files") and "and 2 more files." in many


EXPORTS = sorted(
    p for p in (*(FIXTURES / "synth").glob("*/logs"), *(FIXTURES / "scenarios").glob("*/logs"))
    if p.parent.name != "log-read-twice"
)


def _findings(logs: Path):
    config = load_config(cwd=Path("/"))
    options = json.loads(expected.read_text()).get("options", {}) if (expected := logs.parent / "expected.json").is_file() else {}
    report = analyze(ingest([str(logs)], config), config, load_rules(config), skew_s=options.get("skew", 0.5),
                     max_jobs_per_value=options.get("max_jobs_per_value", 25))
    return report, sorted((f.rule, f.fingerprint, f.severity, f.harmful) for f in report.findings)


@pytest.mark.parametrize("logs", EXPORTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_fixture_read_twice_reports_what_it_reports_once(logs, tmp_path):
    """Each fixture export with every one of its files present twice (the copy as a browser names a
    second download): the same verdict and findings, and a warning that names the copies."""
    twice = tmp_path / "logs"
    shutil.copytree(logs, twice)
    for path in sorted(p for p in twice.rglob("*") if p.is_file()):  # a kubelet's folders too
        shutil.copy(path, path.with_name(f"{path.stem} (1){path.suffix}"))
    once, found_once = _findings(logs)
    read_twice, found_twice = _findings(twice)
    assert (read_twice.verdict, found_twice) == (once.verdict, found_once)
    assert any("read twice" in w for w in read_twice.warnings)


CRI_PARTIAL = re.compile(rb"^\S+ (stdout|stderr) P ")


# An event of `aws logs filter-log-events --output text` over several lines (its message's line breaks).
_MULTILINE = [(re.compile(p.multiline_start.encode()), re.compile(p.multiline_end.encode()))
              for p in load_config(cwd=Path("/")).presets if p.multiline_start and p.multiline_end]


def _records(path: Path) -> list[bytes]:
    """The file's records: a record's lines together (a container runtime's partial lines and the
    line that ends them, an export's event over several lines)."""
    lines = [line if line.endswith(b"\n") else line + b"\n" for line in path.read_bytes().splitlines(keepends=True)]
    for start, end in _MULTILINE:
        runs = record_runs([start.search(x.rstrip(b"\n")) is not None for x in lines], [end.search(x.rstrip(b"\n")) is not None for x in lines])
        for first, last in reversed(runs):
            lines[first:last + 1] = [b"".join(lines[first:last + 1])]
    out, record = [], []
    for line in lines:
        record.append(line)
        if not CRI_PARTIAL.match(line):
            out.append(b"".join(record))
            record = []
    return out + ([b"".join(record)] if record else [])


def _records_written_twice(path: Path) -> bool:
    """Each record of the file written twice, as a logger with two handlers writes it."""
    path.write_bytes(b"".join(record * 2 for record in _records(path)))
    return True


def _middle_exported_again(path: Path) -> bool:
    """The file's middle third again after it, as two overlapping exports joined into one file,
    when it holds twice the records a stretch needs (shorter ones are not told from a service's
    own repeats: README, Inputs)."""
    records = _records(path)
    middle = records[len(records) // 3: 2 * len(records) // 3]
    if len(middle) < 2 * STRETCH_MIN:
        return False
    path.write_bytes(b"".join(records + middle))
    return True


@pytest.mark.parametrize("logs", EXPORTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
@pytest.mark.parametrize("change, said", [
    # An export's events carry the ids its platform gave them (CloudWatch's eventId): each written
    # twice with its id is an event delivered again, which the warning says instead.
    (_records_written_twice, ("(a logging handler attached", "again with the same origin")),
    (_middle_exported_again, ("twice, one after the other",)),
], ids=["written-twice", "exported-again"])
def test_every_fixture_with_records_its_files_hold_again_reports_what_it_reports_once(logs, change, said, tmp_path):
    """Each fixture export with every record of its files of lines written twice (a logger with two
    handlers), or with the middle third of each file again after it (overlapping exports joined):
    the same verdict and findings, and the files named."""
    again = tmp_path / "logs"
    shutil.copytree(logs, again)
    changed = [change(path) for path in sorted(again.rglob("*"))  # files of lines: not JSON documents, archives
               if path.is_file() and path.suffix not in (".json", ".gz", ".bz2", ".xz", ".zst")]
    once, found_once = _findings(logs)
    report, found = _findings(again)
    assert (report.verdict, found) == (once.verdict, found_once)
    assert any(phrase in w for w in report.warnings for phrase in said) == any(changed)


_EVENTS = (*LIFECYCLE, "polling_queue", "heartbeat")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from(_EVENTS), st.sampled_from(["w-1", "w-2", None]),
                          st.sampled_from([None, 7, 8]), st.sampled_from([1, 1, 1, 1, 1, 1, 2, 4]),
                          st.one_of(st.just({0}), st.just({1}), st.sets(st.integers(0, 2), min_size=1))),
                min_size=1, max_size=80),
       st.booleans(), st.sampled_from([1, 1, 2, 3]), st.booleans())
def test_counting_records_once_never_loses_a_record_and_says_what_it_dropped(tmp_path, records, in_order, every, again):
    """Whatever the mix of files, loggers and repeats (each line of a file written `every` times
    over, its middle third `again` after it): every record is still there at least once, no more
    often than it was written, and the warnings' counts are what was dropped."""
    files: dict[str, list[str]] = {}
    written: dict[tuple, int] = {}
    for ms, event, worker, pid, times, where in records:
        line = json.dumps({"ts": f"2026-07-21T10:00:00.{ms * 7:03d}Z", "event": event, "job_id": f"job-{ms % 5}",
                           "worker_id": worker, "pid": pid, "msg": event})
        for name in where:
            files.setdefault(f"f{name}.log", []).extend([line] * times)
    folder = tmp_path / f"case-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    for name, lines in files.items():
        lines = [line for line in (lines if in_order else sorted(lines)) for _ in range(every)]
        lines += lines[len(lines) // 3: 2 * len(lines) // 3] if again else []
        for line in lines:
            written[line] = written.get(line, 0) + 1
        (folder / name).write_text("".join(line + "\n" for line in lines))
    result = ingest([str(folder)], load_config(cwd=Path("/")))
    assert sum(f.records for f in result.files) - result.table.height == sum(entry[2] for entry in result.copies)
    content = [c for c in result.table.columns if c not in ("source", "line", "format", "stream")]
    kept = result.table.group_by(content).len()
    assert kept.height == len(written)  # each record at least once
    assert sorted(kept["len"].to_list(), reverse=True)[0] <= max(written.values())


def _delivered_again(tmp_path: Path, lines: list[str], deliveries: list[tuple[int, int]]):
    """One file of `lines`, each (index, at) of `deliveries` a line delivered again at that place;
    what a read of it gives, and its path."""
    shipped = list(lines)
    for index, at in deliveries:
        shipped.insert(min(at, len(shipped)), lines[index % len(lines)])
    folder = tmp_path / f"case-{len(list(tmp_path.iterdir()))}"
    return _read(folder, {"export.ndjson": shipped}), str(folder / "export.ndjson")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(_EVENTS), st.sampled_from(["w-1", "w-2", None])), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 39), st.integers(0, 80)), max_size=30))
def test_records_delivered_again_to_the_microsecond_are_each_counted_once(tmp_path, records, deliveries):
    """Whatever records a pipeline that names no origin delivered again, how often and where in
    the file: each record written to the microsecond is there once, and the warnings count every
    delivery again (however each was told: a stretch of them, or the same to the microsecond)."""
    lines = [json.dumps({"ts": f"2026-07-21T10:00:{k // 10:02d}.{(k % 10) * 100_000 + 1 + 7 * k:06d}Z", "event": event,
                         "job_id": f"job-{k % 5}", "worker_id": worker, "msg": event})
             for k, (event, worker) in enumerate(records)]
    result, _ = _delivered_again(tmp_path, lines, deliveries)
    assert result.table.height == len(lines)
    assert sum(entry[2] for entry in result.copies) == len(deliveries)
    assert all(entry[3] in ("same microsecond", "stretches") or isinstance(entry[3], int) for entry in result.copies)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(_EVENTS), st.sampled_from(["w-1", "w-2"])), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 39), st.integers(0, 80)), max_size=30))
def test_records_delivered_again_with_their_origin_are_each_counted_once(tmp_path, records, deliveries):
    """Whatever records a pipeline delivered again, how often and where in the file: each record
    with its offset once, and the warning counts every delivery again."""
    lines = [json.dumps({"ts": f"2026-07-21T10:00:{k // 10:02d}.{(k % 10) * 100:03d}Z", "event": event,
                         "job_id": f"job-{k % 5}", "worker_id": worker, "msg": event, "log": {"offset": 100 * k}})
             for k, (event, worker) in enumerate(records)]
    result, path = _delivered_again(tmp_path, lines, deliveries)
    assert result.table.height == len(lines)
    assert result.copies == ([[path, path, len(deliveries), "sent again"]] if deliveries else [])
