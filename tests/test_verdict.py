"""The verdict from the findings and what the records hold (analyze.verdict_of)."""

from __future__ import annotations

import pytest

from dupfind.analyze import verdict_of


@pytest.mark.parametrize(("actions", "side_effects", "executions", "verdict", "words"), [
    (50, False, 0, "insufficient_evidence", "no execution or side effect"),  # a producer's log alone
    (50, True, 0, "no_harmful_duplicates", "no side effect was executed more than once"),  # a provider's log alone: one send each
    (50, False, 56, "no_harmful_duplicates", "no side effect"),  # ran once each, nothing repeated
    (0, False, 0, "insufficient_evidence", "no job records could be correlated"),
])
def test_the_verdict_says_what_the_records_can_settle(actions, side_effects, executions, verdict, words):
    found, reason = verdict_of([], actions, lambda: side_effects, lambda: 0, executions)
    assert found == verdict and words in reason
