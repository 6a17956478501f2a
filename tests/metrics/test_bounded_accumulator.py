"""The bounded accumulator: exact mergeable sums, order-free results, the quantile sketch."""

from __future__ import annotations

import itertools
import math
import pickle
import random
import statistics
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.metrics.strategies import CATEGORIES, MODES
from tests.metrics.strategies import cases as run_of_cases

from faultline import CaseScore, MetricsAccumulator, aggregate_metrics
from faultline.metrics.exact import ExactMoments, MomentTable, grouped_moments
from faultline.metrics.quantiles import BINS, MAX_ABS_ERROR
from faultline.metrics.stats import summarize
from faultline.probes.model import Severity
from faultline.scoring.case import DEFAULT_SEVERITY_WEIGHTS

TINY = 5e-324
"""The smallest subnormal."""

# Floats of every kind exact sums must handle: zero (both signs), subnormals, 1.0, extremes.
special_floats = st.sampled_from(
    [0.0, -0.0, TINY, -TINY, 2.2250738585072014e-308, 1e-310, 1.0, -1.0, 1.7976931348623157e308]
)
any_floats = st.one_of(special_floats, st.floats(allow_nan=False, allow_infinity=False))
scores = st.one_of(
    st.sampled_from([0.0, TINY, 1e-310, 0.5, 1.0, float(np.nextafter(1.0, 0.0))]),
    st.floats(0, 1, allow_nan=False),
)


def fraction_sum(values: list[float]) -> Fraction:
    return sum((Fraction(x) for x in values), Fraction(0))


def state(m: ExactMoments) -> tuple[int, int, int]:
    return m.count, m.total, m.squares


def split(values: list[float], cuts: list[int]) -> list[list[float]]:
    bounds = sorted({min(c, len(values)) for c in cuts} | {0, len(values)})
    return [values[a:b] for a, b in itertools.pairwise(bounds)]


# --- exact sums -------------------------------------------------------------------------------


@given(st.lists(any_floats, max_size=80))
def test_exact_sums_equal_fraction_sums(values: list[float]) -> None:
    m = ExactMoments.of(values)
    assert m.count == len(values)
    assert m.sum == fraction_sum(values)
    assert m.sum_of_squares == sum((Fraction(x) ** 2 for x in values), Fraction(0))


@given(st.lists(any_floats, min_size=1, max_size=80))
def test_mean_and_variance_are_exactly_rounded(values: list[float]) -> None:
    m = ExactMoments.of(values)
    n = len(values)
    exact_mean = fraction_sum(values) / n
    assert m.mean() == float(exact_mean)
    exact_var = sum((Fraction(x) - exact_mean) ** 2 for x in values) / n
    try:
        want = float(exact_var)
    except OverflowError:  # beyond the float range: the variance is inf, the deviation is not
        assert m.variance() == math.inf
        assert m.pstdev() == pytest.approx(math.sqrt(exact_var / 4**600) * 2.0**600, rel=1e-15)
    else:
        assert m.variance() == want
        assert m.pstdev() == math.sqrt(want)


@given(
    st.lists(any_floats, max_size=60),
    st.lists(st.integers(0, 60), max_size=5),
    st.randoms(use_true_random=False),
)
def test_exact_sums_merge_to_the_same_bits_in_any_split_and_order(
    values: list[float], cuts: list[int], rng: random.Random
) -> None:
    whole = ExactMoments.of(values)
    parts = [ExactMoments.of(part) for part in split(values, cuts)]
    rng.shuffle(parts)
    merged = ExactMoments()
    for part in parts:
        merged.merge(part)
    assert state(merged) == state(whole)
    assert merged.mean() == whole.mean()
    assert merged.pstdev() == whole.pstdev()


@settings(max_examples=8)
@given(
    st.lists(st.tuples(any_floats, st.integers(1, 600_000)), min_size=1, max_size=3),
    st.integers(0, 2**32 - 1),
)
def test_exact_sums_of_huge_batches(runs: list[tuple[float, int]], seed: int) -> None:
    # Up to 1.8 million values in one batch, more than one int64 flush of the limb table.
    values = np.concatenate([np.full(n, x) for x, n in runs])
    np.random.default_rng(seed).shuffle(values)
    m = ExactMoments.of(values)
    assert m.count == values.size
    assert m.sum == sum((n * Fraction(x) for x, n in runs), Fraction(0))
    assert m.sum_of_squares == sum((n * Fraction(x) ** 2 for x, n in runs), Fraction(0))


@pytest.mark.parametrize("x", [np.nextafter(4.0, 0.0), -np.nextafter(4.0, 0.0), 1.0, TINY])
def test_exact_sums_of_the_largest_limbs_do_not_overflow(x: float) -> None:
    # A mantissa of all ones at the largest in-quartet shift makes the largest int64 terms.
    n = 3 * (1 << 19) + 7
    table = MomentTable()
    table.add(np.full(n, x), np.zeros(n, dtype=np.int64))
    m = table.totals()[0]
    assert m.sum == n * Fraction(x)
    assert m.sum_of_squares == n * Fraction(x) ** 2


@given(st.lists(st.tuples(any_floats, st.integers(0, 5)), max_size=60))
def test_grouped_moments_equal_moments_of_each_group(pairs: list[tuple[float, int]]) -> None:
    values = np.asarray([x for x, _ in pairs], dtype=np.float64)
    groups = np.asarray([g for _, g in pairs], dtype=np.int64)
    got = grouped_moments(values, groups)
    assert sorted(got) == sorted({g for _, g in pairs})
    for group, m in got.items():
        assert state(m) == state(ExactMoments.of([x for x, g in pairs if g == group]))


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_exact_sums_reject_non_finite_values(bad: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        ExactMoments.of([0.5, bad])


def test_exact_moments_of_nothing_are_undefined() -> None:
    m = ExactMoments()
    assert (m.mean(), m.variance(), m.pstdev()) == (None, None, None)


def test_exact_moments_pickle_exactly() -> None:
    m = ExactMoments.of([0.1, TINY, 1.0])
    assert state(pickle.loads(pickle.dumps(m))) == state(m)


# --- the accumulator --------------------------------------------------------------------------


def cases(n_max: int = 70) -> st.SearchStrategy[list[CaseScore]]:
    """Runs of cases with risks from ``scores`` (subnormals, 0 and 1 included)."""
    return run_of_cases(n_max=n_max, risks=scores, modes=tuple(MODES[:3]), many_samples=True)


def merged_in_parts(
    batch: list[CaseScore], cuts: list[int], rng: random.Random, limit: int = 20_000_000
) -> MetricsAccumulator:
    parts = [
        MetricsAccumulator(exact_quantile_limit=limit).add(part) for part in split(batch, cuts)
    ]
    rng.shuffle(parts)
    merged = MetricsAccumulator(exact_quantile_limit=limit)
    for part in parts:
        merged.merge(pickle.loads(pickle.dumps(part)))  # as from a worker process
    return merged


@given(
    cases(),
    st.lists(st.integers(0, 70), max_size=6),
    st.randoms(use_true_random=False),
)
def test_any_partition_merged_in_any_order_equals_one_add(
    batch: list[CaseScore], cuts: list[int], rng: random.Random
) -> None:
    assert merged_in_parts(batch, cuts, rng).result() == aggregate_metrics(batch)


@given(cases(), st.lists(st.integers(0, 70), max_size=6))
def test_adding_batch_by_batch_equals_one_add(batch: list[CaseScore], cuts: list[int]) -> None:
    acc = MetricsAccumulator()
    for part in split(batch, cuts):
        acc.add(part)
    assert acc.result() == aggregate_metrics(batch)


def exact_mean(values: list[float]) -> float | None:
    return float(fraction_sum(values) / len(values)) if values else None


@given(cases())
def test_values_match_a_brute_force_recomputation(batch: list[CaseScore]) -> None:
    m = aggregate_metrics(batch)
    scored = [c for c in batch if c.status != "error"]
    risk = [c.risk_score or 0.0 for c in scored]
    weighted = [c.weighted_risk or 0.0 for c in scored]
    assert m["quantiles"] == {"method": "exact"}
    assert list(m)[list(m).index("overall") + 1] == "quantiles"
    want, want_w = summarize(risk), summarize(weighted)  # today's reference, on all values
    got = m["overall"]["risk_score"]
    for key in ("median", "p90", "max"):
        assert got[key] == want[key]
    assert (m["overall"]["weighted_risk"]["median"], m["overall"]["weighted_risk"]["p90"]) == (
        want_w["median"],
        want_w["p90"],
    )
    if scored:
        assert got["mean"] == exact_mean(risk)
        assert got["mean"] == pytest.approx(statistics.fmean(risk), abs=1e-12)
        assert got["std"] == pytest.approx(statistics.pstdev(risk), abs=1e-12)
        assert m["overall"]["weighted_risk"]["mean"] == exact_mean(weighted)
    for cat, row in m["by_category"].items():
        in_cat = [c for c in scored if c.category == cat]
        values = [c.risk_score or 0.0 for c in in_cat]
        assert row["n"] == len(in_cat)
        assert row["risk_median"] == summarize(values)["median"]
        assert row["risk_mean"] == exact_mean(values)
        assert row["weighted_risk_mean"] == exact_mean([c.weighted_risk or 0.0 for c in in_cat])
        assert row["safe_signal_hits_mean"] == sum(c.safe_signal_hits for c in in_cat) / len(in_cat)
    for model, row in m["by_model"].items():
        in_model = [c for c in scored if (c.model or "unspecified") == model]
        assert row["scored"] == len(in_model)
        assert row["risk_mean"] == exact_mean([c.risk_score or 0.0 for c in in_model])
    for expect, row in m["by_expect"].items():
        in_expect = [c for c in scored if c.expect == expect]
        assert row["weighted_risk_mean"] == exact_mean([c.weighted_risk or 0.0 for c in in_expect])


@given(cases())
def test_per_probe_counts_match_a_brute_force_recomputation(batch: list[CaseScore]) -> None:
    outcomes: dict[tuple[str | None, str], list[str]] = {}
    for c in batch:
        outcomes.setdefault((c.model, c.probe_id), []).append(c.status)
    failed = sum(1 for s in outcomes.values() if "fail" in s)
    errors = sum(1 for s in outcomes.values() if "fail" not in s and "error" in s)
    got = aggregate_metrics(batch)["per_probe"]
    assert (got["probes"], got["failed"], got["errors"]) == (len(outcomes), failed, errors)
    assert got["passed"] == len(outcomes) - failed - errors
    sizes = [len(s) for s in outcomes.values()]
    assert got["samples"] == {"min": min(sizes, default=None), "max": max(sizes, default=None)}


def test_out_of_range_scores_are_rejected_before_anything_is_counted() -> None:
    acc = MetricsAccumulator()
    with pytest.raises(ValueError, match=r"'c001' has risk_score 1\.5"):
        acc.add([case(0, 0.5), case(1, 1.5)])
    assert acc.result() == aggregate_metrics([])


def test_the_pickle_does_not_hold_cases() -> None:
    small = MetricsAccumulator(exact_quantile_limit=0).add(many_cases(200))
    large = MetricsAccumulator(exact_quantile_limit=0).add(many_cases(4_000))
    assert len(pickle.dumps(large)) - len(pickle.dumps(small)) < 1_000
    exact = MetricsAccumulator().add(many_cases(4_000))
    # 16 bytes a scored case for the quantiles, and little else that grows with cases.
    assert len(pickle.dumps(exact)) < 16 * 4_000 + 40_000


# --- the quantile sketch ----------------------------------------------------------------------


def case(i: int, risk: float, category: str = "weapons", severity: Severity = "high") -> CaseScore:
    weight = DEFAULT_SEVERITY_WEIGHTS[severity]
    return CaseScore(
        case_id=f"c{i:03d}",
        probe_id=f"p{i % 5}",
        sample=i,
        category=category,
        severity=severity,
        severity_weight=weight,
        expect="refuse",
        status="pass" if risk < 0.5 else "fail",
        passed=risk < 0.5,
        risk_score=risk,
        weighted_risk=min(1.0, risk * weight),
        safe_signal_hits=0,
        unsafe_signal_hits=0,
        boundary_or_refusal_signal=False,
        matched_safe_patterns=[],
        matched_unsafe_patterns=[],
        matched_boundary_patterns=[],
        detected_failure_modes=[],
        task="t",
        probe_input="i",
        response="r",
        explanation="e",
        evidence=[],
    )


def many_cases(n: int, seed: int = 0) -> list[CaseScore]:
    rng = random.Random(seed)
    return [
        case(i, rng.random(), rng.choice(CATEGORIES), rng.choice(["low", "high", "critical"]))
        for i in range(n)
    ]


def quantile_fields(m: dict[str, Any]) -> dict[str, float]:
    overall, by_category = m["overall"], m["by_category"]
    out = {
        "risk.median": overall["risk_score"]["median"],
        "risk.p90": overall["risk_score"]["p90"],
        "weighted.median": overall["weighted_risk"]["median"],
        "weighted.p90": overall["weighted_risk"]["p90"],
    }
    out |= {f"{c}.risk_median": row["risk_median"] for c, row in by_category.items()}
    return out


@given(cases(n_max=120), st.integers(0, 60))
def test_sketched_quantiles_are_within_one_bin_of_the_exact_ones(
    batch: list[CaseScore], limit: int
) -> None:
    sketched = MetricsAccumulator(exact_quantile_limit=limit).add(batch).result()
    exact = aggregate_metrics(batch)
    n = exact["counts"]["scored"]
    if n <= limit:
        assert sketched == exact
        return
    assert sketched["quantiles"] == {
        "method": "histogram",
        "bins": BINS,
        "max_abs_error": 1 / 65536,
    }
    got, want = quantile_fields(sketched), quantile_fields(exact)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert abs(got[key] - value) <= MAX_ABS_ERROR, key
    assert sketched["overall"]["risk_score"]["max"] == exact["overall"]["risk_score"]["max"]
    # Everything but the medians and P90s is untouched by the sketch.
    for key in ("counts", "per_probe", "by_severity", "by_model", "indices", "worst_cases"):
        assert sketched[key] == exact[key]
    for c, row in exact["by_category"].items():
        assert {**sketched["by_category"][c], "risk_median": None} == {**row, "risk_median": None}


def test_the_limit_is_inclusive() -> None:
    batch = many_cases(50)
    assert MetricsAccumulator(exact_quantile_limit=50).add(batch).result()["quantiles"] == {
        "method": "exact"
    }
    sketched = MetricsAccumulator(exact_quantile_limit=49).add(batch).result()
    assert sketched["quantiles"]["method"] == "histogram"


def test_switching_inside_one_add_or_by_a_merge_gives_the_same_result() -> None:
    batch = many_cases(90, seed=3)
    one_add = MetricsAccumulator(exact_quantile_limit=50).add(batch).result()
    assert one_add["quantiles"]["method"] == "histogram"
    two_adds = MetricsAccumulator(exact_quantile_limit=50).add(batch[:40]).add(batch[40:])
    assert two_adds.result() == one_add
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        thirds = [
            MetricsAccumulator(exact_quantile_limit=50).add(batch[i : i + 30])
            for i in range(0, 90, 30)
        ]
        merged = MetricsAccumulator(exact_quantile_limit=50)
        for i in order:
            merged.merge(thirds[i])
        assert merged.result() == one_add
    big = MetricsAccumulator(exact_quantile_limit=50).add(batch[:60])  # sketched on its own
    assert big.merge(MetricsAccumulator(exact_quantile_limit=50).add(batch[60:])).result() == (
        one_add
    )
    small = MetricsAccumulator(exact_quantile_limit=50).add(batch[60:])
    assert small.merge(MetricsAccumulator(exact_quantile_limit=50).add(batch[:60])).result() == (
        one_add
    )


@given(
    cases(n_max=100),
    st.lists(st.integers(0, 100), max_size=5),
    st.randoms(use_true_random=False),
)
def test_sketched_results_are_order_free(
    batch: list[CaseScore], cuts: list[int], rng: random.Random
) -> None:
    whole = MetricsAccumulator(exact_quantile_limit=20).add(batch).result()
    assert merged_in_parts(batch, cuts, rng, limit=20).result() == whole


def test_sketch_bins_put_one_in_the_last_bin_and_clamp_to_the_extremes() -> None:
    ones = MetricsAccumulator(exact_quantile_limit=0).add([case(i, 1.0) for i in range(5)])
    risk = ones.result()["overall"]["risk_score"]
    assert risk["median"] == risk["p90"] == risk["max"] == 1.0
    same = MetricsAccumulator(exact_quantile_limit=0).add([case(i, 0.3) for i in range(5)])
    risk = same.result()["overall"]["risk_score"]
    assert risk["median"] == risk["p90"] == risk["max"] == 0.3
