"""AnalysisContext.pairs: every ordered pair of executions of one action, as a self-join of all of
them gives it, though actions run once are left out before the join."""

from __future__ import annotations

import polars as pl
import pytest

from conftest import FIXTURES
from truth_compare import analyze_folder

PAIR_KEY = ["action_id", "exec_id_a", "exec_id_b"]


def _every_ordered_pair(executions: pl.DataFrame) -> pl.DataFrame:
    """The ordered pairs of a join of every execution with every execution of its action."""
    ex = executions.select("exec_id", "action_id", "start")
    joined = ex.join(ex, on="action_id", suffix="_b").rename({"exec_id": "exec_id_a", "start": "start_a"})
    return joined.filter(
        (pl.col("start_a") < pl.col("start_b"))
        | ((pl.col("start_a") == pl.col("start_b")) & (pl.col("exec_id_a") < pl.col("exec_id_b")))
    ).select(PAIR_KEY)


@pytest.mark.parametrize("scenario", ["deploy-overlap", "visibility-timeout-two-workers", "lock-nonatomic"])
def test_pairs_are_every_ordered_pair_of_an_action(scenario):
    report, _ = analyze_folder(FIXTURES / "synth" / scenario)
    ctx = report.context
    pairs = ctx.pairs
    expected = _every_ordered_pair(ctx.executions)
    assert expected.height > 0  # the scenario runs some action more than once
    assert pairs.select(PAIR_KEY).sort(PAIR_KEY).equals(expected.sort(PAIR_KEY))
    # Actions run once are in the executions, and in no pair.
    once = ctx.executions.group_by("action_id").len().filter(pl.col("len") == 1)["action_id"]
    assert once.len() > 0 and not pairs["action_id"].is_in(once.implode()).any()
