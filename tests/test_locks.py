"""Lock rules DF301-DF303 against the simulator's answer key: which actions really had two lock holders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules
from dupfind.synth import write_scenario

from conftest import FIXTURES
from truth_compare import _keys, analyze_folder

LOCK_RULES = ("DF301", "DF302", "DF303")
SEEDS = range(1, 5)


def _flagged(folder: Path) -> tuple[dict[tuple[str, str], set[int]], set[int], list, dict]:
    """Truth positions flagged per (rule, severity), the truth's lock-overlap actions, findings, truth."""
    report, truth = analyze_folder(folder)
    index: dict[str, int] = {}
    for position, action in enumerate(truth["actions"]):
        for key in _keys(action["ids"]):
            index.setdefault(key, position)
    overlapping = {p for p, a in enumerate(truth["actions"]) if any(e["lock_overlap"] for e in a["executions"])}
    flagged: dict[tuple[str, str], set[int]] = {}
    findings = [f for f in report.findings if f.rule in LOCK_RULES]
    for finding in findings:
        positions = {index[k] for k in _keys(finding.ids) if k in index}
        assert len(positions) == 1, f"{finding.rule} is not tied to exactly one action: {finding.ids}"
        flagged.setdefault((finding.rule, finding.severity), set()).update(positions)
    return flagged, overlapping, findings, truth


def _rule_positions(flagged: dict[tuple[str, str], set[int]], rule: str) -> set[int]:
    return set().union(*(v for (r, _), v in flagged.items() if r == rule))


def _scenario(preset: str, seed: int, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp(f"{preset}-{seed}")
    write_scenario(preset, folder, seed=seed, jobs=36)
    return folder


@pytest.mark.parametrize("preset", ["lock-nonatomic", "lock-release-no-owner"])
def test_two_holders_are_exactly_the_truth_lock_overlaps(preset: str, tmp_path_factory):
    for seed in SEEDS:
        flagged, overlapping, findings, _ = _flagged(_scenario(preset, seed, tmp_path_factory))
        assert overlapping, "the preset should produce lock overlaps"
        assert _rule_positions(flagged, "DF301") == overlapping, seed
        assert not _rule_positions(flagged, "DF303")
        for finding in findings:
            if finding.rule == "DF301":
                assert finding.evidence and any(e.kind == "lock_acquire" for e in finding.evidence)
                assert finding.figures["holders"] >= 2 and finding.figures["overlap_s"] > 0
                # Only a short cross-host overlap without a repeated side effect is merely possible.
                if finding.severity != "high":
                    assert finding.confidence == "possible" and not finding.figures["side_effect_repeated"]


def test_release_by_non_holder_fires_only_where_a_denied_worker_deletes_the_lock(tmp_path_factory):
    for seed in SEEDS:
        folder = _scenario("lock-release-no-owner", seed, tmp_path_factory)
        flagged, overlapping, findings, truth = _flagged(folder)
        releases = [f for f in findings if f.rule == "DF302"]
        # Every denial in this preset is followed by the denied worker's unconditional release.
        assert len(releases) == truth["counters"]["guard_hits_by_kind"]["lock_denied"]
        assert all(f.severity == "high" and f.figures["holder_at_release"] for f in releases)
        assert overlapping <= flagged[("DF302", "high")]
        # The two-holder findings name the foreign release as the way in.
        assert all(f.figures["released_by_non_holder"] for f in findings if f.rule == "DF301")
        for preset in ("lock-nonatomic", "lock-ttl-short", "lock-atomic-control"):
            other = _flagged(_scenario(preset, seed, tmp_path_factory))[0]
            assert not any(rule == "DF302" for rule, _ in other), preset


def test_ttl_shorter_than_work_is_high_exactly_where_another_worker_took_the_lock(tmp_path_factory):
    for seed in SEEDS:
        flagged, overlapping, findings, truth = _flagged(_scenario("lock-ttl-short", seed, tmp_path_factory))
        assert flagged.get(("DF303", "high"), set()) == overlapping
        assert findings, "a 10 s TTL under 15-40 s slow calls must expire somewhere"
        assert not any(rule in ("DF301", "DF302") for rule, _ in flagged)
        ttl = truth["params"]["lock_ttl_s"]
        for finding in findings:
            assert finding.figures["ttl_s"] == ttl and finding.figures["held_s"] > ttl
            assert (finding.severity == "high") == (finding.figures["taken_over_by"] is not None)


def test_atomic_lock_with_retries_stays_quiet(tmp_path_factory):
    for seed in SEEDS:
        folder = _scenario("lock-atomic-control", seed, tmp_path_factory)
        flagged, _, _, truth = _flagged(folder)
        assert truth["counters"]["guard_hits_by_kind"]["lock_denied"] > 0, "a control needs contention"
        assert flagged == {}


@pytest.mark.parametrize(
    "folder", sorted(p for p in (FIXTURES / "synth").iterdir() if (p / "truth.json").is_file()), ids=lambda p: p.name
)
def test_lock_rules_on_the_checked_in_fixtures(folder: Path):
    flagged, overlapping, findings, _ = _flagged(folder)
    if folder.name in ("lock-nonatomic", "lock-release-no-owner"):
        assert _rule_positions(flagged, "DF301") == overlapping
    elif folder.name == "lock-ttl-short":
        assert flagged[("DF303", "high")] == overlapping
    else:
        assert not findings, [f.summary for f in findings]


def test_duplicate_is_attributed_to_the_lock_only_when_the_holds_overlapped(tmp_path_factory):
    """Same lock key in both executions is not enough: the atomic control's retried trigger takes the
    lock after the first released it, and that must not read as a lock overlap."""
    from dupfind.attribution import _lock_overlap

    folder = _scenario("lock-atomic-control", 1, tmp_path_factory)
    report, _ = analyze_folder(folder)
    ctx = report.context
    pairs = ctx.pairs.filter(ctx.pairs["locks_a"].list.set_intersection(ctx.pairs["locks_b"]).list.len() > 0)
    assert pairs.height > 0, "the control should have executions sharing a lock key"
    assert all(_lock_overlap(ctx, a, b) is None for a, b in pairs.select("exec_id_a", "exec_id_b").rows())
    racy = _scenario("lock-nonatomic", 1, tmp_path_factory)
    report, _ = analyze_folder(racy)
    causes = {f.cause for f in report.harmful}
    assert causes == {"lock_overlap"}


@pytest.mark.parametrize(("preset", "explanation"), [
    ("lock-nonatomic", "the lock did not exclude the second"),
    ("lock-ttl-short", "s TTL while the first execution still ran"),
    ("lock-release-no-owner", "a worker that did not hold lock"),
])
def test_a_lock_overlap_is_explained_by_how_the_second_got_the_lock(preset: str, explanation: str, tmp_path_factory):
    """The TTL, the orphan release between the two acquisitions, or a plain race: what each preset does."""
    folder = tmp_path_factory.mktemp(preset)
    write_scenario(preset, folder, seed=1, jobs=300)
    report, _ = analyze_folder(folder)
    details = [f.cause_detail for f in report.findings if f.rule == "DF101" and f.cause == "lock_overlap"]
    explained = [d for d in details if explanation in d]
    assert len(details) >= 5 and len(explained) >= 0.9 * len(details), details[:3]
    orphan = "did not hold lock"
    assert all(orphan not in d for d in details) or preset == "lock-release-no-owner"


def _lock_log(path: Path, worker: str, job: str, acquired: str, released: str) -> None:
    key, owner = "lock:order-7:email", f"{worker}:4242:{job}"

    def rec(ts: str, event: str) -> str:
        return json.dumps({"ts": f"2026-05-02T08:00:{ts}Z", "level": "info", "event": event, "worker_id": worker,
                           "pid": 4242, "job_id": job, "order_id": "order-7", "lock_key": key, "lock_owner": owner,
                           "ttl_s": 30.0})

    path.write_text("\n".join([rec(acquired, "lock_acquired"), rec(released, "lock_released")]) + "\n")


@pytest.mark.parametrize(("first", "second", "overlap", "confidence"), [
    # 0.2 s held, 5 s inside the first's hold on either side: no skew undoes it
    (("00.000", "10.000"), ("05.000", "05.200"), 0.2, {"certain"}),
    # 0.3 s together, the first's release 0.3 s after the second's acquisition: a 0.5 s skew undoes it
    (("00.000", "00.400"), ("00.100", "05.000"), 0.3, {"possible", "likely"}),
    # 0.2 s together at the end of the first's long hold, within the skew: a hand-over, no finding
    (("00.000", "10.000"), ("09.800", "11.000"), None, None),
])
def test_across_hosts_a_hold_inside_another_is_certain_however_short(tmp_path, first, second, overlap, confidence):
    """DF301's certainty across hosts is how far a clock must move for the holds not to intersect
    (as DF102's), not how long they overlap: a short hold in the middle of a long one is certain."""
    _lock_log(tmp_path / "a.log", "host-a", "job-1", *first)
    _lock_log(tmp_path / "b.log", "host-b", "job-2", *second)
    config = load_config(cwd=Path("/"))
    report = analyze(ingest([str(tmp_path)], config), config, load_rules(config), skew_s=0.5)
    holders = [f for f in report.findings if f.rule == "DF301"]
    if overlap is None:
        assert not holders
        return
    assert len(holders) == 1 and holders[0].figures["overlap_s"] == overlap
    assert holders[0].confidence in confidence
