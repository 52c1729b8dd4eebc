"""A log rotated into parts (`worker.log`, `worker.log.1`, `worker.log.2.gz`) is read as the one log it was."""

from __future__ import annotations

import gzip
import json
import shutil
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules
from dupfind.sources import log_owner, log_stem
from dupfind.windows import Window, run_windows

from conftest import FIXTURES, run_cli


@pytest.mark.parametrize("path, stem", [
    ("logs/worker.log.1", "logs/worker.log"),
    ("worker.log.12.gz", "worker.log"),
    ("worker.log-20261205", "worker.log"),  # logrotate's dateext
    ("worker.log-20261205.gz", "worker.log"),
    ("worker.log-20261205-1733400000", "worker.log"),  # dateformat -%Y%m%d-%s
    ("pods/ns_notifier-7d9f_uid/worker/0.log.20261205-101500.gz", "pods/ns_notifier-7d9f_uid/worker/0.log"),  # kubelet
    ("app.log.2026-12-05", "app.log"),  # Python's TimedRotatingFileHandler
    ("app.log.2026-12-05_10-00-00", "app.log"),
    ("c0ffee-json.log.3", "c0ffee-json.log"),  # Docker's json-file driver
    ("events.ndjson.2.gz", "events.ndjson"),
    ("worker.log", "worker.log"),
    ("worker.1", "worker.1"),  # a Heroku dyno's name, not a rotated part
    ("sidekiq-1", "sidekiq-1"),
    ("export-2026.json", "export-2026.json"),
])
def test_log_stem_names_the_log_a_rotated_part_belongs_to(path, stem):
    assert log_stem(path) == stem


@pytest.mark.parametrize("path, owner", [
    ("logs/celery-w1.log.2.gz", "logs/celery-w1.log"),
    ("worker.log", "worker.log"),
    ("export/3f9c1b7e/celery/worker/7f3c9a1e/000001.gz", "export/3f9c1b7e/celery/worker/7f3c9a1e"),  # a stream's objects
    ("var/log/pods/prod_notifier-7d9f8c6b5-x2x9k_b27db204-6765-47a7-8717-18d2ff28e85f/worker/0.log",
     "var/log/pods/notifier-7d9f8c6b5-x2x9k"),  # the kubelet's: the pod
    ("var/log/pods/prod_notifier-7d9f8c6b5-x2x9k_b27db204-6765-47a7-8717-18d2ff28e85f/worker/1.log.20261205-101500.gz",
     "var/log/pods/notifier-7d9f8c6b5-x2x9k"),
    ("0.log", "0.log"),  # no folder to name it
    # a second download of a log (a browser's name for it): the same writer, as Laravel's worker.log
    ("logs/worker (1).log", "logs/worker.log"),
    ("celery-w1 (2).log.1.gz", "celery-w1.log"),
    ("/worker (1).log", "/worker.log"),  # at the root: its slash kept
    ("logs/my (notes).log", "logs/my (notes).log"),
])
def test_log_owner_names_the_path_whose_name_names_the_writer(path, owner):
    assert log_owner(path) == owner


def _is_document(data: bytes) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


def _rotated(logs: Path, out: Path) -> None:
    """Each log file of `logs` as logrotate with `delaycompress` leaves it after two rotations:
    its oldest lines in `<name>.2.gz`, the next in `<name>.1`, the newest in `<name>`; each cut
    where a line starts as the file's first does (not inside a multi-line record)."""
    for path in sorted(p for p in logs.rglob("*") if p.is_file()):
        target = out / path.relative_to(logs)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        lines = data.splitlines(keepends=True)
        if len(lines) < 6 or _is_document(data):
            shutil.copy(path, target)
            continue
        starts = [i for i, line in enumerate(lines) if line[:1] == lines[0][:1]]
        cuts = sorted({next((i for i in starts if i >= len(lines) * k // 3), len(lines)) for k in (1, 2)})
        parts = [b"".join(lines[a:b]) for a, b in zip([0, *cuts], [*cuts, len(lines)])]
        target.with_name(target.name + ".2.gz").write_bytes(gzip.compress(parts[0]))
        target.with_name(target.name + ".1").write_bytes(b"".join(parts[1:-1]))
        target.write_bytes(parts[-1])


def _findings(logs: Path) -> list[tuple]:
    config = load_config(cwd=Path("/"))
    report = analyze(ingest([str(logs)], config), config, load_rules(config))
    return sorted(
        (f.rule, f.fingerprint, f.severity, f.confidence, f.summary, json.dumps(f.figures, sort_keys=True, default=str),
         json.dumps(f.ids, sort_keys=True), tuple(f.workers))
        for f in report.findings
    )


# Every fixture whose findings rest on a worker's own log (a stop signal it logged, work taken
# after it) or that a framework's log names after its file.
CASES = [
    "synth/deploy-overlap", "scenarios/k8s-sigterm-keep-polling", "scenarios/k8s-graceful-drain",
    "scenarios/deploy-grace-too-short", "scenarios/kill-logged-before-last-line", "scenarios/deploy-consumer-group-overlap",
    "formats/sidekiq", "formats/celery-worker", "formats/rq-worker", "formats/dramatiq-worker", "formats/laravel-queue",
    # Celery names its node once, in the `ready.` line only the oldest part holds: the newer parts
    # named after their file made the app's records and Celery's of one worker two workers' (DF103s).
    "real/celery_redis_visibility_timeout", "real/celery_redis_guarded_control",
]


@pytest.mark.parametrize("case", CASES)
def test_a_log_rotated_into_parts_gives_the_findings_of_the_whole_log(tmp_path, case):
    logs = FIXTURES / case / "logs"
    _rotated(logs, tmp_path)
    assert list(tmp_path.rglob("*.2.gz"))
    assert _findings(tmp_path) == _findings(logs)


def test_a_window_that_reads_no_part_with_the_banner_names_the_banner_worker(tmp_path):
    """Analysed in windows of time (inputs larger than memory), a window whose read reaches only
    the newer parts still names their worker as the banner in the oldest part does, as one read of
    every file names it."""
    logs = FIXTURES / "real" / "celery_redis_visibility_timeout" / "logs"
    _rotated(logs, tmp_path)
    config = load_config(cwd=Path("/"))
    rules = load_rules(config)
    survey = ingest([str(tmp_path)], config, survey=True)
    oldest = next(r for r in survey.files if r.path.endswith("celery-worker1.log.2.gz"))
    assert oldest.context_worker == "worker1@rec"
    cut = oldest.last_ts + timedelta(seconds=1)
    plan = [Window(None, cut, None, cut, 0), Window(cut, None, cut, None, 0)]
    seen: list[set] = []
    run_windows([str(tmp_path)], config, rules, 0.5, {}, 25, survey, plan, 10**9, timedelta(seconds=1),
                collect=lambda report, *_: seen.append(set(report.context.table["worker_id"].cast(str).to_list())))
    assert len(seen) == 2 and "worker1@rec" in seen[1]
    assert not {"celery-worker1", "celery-worker2"} & seen[1]


def test_two_hosts_framework_logs_of_one_name_are_two_workers(tmp_path):
    """Sidekiq's logs collected from two VMs, each `/var/log/sidekiq.log` (one rotated): each its
    host's worker, `vm-1/sidekiq` and `vm-2/sidekiq`, as when the files are named apart (before,
    one worker `sidekiq` ran the job twice, on two threads: `sidekiq/4ukm` and `sidekiq/ouxrmy0sr`)."""
    logs = FIXTURES / "formats" / "sidekiq" / "logs"
    apart, hosts = tmp_path / "apart", tmp_path / "hosts"
    for folder in (apart / "vm-1", apart / "vm-2", hosts / "vm-1", hosts / "vm-2"):
        folder.mkdir(parents=True)
    shutil.copy(logs / "sidekiq-6.log", apart / "vm-1" / "sidekiq-6.log")
    shutil.copy(logs / "sidekiq-7.log", apart / "vm-2" / "sidekiq-7.log")
    shutil.copy(logs / "sidekiq-6.log", hosts / "vm-1" / "sidekiq.log")
    lines = (logs / "sidekiq-7.log").read_bytes().splitlines(keepends=True)
    (hosts / "vm-2" / "sidekiq.log.1").write_bytes(b"".join(lines[:3]))
    (hosts / "vm-2" / "sidekiq.log").write_bytes(b"".join(lines[3:]))
    named = _findings(hosts)
    assert {w for finding in named for w in finding[7]} == {"vm-1/sidekiq", "vm-2/sidekiq"}
    renamed = {"sidekiq-6": "vm-1/sidekiq", "sidekiq-7": "vm-2/sidekiq"}

    def by_host(findings):
        return [(f[0], f[5], tuple(sorted(renamed.get(w, w) for w in f[7]))) for f in findings]

    assert sorted(by_host(_findings(apart))) == sorted((f[0], f[5], tuple(sorted(f[7]))) for f in named)


def _celery_logs_rotated(tmp_path: Path) -> Path:
    """The visibility-timeout recording's Celery and producer logs (no application log that would
    name the workers), rotated: the `ready.` lines that name each node only in the `.2.gz` parts."""
    whole, rotated = tmp_path / "whole", tmp_path / "rotated"
    whole.mkdir()
    for log in (FIXTURES / "real" / "celery_redis_visibility_timeout" / "logs").iterdir():
        if log.name.startswith(("celery-", "producer", "redis-")):
            shutil.copy(log, whole / log.name)
    _rotated(whole, rotated)
    return rotated


def _traced_workers(*args: str, cache: Path) -> set[str]:
    done = run_cli("trace", *args, "--format", "json", env={"DUPFIND_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr.decode()
    workers = {e["worker"] for t in orjson.loads(done.stdout)["traces"] for e in t["records"] if e.get("worker")}
    assert workers
    return workers


def test_a_trace_of_inputs_too_large_to_read_whole_names_workers_as_a_whole_read(tmp_path):
    """A trace of inputs larger than memory reads only the files with records around what it
    traces: a rotated Celery log's newer parts without the oldest, whose banner names the node.
    They are named as every file's reports say (before: `celery-worker2`, the file's name, where
    a whole read says `worker2@rec`), whether the records are parsed again or read from those the
    analysis in windows kept, and a read of those parts alone, cached, is not taken for it."""
    logs = _celery_logs_rotated(tmp_path)
    job = "06dc07e5-17ad-433d-87c6-3a2c72ec652d"  # redelivered after the visibility timeout, late in the recording
    banner = gzip.decompress((logs / "celery-worker2.log.2.gz").read_bytes())
    assert b"worker2@rec ready." in banner and job.encode() not in banner
    whole = _traced_workers(job, str(logs), "--no-cache", cache=tmp_path / "unused")
    assert {w.split("/")[0] for w in whole} == {"worker2@rec"}
    windows = ["--memory-limit", "253MB", "--window-overlap", "1s"]
    assert _traced_workers(job, str(logs), *windows, "--no-cache", cache=tmp_path / "unused") == whole
    cache = tmp_path / "cache"
    assert _traced_workers(job, str(logs), *windows, cache=cache) == whole  # parsed, and cached with its naming
    # The same parts read on their own are their file's worker, cached apart from the read above.
    done = run_cli("trace", job, str(logs), *windows, "--format", "json", env={"DUPFIND_CACHE_DIR": str(cache)})
    bounds = [line.split(" reading ")[1].rstrip(".").split(" to ") for line in done.stderr.decode().splitlines()
              if " reading " in line][0]
    parts = [str(logs / name) for name in ("celery-worker2.log", "celery-worker2.log.1", "producer.ndjson")]
    alone = _traced_workers(job, *parts, "--since", bounds[0], "--until", bounds[1], cache=cache)
    assert {w.split("/")[0] for w in alone} == {"celery-worker2"}
    # After an analysis in windows that keeps its records: those are read back, named alike.
    kept = tmp_path / "kept-cache"
    done = run_cli("analyze", str(logs), *windows, "--format", "json", env={"DUPFIND_CACHE_DIR": str(kept)})
    assert done.returncode == 0, done.stderr.decode()
    done = run_cli("trace", job, str(logs), *windows, "--format", "json", env={"DUPFIND_CACHE_DIR": str(kept)})
    assert b"are those the analysis in windows of time kept" in done.stderr
    assert _traced_workers(job, str(logs), *windows, cache=kept) == whole
