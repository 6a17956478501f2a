"""wilson_interval (faultline.metrics.stats): the bounds of the reports' ``pass_rate_ci95``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.metrics.strategies import cases

from faultline import CaseScore, aggregate_metrics
from faultline.metrics.stats import wilson_interval


@pytest.mark.parametrize("n", [1, 3, 7, 10, 100, 1000, 12345])
def test_the_ends_are_exact_for_none_and_all(n: int) -> None:
    # Before: 0 of 3 gave a lower end of 5.55e-17, 0 of 7 3.47e-18, and n of n could give
    # an upper end of 0.9999999999999999.
    none, every = wilson_interval(0, n), wilson_interval(n, n)
    assert none is not None
    assert every is not None
    assert none[0] == 0.0
    assert every[1] == 1.0


@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_interval_holds_the_rate_within_0_and_1(case: tuple[int, int]) -> None:
    k, n = case
    interval = wilson_interval(k, n)
    assert interval is not None
    low, high = interval
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert (low == 0.0) == (k == 0)
    assert (high == 1.0) == (k == n)


@given(cases(risks=st.floats(0.5, 1)))
def test_a_report_without_a_pass_has_a_lower_end_of_zero(batch: list[CaseScore]) -> None:
    overall = aggregate_metrics(batch)["overall"]
    if overall["pass_rate_ci95"] is not None:
        assert overall["pass_rate_ci95"][0] == 0.0
