"""Significance tests: McNemar (paired) and the two-proportion z test, against known values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest, chi2, chi2_contingency

from faultline.metrics.stats import MCNEMAR_EXACT_BELOW, mcnemar_test, two_proportion_test


def test_mcnemar_exact_matches_the_binomial_by_hand() -> None:
    # 1 of 10 discordant pairs one way: p = 2 * P(X <= 1 | n=10, 1/2) = 2 * 11 / 1024
    result = mcnemar_test(1, 9)
    assert result["method"] == "exact"
    assert result["p_value"] == pytest.approx(22 / 1024, rel=1e-12)
    assert result["statistic"] == 1.0
    assert result["discordant"] == {"pass_to_fail": 1, "fail_to_pass": 9}


def test_mcnemar_chi_square_on_a_textbook_table() -> None:
    # b=121, c=59: corrected chi-square (|121 - 59| - 1)^2 / 180 = 20.672..., p about 5.45e-6
    result = mcnemar_test(121, 59)
    assert result["method"] == "chi2_cc"
    assert result["statistic"] == pytest.approx(61**2 / 180, rel=1e-12)
    assert result["p_value"] == pytest.approx(chi2.sf(61**2 / 180, 1), rel=1e-9)
    assert result["p_value"] == pytest.approx(5.45e-6, rel=1e-2)


def test_mcnemar_with_no_discordant_pair_shows_no_change() -> None:
    assert mcnemar_test(0, 0)["p_value"] == 1.0
    assert mcnemar_test(0, 0)["method"] == "exact"


def test_mcnemar_switches_to_chi_square_at_the_boundary() -> None:
    assert mcnemar_test(12, MCNEMAR_EXACT_BELOW - 13)["method"] == "exact"
    assert mcnemar_test(12, MCNEMAR_EXACT_BELOW - 12)["method"] == "chi2_cc"


def test_mcnemar_balanced_chi_square_is_not_over_corrected() -> None:
    result = mcnemar_test(20, 20)
    assert result["statistic"] == 0.0
    assert result["p_value"] == 1.0


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="negative"):
        mcnemar_test(-1, 3)


def test_two_proportion_matches_the_textbook_z() -> None:
    # 45/100 vs 60/100: pooled p = 0.525, z = 0.15 / sqrt(0.525 * 0.475 * 0.02) = 2.1239
    result = two_proportion_test(45, 100, 60, 100)
    assert result["statistic"] == pytest.approx(2.1239, abs=1e-4)
    assert result["p_value"] == pytest.approx(0.03367, abs=1e-5)
    assert result["difference"] == pytest.approx(0.15)


def test_two_proportion_z_squared_is_pearsons_chi_square() -> None:
    result = two_proportion_test(17, 40, 31, 52)
    table = [[17, 23], [31, 21]]
    stat, p, _, _ = chi2_contingency(table, correction=False)
    assert result["statistic"] ** 2 == pytest.approx(stat, rel=1e-12)
    assert result["p_value"] == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize(
    ("counts", "difference"),
    [((0, 0, 3, 5), None), ((3, 5, 0, 0), None), ((0, 7, 0, 9), 0.0), ((7, 7, 9, 9), 0.0)],
)
def test_two_proportion_is_null_when_undefined(
    counts: tuple[int, int, int, int], difference: float | None
) -> None:
    result = two_proportion_test(*counts)
    assert result["statistic"] is None
    assert result["p_value"] is None
    assert result["difference"] == difference


def test_two_proportion_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="0 <= x <= n"):
        two_proportion_test(6, 5, 1, 2)


@given(st.integers(0, 300), st.integers(0, 300))
def test_mcnemar_p_is_a_probability_and_symmetric(b: int, c: int) -> None:
    one, other = mcnemar_test(b, c), mcnemar_test(c, b)
    assert 0.0 <= one["p_value"] <= 1.0
    assert one["p_value"] == pytest.approx(other["p_value"], rel=1e-12, abs=1e-300)
    assert one["statistic"] == other["statistic"]


@given(st.integers(MCNEMAR_EXACT_BELOW - 6, MCNEMAR_EXACT_BELOW + 6), st.data())
def test_exact_and_chi_square_agree_roughly_near_the_boundary(n: int, data: st.DataObject) -> None:
    b = data.draw(st.integers(0, n))
    exact = float(binomtest(min(b, n - b), n, 0.5).pvalue)
    corrected = math.erfc(math.sqrt(max(0, abs(2 * b - n) - 1) ** 2 / n / 2))
    assert abs(exact - corrected) < 0.01
    assert mcnemar_test(b, n - b)["p_value"] == pytest.approx(
        exact if n < MCNEMAR_EXACT_BELOW else corrected, rel=1e-9
    )


@given(
    st.integers(0, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.integers(0, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
)
def test_two_proportion_p_is_a_probability_and_symmetric(
    first: tuple[int, int], second: tuple[int, int]
) -> None:
    one, other = two_proportion_test(*first, *second), two_proportion_test(*second, *first)
    if one["p_value"] is None:
        assert other["p_value"] is None
        return
    assert 0.0 <= one["p_value"] <= 1.0
    assert one["p_value"] == pytest.approx(other["p_value"], rel=1e-12)
    assert one["statistic"] == pytest.approx(-other["statistic"], rel=1e-12)
