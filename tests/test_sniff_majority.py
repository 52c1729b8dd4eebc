"""Format sniffing stops counting a preset's matches once the majority is settled, with the same verdict."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dupfind.formats import _majority, _majority_of, _passing


@given(st.lists(st.booleans(), max_size=60), st.integers(0, 20))
def test_majority_of_equals_counting_every_item(results, extra):
    total = len(results) + extra  # a total may count lines the items leave out (undecoded ones)
    calls: list[bool] = []

    def test(value: bool) -> bool:
        calls.append(value)
        return value

    assert _majority_of(test, results, total) == _majority(sum(results), total)
    assert len(calls) <= len(results)


@given(st.lists(st.booleans(), min_size=1, max_size=60))
def test_passing_is_exact_whenever_it_is_a_majority(results):
    total = len(results)
    hits = _passing(lambda value: value, results, total)
    if _majority(sum(results), total):
        assert hits == sum(results)
    else:
        assert hits == -1 or (hits == sum(results) and not _majority(hits, total))


def test_a_preset_that_fails_early_is_not_tried_on_every_line():
    tried: list[int] = []
    assert not _majority_of(lambda i: tried.append(i) or i == 0, list(range(50)), 50)
    assert len(tried) == 26  # one hit, then 25 misses: at most 25 of the 50 can pass, not more than half
