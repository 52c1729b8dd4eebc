"""Deploy forensics against answer keys: generations, work after SIGTERM, executions cut short, concentration."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules
from dupfind.schema import as_strings
from dupfind.synth import write_scenario

from conftest import FIXTURES
from truth_compare import CONFIG, RULES, analyze_folder

DEPLOY_PRESETS = ("deploy-overlap", "deploy-drain-control")


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _truth_killed(truth: dict) -> set[tuple[str, str]]:
    return {(e["job_id"], e["worker"]) for a in truth["actions"] for e in a["executions"] if e["outcome"] == "killed"}


def _truth_after_sigterm(truth: dict) -> set[tuple[str, str]]:
    sigterm = {w["worker"]: _ts(w["sigterm"]) for w in truth["workers"] if w["sigterm"]}
    return {
        (e["job_id"], e["worker"])
        for a in truth["actions"]
        for e in a["executions"]
        if e["worker"] in sigterm and _ts(e["start"]) > sigterm[e["worker"]]
    }


def _exec_keys(report, exec_ids: list[int]) -> set[tuple[str, str]]:
    ex = report.context.executions.filter(pl.col("exec_id").is_in(exec_ids))
    return {(jobs[0], worker) for jobs, worker in ex.select("job_ids", "worker_id").rows()}


def _check_against_truth(report, truth: dict) -> None:
    model = report.context.deploys
    assert _exec_keys(report, model.interrupted["exec_id"].to_list()) == _truth_killed(truth)
    assert _exec_keys(report, model.after_stop["exec_id"].to_list()) == _truth_after_sigterm(truth)
    generations = dict(model.workers.select("worker_id", "generation").rows())
    for worker in truth["workers"]:
        assert generations[worker["worker"]] == worker["deployment"]
    replaced = {d["deployment_id"]: d["previous"] for d in truth["deployments"] if d["previous"]}
    windows = {w["deploy"]: w["previous"] for w in model.windows.to_dicts() if w["previous"]}
    assert windows == replaced
    killed_workers = {w["worker"] for w in truth["workers"] if w["end"] == "killed"}
    df203 = {f.workers[0] for f in report.findings if f.rule == "DF203"}
    assert df203 == {w for w in killed_workers if any(k[1] == w for k in _truth_killed(truth))}
    df202 = {f.workers[0] for f in report.findings if f.rule == "DF202"}
    assert df202 == {k[1] for k in _truth_after_sigterm(truth)}


@pytest.mark.parametrize("preset", DEPLOY_PRESETS)
def test_deploy_fixture_agrees_with_truth(preset: str):
    report, truth = analyze_folder(FIXTURES / "synth" / preset)
    _check_against_truth(report, truth)


@pytest.mark.parametrize("preset", DEPLOY_PRESETS)
def test_deploy_presets_over_seeds(preset: str, tmp_path):
    """Kills and work after SIGTERM found exactly, whatever the seed; the drain control takes none."""
    for seed in range(2, 8):
        folder = tmp_path / str(seed)
        truth = write_scenario(preset, folder, seed=seed, jobs=30)
        report, _ = analyze_folder(folder)
        _check_against_truth(report, truth)
        if preset == "deploy-drain-control":
            assert not [f for f in report.findings if f.rule in ("DF201", "DF202")]


def test_overlap_concentration_names_the_deploy():
    report, truth = analyze_folder(FIXTURES / "synth" / "deploy-overlap")
    deploys = report.summary["deploys"]
    window = next(w for w in deploys["windows"] if w["deploy"] == "v4.24.5")
    duplicates = truth["counters"]["extra_side_effects"]
    assert window["duplicates"] == duplicates and window["previous"] == "v4.24.4"
    assert (
        window["overlap_s"] > 30
        and window["work_after_stop"] > 0
        and window["interrupted"] == len(_truth_killed(truth))
    )
    concentration = deploys["concentration"]
    assert concentration["duplicates"]["inside"] == duplicates and concentration["duplicates"]["outside"] == 0
    assert concentration["headline"].startswith(
        f"{duplicates} of {duplicates} duplicated side effect(s) happened within"
    )
    assert "deploy v4.24.5" in concentration["headline"]


def test_drained_deploy_has_overlap_but_no_interruption():
    report, _ = analyze_folder(FIXTURES / "synth" / "deploy-drain-control")
    window = next(w for w in report.summary["deploys"]["windows"] if w["previous"])
    assert window["overlap_s"] > 0
    assert window["interrupted"] == 0 and window["work_after_stop"] == 0 and window["duplicates"] == 0
    assert report.summary["deploys"]["concentration"]["headline"] is None


@pytest.mark.parametrize("folder", ["baseline", "visibility-timeout-control", "double-publish-control"])
def test_benign_baselines_raise_no_deploy_finding(folder: str):
    report, _ = analyze_folder(FIXTURES / "synth" / folder)
    assert not [f.summary for f in report.findings if f.rule.startswith("DF2")]


REAL = sorted(p for p in (FIXTURES / "real").iterdir() if (p / "truth.json").is_file())


@pytest.mark.parametrize("folder", [
    # Sidekiq's hard shutdown, a Dramatiq node and Delayed::Job workers killed in a rollout: deploys.
    p.name for p in REAL
    if not any(json.loads((p / "truth.json").read_text()).get(k) for k in ("shutdowns", "node_kills", "kills"))
])
def test_real_recordings_raise_no_deploy_finding(folder: str):
    report, _ = analyze_folder(FIXTURES / "real" / folder)
    assert not [f.summary for f in report.findings if f.rule in ("DF201", "DF202", "DF204")]


@pytest.mark.parametrize("folder", [p.name for p in REAL if json.loads((p / "truth.json").read_text()).get("shutdowns")])
def test_a_real_hard_shutdown_cut_the_jobs_it_pushed_back(folder: str):
    """Sidekiq's hard shutdown (recorded): the executions its kill cut are the jobs it pushed back,
    though each logged `fail` as Sidekiq raised in it; the grace period named as too short; no
    work taken after the stop signal."""
    report, truth = analyze_folder(FIXTURES / "real" / folder)
    pushed = {jid for s in truth["shutdowns"].values() for jid in s["pushed_back_jids"]}
    model = report.context.deploys
    cut = report.context.executions.filter(pl.col("exec_id").is_in(model.interrupted["exec_id"].to_list()))
    assert {jobs[0] for jobs in cut["job_ids"].to_list()} == pushed
    assert set(model.interrupted["kill_kind"].to_list()) == {"worker_killed"}
    df203 = [f for f in report.findings if f.rule == "DF203"]
    assert [f.figures["in_flight"] for f in df203] == [len(pushed)]
    assert df203[0].figures["side_effect_done"] == truth["counters"]["pushed_back_after_side_effect"]
    assert "exit code" not in df203[0].summary  # the process exited 0 after its jobs were killed
    assert [f.rule for f in report.findings if f.rule in ("DF201", "DF202")] == []
    assert [f.figures["grace_s"] for f in report.findings if f.rule == "DF204"] == [truth["params"]["shutdown_timeout_s"]]


def _truth(folder: Path) -> dict:
    return json.loads((folder / "truth.json").read_text())


@pytest.mark.parametrize("folder", [p.name for p in REAL if _truth(p).get("worker_kills") and not _truth(p).get("node_kills")])
def test_a_real_pool_process_killed_cuts_its_job_not_its_worker(folder: str):
    """Celery's prefork child SIGKILLed (recorded): the execution it ran was cut by that kill (its
    exit line), the node went on (no end, no grace period cut short), and the main process'
    requeue of the task is not an execution of its own."""
    report, truth = analyze_folder(FIXTURES / "real" / folder)
    model = report.context.deploys
    cut = report.context.executions.filter(pl.col("exec_id").is_in(model.interrupted["exec_id"].to_list()))
    assert sorted(jobs[0] for jobs in cut["job_ids"].to_list()) == sorted(k["job_id"] for k in truth["worker_kills"])
    assert set(model.interrupted["kill_kind"].to_list()) == {"process_killed"}
    # Each by the exit line of its own process (two children killed 10 ms apart in the control).
    kill_pids = dict(zip(
        model.interrupted["exec_id"].to_list(),
        as_strings(report.context.rows(model.interrupted["kill_rid"].to_list()))["process_id"].to_list(),
    ))
    by_job = {jobs[0]: kill_pids[e] for e, jobs in cut.select("exec_id", "job_ids").rows()}
    assert by_job == {k["job_id"]: str(k["pid"]) for k in truth["worker_kills"]}
    assert report.context.executions.height == truth["counters"]["executions"]
    ends = dict(model.workers.select("worker_id", "end_kind").rows())
    assert "killed" not in ends.values()
    assert [f.rule for f in report.findings if f.rule in ("DF103", "DF201", "DF202", "DF204")] == []
    done = sum(f.figures["side_effect_done"] for f in report.findings if f.rule == "DF203")
    assert done == truth["counters"]["killed_after_side_effect"]


def _rollout_kill(folder: Path) -> bool:
    """A node killed in a rollout whose deploy log says so (not one only the broker's log tells:
    tests/test_connection_lost.py)."""
    return any(not k.get("logged_by", "").startswith("nothing but") for k in _truth(folder).get("node_kills", []))


@pytest.mark.parametrize("folder", [p.name for p in REAL if _rollout_kill(p)])
def test_a_real_node_killed_in_a_rollout_cuts_the_runs_it_held(folder: str):
    """Dramatiq on RabbitMQ (recorded): a rollout SIGTERMs worker1 and SIGKILLs its processes 5 s
    later with four runs held; RabbitMQ hands their messages to worker2 at once. Dramatiq's own
    log (named after its file) and the application's log of worker1 are one worker: each run is
    counted once, and the kill (the deploy log's line) cut exactly the runs it held."""
    report, truth = analyze_folder(FIXTURES / "real" / folder)
    (node,) = truth["node_kills"]
    prefetched = node["prefetched_unstarted_jobs"]
    model = report.context.deploys
    # The messages its consumer took (`Pushing message ... onto work queue`) and no thread began
    # are held by worker1 too: a delivery each, then the redelivery to worker2.
    assert report.context.executions.height == truth["counters"]["executions"] + len(prefetched)
    cut = report.context.executions.filter(pl.col("exec_id").is_in(model.interrupted["exec_id"].to_list()))
    assert sorted(jobs[0] for jobs in cut["job_ids"].to_list()) == sorted(node["requeued_jobs"])
    assert set(model.interrupted["kill_kind"].to_list()) == {"worker_killed"}
    (df203,) = [f for f in report.findings if f.rule == "DF203"]
    assert df203.figures["in_flight"] == len(node["requeued_jobs"]) == len(truth["worker_kills"]) + len(prefetched)
    assert df203.figures["received_not_begun"] == len(prefetched)
    assert df203.figures["side_effect_done"] == truth["counters"]["killed_after_side_effect"]
    assert df203.figures["s_after_stop_signal"] == pytest.approx(node["grace_period_s"], abs=0.1)
    assert report.summary["deploys"]["concentration"]["redeliveries"]["total"] == truth["counters"]["redeliveries"]
    duplicated = [f for f in report.findings if f.rule == "DF101"]
    assert len(duplicated) == truth["counters"]["duplicated_actions"]
    assert {(f.cause, f.confidence) for f in duplicated} <= {("worker_killed", "certain")}
    assert [f.rule for f in report.findings if f.rule in ("DF103", "DF201")] == []
    # Its consumer went on taking deliveries after the SIGTERM (the log's lines say so): one
    # DF202 from the first stop line, with exactly those, none of them begun.
    log = (FIXTURES / "real" / folder / "logs" / node["dramatiq_lines"]["sending_signal"]["file"]).read_text().splitlines()
    stop_line = node["dramatiq_lines"]["sending_signal"]["line"]
    after = {m.group(1) for m in (re.search(r"Pushing message '([^']+)' onto work queue", x) for x in log[stop_line:]) if m}
    after &= set(node["requeued_jobs"])
    (df202,) = [f for f in report.findings if f.rule == "DF202"]
    assert df202.figures["executions_after_stop"] == len(after) and after <= set(prefetched)
    assert set(df202.ids["job_id"]) == after
    assert report.context.inferred_timeouts == {}  # handed back at the kill, not after a lease


def _k8s_report(name: str):
    config = load_config(cwd=Path("/"))
    return analyze(ingest([str(FIXTURES / "scenarios" / name / "logs")], config), config, load_rules(config))


def test_kubectl_events_become_lifecycle_records():
    report = _k8s_report("k8s-sigterm-keep-polling")
    events = report.context.table.filter(pl.col("source").cast(pl.String).str.ends_with("kubectl-events.json"))
    kinds = dict(events.group_by("name").agg(pl.col("kind").unique()).rows())
    assert kinds["Started"] == ["worker_start"] and kinds["Killing"] == ["stop_signal"]
    assert kinds["Pulled"] == ["other"] and sorted(kinds["ScalingReplicaSet"]) == ["deploy_start", "other"]
    ups = events.filter(pl.col("kind") == "deploy_start")
    assert set(ups["deployment_id"].to_list()) == {"notifier-6c8b5d9f7"}
    pods = events.filter(pl.col("object_kind") == "Pod")
    assert pods["worker_id"].to_list() == pods["object_name"].to_list()
    assert (
        events.filter(pl.col("object_kind") != "Pod")["worker_id"].null_count()
        == events.filter(pl.col("object_kind") != "Pod").height
    )


def test_generations_inferred_from_pod_template_hash():
    model = _k8s_report("k8s-sigterm-keep-polling").context.deploys
    workers = model.workers.filter(pl.col("executions") > 0)
    assert set(workers["generation_source"].to_list()) == {"pod_template_hash"}
    assert all(w.startswith(g + "-") for w, g in workers.select("worker_id", "generation").rows())
    window = model.windows.row(0, named=True)
    assert (window["deploy"], window["previous"]) == ("notifier-6c8b5d9f7", "notifier-7d9f8c6b5")
    # No exit is logged: the old pods' ends are inferred from the silence after Killing.
    old = model.workers.filter(pl.col("generation") == "notifier-7d9f8c6b5")
    assert set(old["end_kind"].to_list()) == {"gone"}
    assert model.interrupted["inferred"].all()


def test_logged_generation_wins_over_deploy_timing():
    report, _ = analyze_folder(FIXTURES / "synth" / "deploy-overlap")
    sources = set(report.context.deploys.workers["generation_source"].to_list())
    assert sources == {"logged"}


def test_window_at_is_the_latest_started_window_covering_the_time():
    # window_at walks back from a bisection; it must agree with checking every window.
    import random
    from datetime import timedelta

    from dupfind.deploys import DeployModel

    rng = random.Random(7)
    t0 = datetime(2026, 7, 21, 10, 0, 0)
    starts = sorted(t0 + timedelta(seconds=rng.uniform(0, 3600)) for _ in range(60))
    windows = pl.DataFrame({
        "deploy": [f"d{i}" for i in range(60)],
        "start": starts,
        "end": [s + timedelta(seconds=rng.choice([5, 30, 120, 900])) for s in starts],
    })
    empty = pl.DataFrame()
    model = DeployModel(empty, empty, windows, empty, empty)
    rows = windows.rows(named=True)
    for _ in range(500):
        ts = t0 + timedelta(seconds=rng.uniform(-60, 4600))
        tail = rng.choice([0.0, 60.0])
        hits = [w for w in rows if w["start"] <= ts and w["end"] + timedelta(seconds=tail) >= ts]
        expected = max(hits, key=lambda w: w["start"])["deploy"] if hits else None
        found = model.window_at(ts, tail_s=tail)
        assert (found["deploy"] if found else None) == expected


def _killed_with_failure(tmp_path: Path, kill_in_own_log: bool) -> list[str]:
    """A job failing 0.1 s after its worker's kill record: the job ids the kill cut."""
    def line(ms: int, event: str, **fields) -> str:
        return json.dumps({"ts": f"2026-07-21T18:09:18.{ms:03d}Z", "event": event, "worker_id": "w-1", **fields}) + "\n"
    job = {"job_id": "j-1", "queue": "notifications"}
    worker = [line(100, "job_received", **job), line(150, "job_started", **job), line(350, "provider_request", **job,
              side_effect="email"), line(459, "job_failed", **job, error="HTTP 500")]
    kill = line(357, "worker_killed", exit_code=137)
    if kill_in_own_log:
        worker.insert(3, kill)
    (tmp_path / "w-1.log").write_text("".join(worker))
    (tmp_path / "deploy.log").write_text(line(0, "deploy_started", deployment_id="v2") + ("" if kill_in_own_log else kill))
    config = load_config(cwd=Path("/"))
    report = analyze(ingest([str(tmp_path)], config), config, load_rules(config))
    cut = report.context.executions.filter(pl.col("exec_id").is_in(report.context.deploys.interrupted["exec_id"].to_list()))
    return [jobs[0] for jobs in cut["job_ids"].to_list()]


def test_a_failure_after_its_own_logs_kill_line_is_the_kill_another_hosts_kill_record_is_not(tmp_path):
    """Sidekiq's jobs log `fail` as its hard shutdown raises in them, in the same log: that failure
    is the kill's. A job that failed on its own, its log's clock a little ahead of the host that
    logged the kill, was not killed (the 1M benchmark export's synthetic deploys)."""
    for name in ("own", "other"):
        (tmp_path / name).mkdir()
    assert _killed_with_failure(tmp_path / "own", True) == ["j-1"]
    assert _killed_with_failure(tmp_path / "other", False) == []


@pytest.mark.parametrize("folder", [p.name for p in REAL if _truth(p).get("horse_kills")])
def test_a_real_rq_work_horse_killed_cuts_its_job(folder: str):
    """RQ 3's work-horse SIGKILLed (recorded): its `job <id> failed (Work-horse terminated
    unexpectedly; ...)` line ends that job's run, one DF203 a kill citing that line, and the
    retry it enqueued is the kill's doing (a duplicate's cause), not an unexplained second run."""
    report, truth = analyze_folder(FIXTURES / "real" / folder)
    kills = truth["horse_kills"]
    model = report.context.deploys
    cut = report.context.executions.filter(pl.col("exec_id").is_in(model.interrupted["exec_id"].to_list()))
    assert sorted(jobs[0] for jobs in cut["job_ids"].to_list()) == sorted(k["job_id"] for k in kills)
    assert set(model.interrupted["kill_kind"].to_list()) == {"process_killed"}
    df203 = [f for f in report.findings if f.rule == "DF203"]
    cited = {(Path(e.source).name, e.line) for f in df203 for e in f.evidence if e.note == "worker lost a pool process (killed)"}
    assert cited == {(k["rq_horse_failed_line"]["file"], k["rq_horse_failed_line"]["line"]) for k in kills}
    assert sum(f.figures["side_effect_done"] for f in df203) == truth["counters"]["killed_after_side_effect"]
    assert [f.severity for f in df203].count("low") == truth["counters"]["killed_before_side_effect"]
    duplicated = [f for f in report.findings if f.rule == "DF101"]
    assert len(duplicated) == truth["counters"]["duplicated_actions"]
    assert {(f.cause, f.confidence) for f in duplicated} <= {("worker_killed", "certain")}
    assert [f.rule for f in report.findings if f.rule in ("DF103", "DF201", "DF202", "DF204")] == []
