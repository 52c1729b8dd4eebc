"""Visibility timeouts inferred from redelivery gaps alone (synth 30 s and 5 s, Celery, SQS), and their sources."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
import polars as pl
import pytest

from dupfind.analysis import AnalysisContext
from dupfind.config import load_config
from dupfind.correlate import correlate
from dupfind.ingest import ingest
from dupfind.synth import PRESETS, write_scenario

from conftest import FIXTURES

CONFIG = load_config(cwd=Path("/"))
REAL = sorted(p for p in (FIXTURES / "real").iterdir() if (p / "truth.json").is_file())


def _context(logs: Path, strip_stated: bool = True, timeouts: dict[str, float] | None = None) -> AnalysisContext:
    """The analysis context of some logs; by default every stated timeout is removed first."""
    table = ingest([str(logs)], CONFIG).table
    if strip_stated:
        table = table.with_columns(visibility_timeout_s=pl.lit(None, dtype=pl.Float64))
    return AnalysisContext(correlate(table, CONFIG.link_keys), CONFIG, timeouts=timeouts or {})


def _only_estimate(ctx: AnalysisContext):
    assert ctx.stated_timeouts == {}, "the stated timeout must not be visible to the inference"
    assert len(ctx.inferred_timeouts) == 1, ctx.inferred_timeouts
    return next(iter(ctx.inferred_timeouts.values()))


@pytest.mark.parametrize("timeout_s, slow_s", [(30.0, (85.0, 95.0)), (5.0, (6.5, 14.0))])
def test_simulated_timeout_is_recovered_within_a_second(timeout_s, slow_s, tmp_path_factory):
    base = PRESETS["visibility-timeout"].params
    for seed in range(1, 6):
        folder = tmp_path_factory.mktemp(f"vt{timeout_s:g}-{seed}")
        params = replace(base, visibility_timeout_s=timeout_s, slow_s=slow_s, jobs=30)
        truth = write_scenario("visibility-timeout", folder, seed=seed, params=params)
        assert truth["counters"]["lease_expirations"] > 0
        estimate = _only_estimate(_context(folder / "logs"))
        assert abs(estimate.estimate_s - timeout_s) <= 1.0, (seed, estimate)
        assert estimate.reliable and estimate.support <= estimate.gaps
        assert estimate.spread_s < 1.0


@pytest.mark.parametrize("folder", REAL, ids=[p.name for p in REAL])
def test_real_broker_timeout_is_recovered_within_a_second(folder: Path):
    truth = orjson.loads((folder / "truth.json").read_bytes())
    estimate = _only_estimate(_context(folder / "logs"))
    assert abs(estimate.estimate_s - truth["params"]["visibility_timeout_s"]) <= 1.0, estimate
    assert estimate.reliable


@pytest.mark.parametrize("preset", ["lock-atomic-control", "db-update-fails", "baseline"])
def test_requested_redeliveries_and_heartbeats_infer_nothing(preset: str):
    """Retries after a failure or a lock denial, and leases kept alive by a heartbeat, are no evidence
    of the timeout: these fixtures redeliver plenty but no lease ever expires under a running job."""
    folder = FIXTURES / "synth" / preset
    truth = orjson.loads((folder / "truth.json").read_bytes())
    assert truth["counters"]["redeliveries"] > 0
    ctx = _context(folder / "logs")
    assert ctx.inferred_timeouts == {}
    assert ctx.timeout_source("notifications") is None


def test_fan_out_is_not_a_lease_expiry():
    """Two consumer groups reading one message within milliseconds is not a sub-second timeout."""
    ctx = _context(FIXTURES / "scenarios" / "deploy-consumer-group-overlap" / "logs")
    assert ctx.redelivery_gaps.height > 0 and ctx.redelivery_gaps["gap_s"].max() < 1.0
    assert ctx.inferred_timeouts == {}


def test_timeout_sources_in_order_configured_logged_inferred():
    logs = FIXTURES / "synth" / "visibility-timeout" / "logs"
    inferred = _context(logs)
    value, source = inferred.timeout_source("notifications")
    assert source == "inferred" and abs(value - 30.0) <= 1.0
    logged = _context(logs, strip_stated=False)
    assert logged.timeout_source("notifications") == (30.0, "logged")
    configured = _context(logs, strip_stated=False, timeouts={"notifications": 45.0})
    assert configured.timeout_source("notifications") == (45.0, "configured")
    assert configured.timeout_source("other-queue") == (30.0, "logged")


def test_config_file_timeouts(tmp_path: Path):
    from dupfind.errors import DupfindError

    (tmp_path / "dupfind.toml").write_text('[timeouts]\nnotifications = 20\n"*" = 90\n')
    config = load_config(cwd=tmp_path)
    assert config.timeouts == {"notifications": 20.0, "": 90.0}
    (tmp_path / "dupfind.toml").write_text('[timeouts]\nnotifications = "soon"\n')
    with pytest.raises(DupfindError, match="timeouts.notifications"):
        load_config(cwd=tmp_path)
