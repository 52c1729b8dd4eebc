"""The ground-truth simulator: causes really cause duplicates, controls don't, output is stable and parseable."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest

from dupfind.synth import FORMATS, PRESETS, list_presets, write_scenario
from dupfind.synth.handler import TRACEBACK_LINES
from dupfind.synth.styles import OTHER_EVENTS
from dupfind.synth.truth import CAUSES, GUARD_OUTCOMES

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "synth"
RULES = ROOT / "rules"

CONTROLS = [name for name in PRESETS if name.endswith("-control")] + ["baseline"]
EXPECTED_PRIMARY = {
    "deploy-overlap": "worker_killed",
    "visibility-timeout": "lease_expired",
    "visibility-timeout-two-workers": "lease_expired",
    "lock-nonatomic": "lock_overlap",
    "lock-ttl-short": "lock_overlap",
    "lock-release-no-owner": "lock_overlap",
    "status-after-side-effect": "lease_expired",
    "db-update-fails": "partial_success_retry",
    "double-publish": "double_publish",
    "provider-timeout-accepted": "partial_success_retry",
}
# Fields that are not aliases of a canonical column; none of them carries an id or a lifecycle fact.
EXTRA_FIELDS = {
    "backoff_s", "concurrency", "config", "delayed", "dead_letter_queue", "grace_period_s", "idempotency_header", "idle",
    "image", "in_flight", "max_attempts", "max_surge", "method", "path", "pool_size", "previous_deployment",
    "replicas", "rows_affected", "rss_mb", "signal", "strategy", "target", "uptime_s", "visible", "waiting",
}
CRI_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z) (stdout|stderr) ([PF]) (.*)$")
NS_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$")
LOGFMT_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3,6}Z")
LOGFMT_PAIR = re.compile(r' ([A-Za-z_@][\w.\-/@]*)=("(?:[^"\\]|\\.)*"|[^\s"]*)')


# --- reading what the simulator wrote, format by format -------------------------------------

def _logfmt_record(line: str) -> dict:
    record: dict = {}
    rest = line
    ts = LOGFMT_TS.match(line)
    if ts:
        record["_ts"] = ts.group(0)
        rest = line[ts.end():]
    else:
        rest = " " + line
    pos = 0
    while pos < len(rest):
        m = LOGFMT_PAIR.match(rest, pos)
        assert m, f"not logfmt at {rest[pos:pos + 40]!r} in {line[:120]!r}"
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), value[1:-1])
        record[m.group(1)] = value
        pos = m.end()
    return record


def read_records(path: Path, fmt: str) -> tuple[list[dict], int]:
    """The structured records of one log file and its number of plain-text (traceback) lines."""
    records: list[dict] = []
    text_lines = 0
    partial = ""
    for line in path.read_text().splitlines():
        if fmt == "docker":
            envelope = orjson.loads(line)
            assert set(envelope) == {"log", "stream", "time"}
            assert envelope["log"].endswith("\n") and envelope["stream"] in ("stdout", "stderr")
            assert NS_TIME.match(envelope["time"])
            inner = envelope["log"][:-1]
        elif fmt == "cri":
            m = CRI_LINE.match(line)
            assert m, line[:120]
            if m.group(3) == "P":
                partial += m.group(4)
                continue
            inner, partial = partial + m.group(4), ""
        else:
            inner = line
        if inner in TRACEBACK_LINES:
            text_lines += 1
        elif fmt == "logfmt":
            records.append(_logfmt_record(inner))
        else:
            records.append(orjson.loads(inner))
    assert partial == "", f"{path.name} ends with an unfinished partial line"
    return records, text_lines


def event_name(record: dict) -> str:
    for key in ("event", "eventName", "evt", "event_type"):
        if key in record:
            return record[key]
    raise AssertionError(f"no event name in {record}")


def _dt(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def load_truth(folder: Path) -> dict:
    return orjson.loads((folder / "truth.json").read_bytes())


def scenario(tmp_path: Path, preset: str, seed: int = 1, jobs: int | None = 40, fmt: str = "ndjson", **overrides) -> dict:
    params = replace(PRESETS[preset].params, **overrides) if overrides else None
    return write_scenario(preset, tmp_path / f"{preset}-{seed}-{fmt}", seed=seed, jobs=jobs, fmt=fmt, params=params)


# --- the public API --------------------------------------------------------------------------

def test_presets_cover_every_failure_mode_and_a_control_for_each():
    names = [name for name, _ in list_presets()]
    assert names == list(PRESETS)
    for required in [*EXPECTED_PRIMARY, *CONTROLS, "baseline"]:
        assert required in names
    for name, description in list_presets():
        assert description and "\n" not in description and len(description) < 160, name


def test_unknown_preset_and_format_raise_value_error(tmp_path):
    with pytest.raises(ValueError, match="Unknown preset"):
        write_scenario("no-such-preset", tmp_path)
    with pytest.raises(ValueError, match="Unknown format"):
        write_scenario("baseline", tmp_path, fmt="xml")
    assert not any(tmp_path.iterdir())


# --- the simulation's behaviour --------------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2, 3])
def test_naive_handler_longer_than_visibility_timeout_duplicates(tmp_path, seed):
    truth = scenario(tmp_path, "visibility-timeout-two-workers", seed=seed, jobs=20)
    dups = [a for a in truth["actions"] if a["duplicated"]]
    assert dups
    for a in dups:
        assert a["causes"][0] == "lease_expired"
        assert a["overlapping_executions"], "the second delivery runs while the first still does"


def test_same_naive_handler_with_a_long_enough_timeout_does_not_duplicate(tmp_path):
    truth = scenario(tmp_path, "visibility-timeout-two-workers", jobs=20, visibility_timeout_s=120.0)
    assert truth["counters"]["duplicated_actions"] == 0
    assert truth["counters"]["lease_expirations"] == 0


@pytest.mark.parametrize("preset", sorted(EXPECTED_PRIMARY))
@pytest.mark.parametrize("seed", [1, 2])
def test_failure_presets_duplicate_for_their_own_cause(tmp_path, preset, seed):
    truth = scenario(tmp_path, preset, seed=seed, jobs=None)
    dups = [a for a in truth["actions"] if a["duplicated"]]
    assert dups, preset
    assert {a["causes"][0] for a in dups} == {EXPECTED_PRIMARY[preset]}
    # The harmless background is there too: many actions ran once (most, unless the flaw hits every job).
    once = sum(1 for a in truth["actions"] if a["true_count"] == 1)
    assert once > len(truth["actions"]) / (3 if preset == "visibility-timeout-two-workers" else 2)


@pytest.mark.parametrize("preset", CONTROLS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_controls_redeliver_but_never_repeat_a_side_effect(tmp_path, preset, seed):
    truth = scenario(tmp_path, preset, seed=seed, jobs=None)
    counters = truth["counters"]
    assert counters["duplicated_actions"] == 0
    assert counters["redeliveries"] > 0
    assert all(a["true_count"] <= 1 for a in truth["actions"])


def test_controls_face_the_same_faults_as_their_failure_mode(tmp_path):
    pairs = {
        "visibility-timeout-control": "visibility-timeout",
        "deploy-drain-control": "deploy-overlap",
        "double-publish-control": "double-publish",
        "provider-timeout-control": "provider-timeout-accepted",
    }
    for control, failure in pairs.items():
        c, f = PRESETS[control].params, PRESETS[failure].params
        assert c.design != f.design
        assert c.visibility_timeout_s == f.visibility_timeout_s
        assert c.double_publish_rate == f.double_publish_rate
        assert c.provider_timeout_accepted_rate == f.provider_timeout_accepted_rate
    guarded = scenario(tmp_path, "double-publish-control", jobs=None)
    assert guarded["counters"]["double_published_actions"] > 0
    assert guarded["counters"]["guard_hits_by_kind"].get("unique_violation", 0) + guarded["counters"]["guard_hits_by_kind"].get("noop_already_sent", 0) > 0


def test_double_publish_variants_share_the_idempotency_key(tmp_path):
    truth = scenario(tmp_path, "double-publish", jobs=None)
    variants = {a["double_publish"] for a in truth["actions"] if a["publishes"] == 2}
    assert variants == {"api_retry", "double_click"}
    for a in truth["actions"]:
        assert len(a["ids"]["idempotency_key"]) == 1
        if a["double_publish"] == "api_retry":
            assert len(a["ids"]["event_id"]) == 1 and len(a["ids"]["job_id"]) == 2
        elif a["double_publish"] == "double_click":
            assert len(a["ids"]["event_id"]) == 2 and len(a["ids"]["notification_id"]) == 2
        if a["duplicated"]:
            senders = [a["executions"][s["execution"]]["job_id"] for s in a["side_effects"]]
            assert len(set(senders)) == 2, "each publish sent once"


def test_provider_timeout_after_accept_counts_as_a_real_side_effect(tmp_path):
    truth = scenario(tmp_path, "provider-timeout-accepted", jobs=None)
    hidden = [
        e for a in truth["actions"] if a["duplicated"] for e in a["executions"]
        if e["outcome"] == "provider_timeout" and e["side_effect"]
    ]
    assert hidden, "the worker saw a timeout, the provider had sent anyway"


def test_provider_idempotency_key_replays_instead_of_repeating(tmp_path):
    truth = scenario(tmp_path, "provider-timeout-control", jobs=None)
    replays = [e for a in truth["actions"] for e in a["executions"] if e["outcome"] == "provider_replay"]
    assert replays and not any(e["side_effect"] for e in replays)


def test_keep_polling_workers_take_jobs_after_sigterm_and_die_mid_job(tmp_path):
    truth = scenario(tmp_path, "deploy-overlap", jobs=None)
    workers = {w["worker"]: w for w in truth["workers"]}
    killed = [e for a in truth["actions"] for e in a["executions"] if e["outcome"] == "killed"]
    assert killed
    for e in killed:
        w = workers[e["worker"]]
        assert w["end"] == "killed" and e["end"] == w["stopped"]
    late = [e for a in truth["actions"] for e in a["executions"]
            if workers[e["worker"]]["sigterm"] and e["start"] > workers[e["worker"]]["sigterm"]]
    assert late, "the old generation kept polling after SIGTERM"
    assert len(truth["deployments"]) == 2 and truth["deployments"][1]["previous"] == truth["deployments"][0]["deployment_id"]


def test_draining_workers_stop_polling_on_sigterm(tmp_path):
    truth = scenario(tmp_path, "deploy-drain-control", jobs=None)
    workers = {w["worker"]: w for w in truth["workers"]}
    stopped = [w for w in truth["workers"] if w["sigterm"]]
    assert stopped
    for a in truth["actions"]:
        for e in a["executions"]:
            sigterm = workers[e["worker"]]["sigterm"]
            # The signal reaches the process a few ms after the pipeline sends it.
            assert sigterm is None or _dt(e["start"]) <= _dt(sigterm) + timedelta(seconds=0.1)


def test_lock_release_without_owner_check_shows_in_the_logs(tmp_path):
    scenario(tmp_path, "lock-release-no-owner", jobs=None)
    folder = tmp_path / "lock-release-no-owner-1-ndjson"
    acquired, released = set(), []
    for path in (folder / "logs").glob("worker-*.log"):
        for r in read_records(path, "ndjson")[0]:
            name = event_name(r)
            if name == "lock_acquired":
                acquired.add(r["owner"])
            elif name == "lock_released":
                released.append(r["owner"])
    assert any(owner not in acquired for owner in released)


def test_short_lock_ttl_is_noticed_at_release(tmp_path):
    scenario(tmp_path, "lock-ttl-short", jobs=None)
    names = [event_name(r) for p in (tmp_path / "lock-ttl-short-1-ndjson" / "logs").glob("worker-*.log") for r in read_records(p, "ndjson")[0]]
    assert "lock_expired" in names and "lock_denied" in names


def test_log_faults_do_not_change_the_truth(tmp_path):
    clean = scenario(tmp_path, "status-control", seed=4)
    faulty = scenario(tmp_path / "f", "status-control", seed=4, drop_rate=0.05, reorder_rate=0.05)
    assert faulty["actions"] == clean["actions"]
    assert faulty["counters"]["dropped_lines"] > 0 and faulty["counters"]["reordered_lines"] > 0
    assert faulty["counters"]["lines"] == clean["counters"]["lines"] - faulty["counters"]["dropped_lines"]


def test_logs_carry_skewed_clocks_and_truth_true_times(tmp_path):
    truth = scenario(tmp_path, "double-publish", clock_skew_ms=2000.0)
    folder = tmp_path / "double-publish-1-ndjson"
    skews = {f["name"]: f["clock_skew_ms"] for f in truth["files"]}
    assert max(abs(s) for s in skews.values()) > 100
    starts = {(e["job_id"], e["attempt"]): e["start"] for a in truth["actions"] for e in a["executions"]}
    checked = 0
    for path in (folder / "logs").glob("worker-*.log"):
        for r in read_records(path, "ndjson")[0]:
            if r["event"] == "job_received":
                true = _dt(starts[(r["job_id"], r["attempt"])])
                offset_ms = (_dt(r["ts"]) - true).total_seconds() * 1000
                assert abs(offset_ms - skews[path.name]) <= 1.0
                checked += 1
    assert checked >= 40


# --- determinism ------------------------------------------------------------------------------

def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fmt", FORMATS)
def test_same_seed_same_bytes(tmp_path, fmt):
    write_scenario("lock-nonatomic", tmp_path / "a", seed=5, jobs=30, fmt=fmt)
    write_scenario("lock-nonatomic", tmp_path / "b", seed=5, jobs=30, fmt=fmt)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_same_bytes_in_another_process_with_another_hash_seed(tmp_path):
    write_scenario("deploy-overlap", tmp_path / "here", seed=3, jobs=30)
    code = (
        "import sys; from pathlib import Path; from dupfind.synth import write_scenario; "
        "write_scenario('deploy-overlap', Path(sys.argv[1]), seed=3, jobs=30)"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "there")], check=True, cwd=ROOT, env=env)
    assert _files(tmp_path / "here") == _files(tmp_path / "there")


def test_different_seeds_differ(tmp_path):
    a = write_scenario("baseline", tmp_path / "a", seed=1, jobs=30)
    b = write_scenario("baseline", tmp_path / "b", seed=2, jobs=30)
    assert a["actions"] != b["actions"]
    assert (tmp_path / "a" / "truth.json").read_bytes() != (tmp_path / "b" / "truth.json").read_bytes()
    assert not set(_files(tmp_path / "a").items()) & set(_files(tmp_path / "b").items())


def _load_regenerate():
    spec = importlib.util.spec_from_file_location("synth_regenerate", FIXTURES / "regenerate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checked_in_fixtures_equal_a_fresh_regeneration(tmp_path):
    _load_regenerate().regenerate(tmp_path)
    for name in PRESETS:
        assert _files(FIXTURES / name) == _files(tmp_path / name), f"fixtures/synth/{name} drifted: run fixtures/synth/regenerate.py"


def test_fixtures_are_small_and_mix_formats():
    formats = set()
    for name in PRESETS:
        folder = FIXTURES / name
        truth = load_truth(folder)
        formats.add(truth["format"])
        assert 20 <= truth["counters"]["actions"] <= 300
        assert sum(p.stat().st_size for p in folder.iterdir()) < 420 * 1024
    assert formats == set(FORMATS)


# --- what the files look like -----------------------------------------------------------------

def test_rewriting_a_folder_replaces_the_previous_scenario(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    write_scenario("deploy-overlap", tmp_path, jobs=20)
    truth = write_scenario("lock-nonatomic", tmp_path, jobs=20)
    logs = sorted(p.name for p in (tmp_path / "logs").glob("*.log"))
    assert logs == sorted(f["name"] for f in truth["files"])
    assert (tmp_path / "notes.txt").read_text() == "mine"


# One preset per worker style: snake (deploy-overlap), terse with epoch ms (lock-nonatomic),
# camel (status-control), SQS-like with microseconds (visibility-timeout).
@pytest.mark.parametrize("preset", ["deploy-overlap", "lock-nonatomic", "status-control", "visibility-timeout"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_writes_parseable_lines(tmp_path, fmt, preset):
    truth = scenario(tmp_path, preset, fmt=fmt)
    folder = tmp_path / f"{preset}-1-{fmt}"
    total_records = 0
    for f in truth["files"]:
        path = folder / "logs" / f["name"]
        records, text_lines = read_records(path, fmt)
        assert len(records) + text_lines == f["records"]
        assert len(path.read_bytes().splitlines()) == f["lines"]
        total_records += len(records)
        for r in records:
            assert "msg" in r or "message" in r
    assert total_records > 300
    if fmt == "cri" and preset == "deploy-overlap":
        assert any(" P " in line for p in (folder / "logs").glob("worker-*.log") for line in p.read_text().splitlines())


def _vocabulary() -> tuple[dict[str, str], list[tuple[str, re.Pattern]]]:
    vocab = tomllib.loads((RULES / "vocabulary.toml").read_text())
    exact = {name: kind for kind, names in vocab["kinds"].items() for name in names}
    patterns = [(kind, re.compile(p)) for kind, ps in vocab["patterns"].items() for p in ps]
    return exact, patterns


def test_event_names_are_in_the_vocabulary_and_noise_stays_other():
    exact, patterns = _vocabulary()
    seen_kinds = set()
    for name in PRESETS:
        folder = FIXTURES / name
        fmt = load_truth(folder)["format"]
        for path in (folder / "logs").glob("*.log"):
            for r in read_records(path, fmt)[0]:
                event = event_name(r)
                if event in OTHER_EVENTS:
                    assert event not in exact
                    text = str(r.get("msg", r.get("message", ""))).lower()
                    for kind, pattern in patterns:
                        assert not pattern.search(event) and not pattern.search(text), (event, text, kind)
                else:
                    assert event in exact, f"{path.name}: {event} is not in rules/vocabulary.toml"
                    seen_kinds.add(exact[event])
    expected = {
        "publish", "receive", "start", "side_effect", "side_effect_result", "commit", "ack", "finish", "fail", "retry",
        "lease_expired", "claim", "claim_lost", "dedup_hit", "lock_acquire", "lock_release", "lock_denied",
        "lock_expired", "deploy_start", "deploy_finish", "worker_start", "stop_signal", "worker_exit", "worker_killed",
    }
    assert expected <= seen_kinds


def test_field_names_are_known_aliases():
    fields = tomllib.loads((RULES / "fields.toml").read_text())
    aliases = {a for names in fields["aliases"].values() for a in names}
    for name in PRESETS:
        folder = FIXTURES / name
        fmt = load_truth(folder)["format"]
        for path in (folder / "logs").glob("*.log"):
            for r in read_records(path, fmt)[0]:
                keys = {k.split(".")[0] if k.startswith("config.") else k for k in r if k != "_ts"}
                unknown = keys - aliases - EXTRA_FIELDS
                assert not unknown, f"{path.name}: {sorted(unknown)}"


def test_job_records_carry_the_correlation_ids():
    folder = FIXTURES / "status-after-side-effect"
    truth = load_truth(folder)
    jobs = {j for a in truth["actions"] for j in a["ids"]["job_id"]}
    for path in (folder / "logs").glob("worker-*.log"):
        for r in read_records(path, "ndjson")[0]:
            if "jobId" in r:
                assert r["jobId"] in jobs
                for key in ("eventId", "idempotencyKey", "notificationId", "hostname", "version", "retryCount"):
                    assert key in r
            if r["eventName"] == "worker_started":
                assert r["visibilityTimeout"] == 30.0
            if r["eventName"] in ("send_email", "send_push", "send_sms"):
                assert r["channel"] in ("email", "push", "sms") and r["provider"]
                for key in ("orderId", "userId", "queueName", "jobType"):
                    assert key in r


# --- the answer key ----------------------------------------------------------------------------

def _check_truth(truth: dict) -> None:
    actions = truth["actions"]
    for a in actions:
        exs = a["executions"]
        assert a["true_count"] == len(a["side_effects"]) == sum(e["side_effect"] for e in exs)
        assert all(exs[s["execution"]]["side_effect"] for s in a["side_effects"])
        assert all(e["provider_request"] for e in exs if e["side_effect"])
        assert a["duplicated"] == (a["true_count"] > 1)
        assert bool(a["causes"]) == a["duplicated"]
        assert len(set(a["causes"])) == len(a["causes"]) and set(a["causes"]) <= set(CAUSES)
        assert a["lost"] == (a["true_count"] == 0)
        assert {e["job_id"] for e in exs} <= set(a["ids"]["job_id"])
        assert {e["event_id"] for e in exs} <= set(a["ids"]["event_id"])
        assert len(a["ids"]["job_id"]) == a["publishes"]
        overlaps = [[i, j] for i in range(len(exs)) for j in range(i + 1, len(exs))
                    if exs[j]["start"] < exs[i]["end"] and exs[i]["start"] < exs[j]["end"]]
        assert a["overlapping_executions"] == overlaps
        assert all(e["start"] <= e["end"] for e in exs)
        assert a["redeliveries"] == sum(e["attempt"] > 1 for e in exs)
        assert a["guard_hits"] == sum(e["outcome"] in GUARD_OUTCOMES for e in exs)
    c = truth["counters"]
    execs = [e for a in actions for e in a["executions"]]
    assert c["actions"] == len(actions)
    assert c["duplicated_actions"] == sum(a["duplicated"] for a in actions)
    assert c["side_effects"] == sum(a["true_count"] for a in actions)
    assert c["extra_side_effects"] == c["side_effects"] - c["actions"] + c["lost_actions"]
    assert c["executions"] == len(execs)
    assert c["redeliveries"] == sum(a["redeliveries"] for a in actions)
    assert c["retries"] == sum(e["then"] == "retry" for e in execs)
    assert c["guard_hits"] == sum(c["guard_hits_by_kind"].values()) == sum(a["guard_hits"] for a in actions)
    assert c["killed_executions"] == sum(e["outcome"] == "killed" for e in execs)
    assert c["dead_lettered"] == sum(a["dead_lettered"] for a in actions)
    assert sum(c["duplicates_by_primary_cause"].values()) == c["duplicated_actions"]
    assert c["lines"] == sum(f["lines"] for f in truth["files"])


@pytest.mark.parametrize("preset", list(PRESETS))
def test_fixture_truth_is_consistent_with_its_executions_and_files(preset):
    folder = FIXTURES / preset
    truth = load_truth(folder)
    assert truth["preset"] == preset and truth["seed"] == 1
    _check_truth(truth)
    names = sorted(p.name for p in (folder / "logs").glob("*.log"))
    assert names == sorted(f["name"] for f in truth["files"])
    for f in truth["files"]:
        assert len((folder / "logs" / f["name"]).read_bytes().splitlines()) == f["lines"]
    assert {f["kind"] for f in truth["files"]} >= {"producer", "worker", "deploy"}


@pytest.mark.parametrize("seed", [7, 8])
def test_fresh_truth_is_consistent(tmp_path, seed):
    for preset in ("lock-ttl-short", "deploy-overlap", "db-update-fails", "visibility-timeout-control"):
        _check_truth(scenario(tmp_path, preset, seed=seed, jobs=None))
