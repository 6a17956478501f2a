"""The failure geometry: clusters, projection and mutual information, deterministic."""

from __future__ import annotations

import math
from collections import Counter

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import mutual_info_score, normalized_mutual_info_score

from faultline import compute_observability, load_probes, load_responses, score
from faultline.demo import DEMO_RESPONSES
from faultline.observability import mutual_information


@pytest.fixture(scope="module")
def demo_cases() -> list:
    return score(load_probes("demo"), load_responses(DEMO_RESPONSES))


def test_there_is_no_geometry_below_the_minimum(demo_cases: list) -> None:
    assert compute_observability(demo_cases[:4], min_cases=5) is None
    assert compute_observability(demo_cases[:5], min_cases=5) is not None


def test_every_scored_case_gets_a_cluster_and_a_point(demo_cases: list) -> None:
    geo = compute_observability(demo_cases, seed=0)
    assert geo is not None
    n = len(demo_cases)
    assert len(geo.cluster) == len(geo.x) == len(geo.y) == n
    sizes = Counter(geo.cluster)
    assert sorted(sizes) == list(range(geo.summary["n_clusters"]))
    assert [c["size"] for c in geo.summary["clusters"]] == [sizes[i] for i in range(len(sizes))]
    assert [c["size"] for c in geo.summary["clusters"]] == sorted(sizes.values(), reverse=True)
    assert all(math.isfinite(v) for v in geo.x + geo.y)
    for cluster in geo.summary["clusters"]:
        assert cluster["top_terms"]
        assert 0 <= cluster["fail_rate"] <= 1


def test_mutual_information_matches_scikit_learn(demo_cases: list) -> None:
    geo = compute_observability(demo_cases, seed=0)
    assert geo is not None
    labels = {
        "category": [c.category for c in demo_cases],
        "severity": [c.severity for c in demo_cases],
        "pass_fail": [c.passed for c in demo_cases],
    }
    for name, lab in labels.items():
        assert geo.summary["mutual_information"][name] == pytest.approx(
            mutual_info_score(lab, geo.cluster), abs=1e-9
        )
        nmi = normalized_mutual_info_score(lab, geo.cluster)
        assert geo.summary["normalized_mutual_information"][name] == pytest.approx(nmi, abs=1e-9)


def test_the_same_cases_and_seed_give_the_same_bytes(demo_cases: list) -> None:
    a = compute_observability(demo_cases[:600], seed=7)
    b = compute_observability(list(demo_cases[:600]), seed=7)
    assert a is not None
    assert b is not None
    assert msgspec.json.encode(a.summary) == msgspec.json.encode(b.summary)
    assert (a.cluster, a.x, a.y) == (b.cluster, b.x, b.y)


def test_error_cases_are_left_out(demo_cases: list) -> None:
    import msgspec.structs

    errors = [
        msgspec.structs.replace(c, status="error", passed=None, risk_score=None, weighted_risk=None)
        for c in demo_cases[:50]
    ]
    geo = compute_observability(errors + demo_cases[50:100], seed=0)
    assert geo is not None
    assert geo.summary["n_cases"] == 50


def test_identical_cases_form_one_cluster(demo_cases: list) -> None:
    geo = compute_observability([demo_cases[0]] * 10, seed=0)
    assert geo is not None
    assert geo.summary["n_clusters"] == 1
    assert set(geo.cluster) == {0}


@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from("xyz"), st.integers(1, 5)),
        min_size=1,
        max_size=30,
    )
)
def test_weighted_mutual_information_equals_the_expanded_one(
    rows: list[tuple[str, str, int]],
) -> None:
    a = [r[0] for r in rows for _ in range(r[2])]
    b = [r[1] for r in rows for _ in range(r[2])]
    mi, nmi = mutual_information([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    assert mi == pytest.approx(mutual_info_score(a, b), abs=1e-9)
    assert nmi == pytest.approx(normalized_mutual_info_score(a, b), abs=1e-9)
    assert 0 <= nmi <= 1


@given(
    st.integers(1, 6),
    st.integers(1, 9),
    st.integers(1, 300),
    st.integers(1, 64),
    st.integers(0, 2**32 - 1),
)
def test_pair_points_are_the_same_bits_in_any_block(
    n_probes: int, n_verdicts: int, n_pairs: int, block: int, seed: int
) -> None:
    import numpy as np

    from faultline.observability.embedding import PairPoints

    rng = np.random.default_rng(seed)
    probe_part = rng.normal(size=(n_probes, 8))
    verdict_part = rng.normal(size=(n_verdicts, 8))
    verdict_part[0] = -probe_part[0]  # a pair whose point is zero stays zero
    pair_probe = rng.integers(0, n_probes, n_pairs)
    pair_verdict = rng.integers(0, n_verdicts, n_pairs)
    points = PairPoints(probe_part, verdict_part, pair_probe, pair_verdict)
    whole = points.take(np.arange(n_pairs))
    blocks = np.concatenate([points.take(slice(i, i + block)) for i in range(0, n_pairs, block)])
    assert blocks.tobytes() == whole.tobytes()
    rows = rng.integers(0, n_pairs, 17)
    assert points.take(rows).tobytes() == whole[rows].tobytes()
    norms = np.linalg.norm(whole, axis=1)
    assert np.all((np.abs(norms - 1) < 1e-12) | (norms == 0))
