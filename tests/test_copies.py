"""Records an earlier input file holds exactly are counted once (a log read twice), and nothing else is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.copies import copies_warning, merged_copies
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules

from conftest import FIXTURES


def _line(ms: int, event: str, worker: str = "w-1", job: str = "job-1") -> str:
    return json.dumps({"ts": f"2026-07-21T10:00:00.{ms:03d}Z", "level": "info", "event": event, "job_id": job,
                       "worker_id": worker, "msg": f"{event} {job}"})


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
    """Which earlier file a warning names does not depend on the order polars happens to give."""
    a, b = [_line(1, "job_started"), _line(2, "email_sent")], [_line(3, "job_started", job="job-2"), _line(4, "email_sent", job="job-2")]
    result = _read(tmp_path, {"a.log": a, "b.log": b, "c.log": a + b})
    assert result.copies == [[str(tmp_path / "c.log"), str(tmp_path / "a.log"), 2]]


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


def test_windows_keep_each_files_largest_count_and_the_warning_names_the_files():
    assert merged_copies([[["b.log", "a.log", 3]], [["b.log", "a.log", 5], ["c.log", "a.log", 1]], []]) == [
        ["b.log", "a.log", 5], ["c.log", "a.log", 1]]
    assert copies_warning([]) is None
    assert copies_warning([["b.log", "a.log", 5]]) == (
        "5 records of b.log are exactly records of a.log (time, event, ids, worker): counted once, as one log read twice.")
    many = copies_warning([[f"{k}.log", "a.log", 2] for k in range(7)])
    assert many.startswith("14 records of 7 files are exactly records of earlier files") and "and records of 2 more files" in many


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
    for path in sorted(p for p in twice.iterdir() if p.is_file()):
        shutil.copy(path, path.with_name(f"{path.stem} (1){path.suffix}"))
    once, found_once = _findings(logs)
    read_twice, found_twice = _findings(twice)
    assert (read_twice.verdict, found_twice) == (once.verdict, found_once)
    assert any("read twice" in w for w in read_twice.warnings)
