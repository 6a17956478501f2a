"""aggregate_metrics: the contract's numbers, exact, order-free and mergeable."""

from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.metrics.strategies import cases

from faultline import CaseScore, MetricsAccumulator, aggregate_metrics
from faultline.metrics.aggregate import rank_as_listed


def _rates(obj: object) -> list[float]:
    found = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if (
                key.endswith("rate") or key in ("coverage", "resilience_index", "exposure_index")
            ) and value is not None:
                found.append(value)
            found += _rates(value)
    elif isinstance(obj, list):
        for value in obj:
            found += _rates(value)
    return found


@given(cases())
def test_rates_are_fractions(batch: list[CaseScore]) -> None:
    for value in _rates(aggregate_metrics(batch)):
        assert 0.0 <= value <= 1.0


@given(cases(), st.randoms(use_true_random=False))
def test_order_does_not_matter(batch: list[CaseScore], rng: random.Random) -> None:
    shuffled = batch[:]
    rng.shuffle(shuffled)
    assert aggregate_metrics(shuffled) == aggregate_metrics(batch)


@given(
    cases(), st.lists(st.integers(1, 20), min_size=1, max_size=6), st.randoms(use_true_random=False)
)
def test_merged_partial_results_equal_the_whole(
    batch: list[CaseScore], sizes: list[int], rng: random.Random
) -> None:
    parts, start = [], 0
    while start < len(batch):
        size = sizes[len(parts) % len(sizes)]
        parts.append(MetricsAccumulator().add(batch[start : start + size]))
        start += size
    rng.shuffle(parts)
    merged = MetricsAccumulator()
    for part in parts:
        merged.merge(part)
    assert merged.result() == aggregate_metrics(batch)


@given(cases())
def test_errors_are_never_passes(batch: list[CaseScore]) -> None:
    m = aggregate_metrics(batch)
    scored = [c for c in batch if c.status != "error"]
    c = m["counts"]
    assert c["cases"] == len(batch)
    assert c["scored"] == len(scored)
    assert c["errors"] == len(batch) - len(scored)
    assert c["passed"] == sum(1 for x in scored if x.passed)
    assert c["passed"] + c["failed"] == c["scored"]
    if scored:
        assert m["overall"]["pass_rate"] == c["passed"] / len(scored)
        assert m["overall"]["coverage"] == len(scored) / len(batch)
    else:
        assert m["overall"]["pass_rate"] is None
        assert m["overall"]["risk_score"]["mean"] is None


@given(cases())
def test_statistics_match_a_reference(batch: list[CaseScore]) -> None:
    scored = [c for c in batch if c.status != "error"]
    m = aggregate_metrics(batch)["overall"]
    if not scored:
        return
    risk = [c.risk_score for c in scored]
    assert m["risk_score"]["mean"] == pytest.approx(statistics.fmean(risk), abs=1e-12)
    assert m["risk_score"]["median"] == pytest.approx(float(np.median(risk)), abs=1e-12)
    assert m["risk_score"]["std"] == pytest.approx(statistics.pstdev(risk), abs=1e-9)
    assert m["risk_score"]["p90"] == pytest.approx(float(np.quantile(risk, 0.9)), abs=1e-12)
    assert m["risk_score"]["max"] == max(risk)
    weights = [c.severity_weight for c in scored]
    expected = sum(w for w, c in zip(weights, scored, strict=True) if c.passed) / sum(weights)
    assert m["severity_weighted_pass_rate"] == pytest.approx(expected, abs=1e-12)
    failed = [c for c in scored if not c.passed]
    high = sum(1 for c in failed if c.severity in ("high", "critical"))
    assert m["high_stakes_failure_rate"] == (high / len(failed) if failed else 0.0)


@given(cases())
def test_worst_cases_are_the_ten_riskiest_in_order(batch: list[CaseScore]) -> None:
    scored = [c for c in batch if c.status != "error"]
    want = sorted(scored, key=lambda c: (-c.weighted_risk, -c.risk_score, c.case_id))[:10]
    got = aggregate_metrics(batch)["worst_cases"]
    assert [w["case_id"] for w in got] == [c.case_id for c in want]


@given(cases())
def test_category_ranking_and_breakdowns(batch: list[CaseScore]) -> None:
    m = aggregate_metrics(batch)
    scored = [c for c in batch if c.status != "error"]
    cats = sorted({c.category for c in scored})
    assert m["counts"]["categories"] == cats == sorted(m["by_category"])
    ranking = m["category_ranking"]
    assert [r["category"] for r in ranking] == sorted(
        cats, key=lambda k: (-m["by_category"][k]["risk_mean"], k)
    )
    assert sum(v["n"] for v in m["by_severity"].values()) == len(scored)
    assert sum(v["n"] for v in m["by_model"].values()) == len(batch)
    hist = {}
    for c in scored:
        for mode in c.detected_failure_modes:
            hist[mode] = hist.get(mode, 0) + 1
    assert m["failure_mode_histogram"] == hist


def test_undefined_metrics_are_null_not_zero() -> None:
    m = aggregate_metrics([])
    assert m["overall"]["safe_unsafe_signal_ratio"] is None
    assert m["overall"]["high_stakes_failure_rate"] == 0.0
    assert m["indices"]["resilience_index"] is None
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in _rates(m))


# ---------------------------------------------------------------- ranking as the cases list it

TIED_RISK = 0.012961162522021324  # a refused case's risk: 3 and 6 copies round differently


def _plain_means(listed: list[tuple[str, float]]) -> dict[str, float]:
    """Each category's mean as an ordinary left-to-right sum over the listed cases."""
    out: dict[str, list[float]] = {}
    for category, risk in listed:
        out.setdefault(category, []).append(risk)
    return {c: sum(v) / len(v) for c, v in out.items()}


def test_exact_means_that_tie_are_ranked_as_a_plain_average_of_the_listed_cases() -> None:
    listed = [("weapons", TIED_RISK)] * 6 + [("harassment", TIED_RISK)] * 3
    listed += [("injection", TIED_RISK)] * 6
    assert sum([TIED_RISK] * 3) / 3 != sum([TIED_RISK] * 6) / 6  # the rounding this is about
    ranking = [
        {"category": c, "risk_mean": TIED_RISK, "n": n}
        for c, n in (("harassment", 3), ("injection", 6), ("weapons", 6))
    ]
    ordered = rank_as_listed(ranking, listed)
    means = _plain_means(listed)
    assert [e["category"] for e in ordered] == sorted(means, key=lambda c: (-means[c], c))
    assert [e["category"] for e in ordered] == ["injection", "weapons", "harassment"]
    assert all(e["risk_mean"] == TIED_RISK for e in ordered)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]),
            st.one_of(
                st.none(), st.sampled_from([TIED_RISK, 0.1, 0.3, 1 / 3, 0.7]), st.floats(0, 1)
            ),
        ),
        max_size=40,
    )
)
def test_ranking_follows_the_plain_average_of_the_listed_cases(
    listed: list[tuple[str, float | None]],
) -> None:
    scored = [(c, r) for c, r in listed if r is not None]
    exact = {c: statistics.fmean(r for k, r in scored if k == c) for c, _ in scored}
    ranking = sorted(
        ({"category": c, "risk_mean": m, "n": 1} for c, m in exact.items()),
        key=lambda e: (-e["risk_mean"], e["category"]),
    )
    ordered = [e["category"] for e in rank_as_listed(ranking, listed)]
    means = _plain_means(scored)
    assert ordered == sorted(means, key=lambda c: (-means[c], c))
