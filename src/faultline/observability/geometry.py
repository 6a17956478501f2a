"""The failure geometry: embed the cases, cluster them, and measure what the clusters follow.

Mutual information (in nats) between the cluster of each case and its category, severity
and pass/fail outcome tells whether the clusters follow the threat family, the stakes or
the verdict. Normalised MI divides by the arithmetic mean of the two entropies (scikit-learn's
default); it is 1 when both labelings are constant and 0 when only one is.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.observability.clustering import choose_and_fit
from faultline.observability.documents import CaseDocuments, build_documents
from faultline.observability.embedding import CaseEmbedding
from faultline.scoring.case import CaseScore

__all__ = [
    "DEFAULT_MIN_CASES",
    "CaseColumns",
    "Geometry",
    "compute_observability",
    "geometry_of",
    "load_numeric_libraries",
    "mutual_information",
]

DEFAULT_MIN_CASES = 5
TOP_TERMS = 8


@dataclass(frozen=True)
class Geometry:
    """The observability summary and each case's place in it.

    Attributes:
        summary: The contract's ``observability`` object.
        cluster: The cluster of each scored case, in input order.
        x: Each case's x in the 2-D projection.
        y: Each case's y in the 2-D projection.
    """

    summary: dict[str, Any]
    cluster: list[int]
    x: list[float]
    y: list[float]


@dataclass(frozen=True)
class CaseColumns:
    """The labels of each scored case that the geometry measures clusters against.

    Attributes:
        category: Each case's category.
        severity: Each case's severity tier.
        passed: Whether each case passed.
        risk: Each case's risk score.
    """

    category: NDArray[np.object_]
    severity: NDArray[np.object_]
    passed: NDArray[np.bool_]
    risk: NDArray[np.float64]

    @classmethod
    def of(cls, cases: Sequence[CaseScore]) -> CaseColumns:
        """The columns of scored cases."""
        n = len(cases)
        return cls(
            category=np.asarray([c.category for c in cases], dtype=object),
            severity=np.asarray([c.severity for c in cases], dtype=object),
            passed=np.fromiter((bool(c.passed) for c in cases), dtype=bool, count=n),
            risk=np.fromiter((c.risk_score or 0.0 for c in cases), dtype=np.float64, count=n),
        )


def compute_observability(
    cases: Sequence[CaseScore],
    *,
    seed: int = 0,
    min_cases: int = DEFAULT_MIN_CASES,
    max_clusters: int = 8,
) -> Geometry | None:
    """Build the failure geometry of the scored cases.

    Args:
        cases: The run's cases; error cases are left out.
        seed: Seeds every random step, so the same cases give the same geometry.
        min_cases: Below this many scored cases there is no geometry (``None``).
        max_clusters: The largest number of clusters considered.
    """
    scored = [c for c in cases if c.status != "error"]
    if len(scored) < min_cases or not scored:
        return None
    return geometry_of(
        build_documents(scored),
        CaseColumns.of(scored),
        seed=seed,
        min_cases=min_cases,
        max_clusters=max_clusters,
    )


def geometry_of(
    docs: CaseDocuments,
    columns: CaseColumns,
    *,
    seed: int = 0,
    min_cases: int = DEFAULT_MIN_CASES,
    max_clusters: int = 8,
) -> Geometry:
    """The failure geometry of scored cases given as documents and label columns.

    Args:
        docs: Each case's probe and verdict documents.
        columns: Each case's labels, in the same order.
        seed: Seeds every random step.
        min_cases: Recorded in the summary (the caller checks it).
        max_clusters: The largest number of clusters considered.
    """
    from threadpoolctl import threadpool_limits

    load_numeric_libraries()
    with threadpool_limits(limits=1):  # one thread: the same bits on any run
        model = CaseEmbedding(seed=seed)
        embedding, projection = model.fit_transform(docs)
        choice = choose_and_fit(embedding, docs.pair_weight, seed=seed, max_clusters=max_clusters)
    pair_cluster = choice.labels
    case_cluster = pair_cluster[docs.case_pair]
    # Category and severity belong to the probe, pass/fail to the verdict: each is constant
    # over a pair, so the contingency tables are built over pairs, weighted by their cases.
    first = _first_case_of_pair(docs.case_pair, len(docs.pair_weight))
    labels: dict[str, list[object]] = {
        "category": columns.category[first].tolist(),
        "severity": columns.severity[first].tolist(),
        "pass_fail": columns.passed[first].tolist(),
    }
    weights = docs.pair_weight.astype(np.int64).tolist()
    clusters = pair_cluster.tolist()
    mi = {name: mutual_information(clusters, lab, weights) for name, lab in labels.items()}
    summary = {
        "min_cases": min_cases,
        "n_cases": int(docs.case_pair.size),
        "seed": seed,
        "embedding": {
            **model.describe(),
            "distinct_probes": len(docs.probe_texts),
            "distinct_verdicts": len(docs.verdict_texts),
            "distinct_pairs": len(docs.pair_weight),
        },
        "clustering": {
            "method": "kmeans",
            "selection": "silhouette",
            "candidates": choice.candidates,
        },
        "n_clusters": choice.k,
        "mutual_information": {k: v[0] for k, v in mi.items()},
        "normalized_mutual_information": {k: v[1] for k, v in mi.items()},
        "clusters": _summaries(
            columns, case_cluster=case_cluster, pair_cluster=pair_cluster, docs=docs, model=model
        ),
    }
    xy = projection[docs.case_pair]
    return Geometry(summary, case_cluster.tolist(), xy[:, 0].tolist(), xy[:, 1].tolist())


def _first_case_of_pair(case_pair: NDArray[np.int64], n_pairs: int) -> NDArray[np.int64]:
    first = np.full(n_pairs, -1, dtype=np.int64)
    first[case_pair[::-1]] = np.arange(case_pair.size - 1, -1, -1)
    return first


def load_numeric_libraries() -> None:
    """Import every library whose BLAS or OpenMP pools the geometry uses.

    ``threadpool_limits`` only limits pools that are loaded when it is entered; a library
    first loaded inside the block would run multi-threaded, and its reductions would then
    differ in the last bits from a single-threaded run.
    """
    import sklearn.cluster
    import sklearn.decomposition
    import sklearn.feature_extraction.text
    import sklearn.metrics  # noqa: F401


def mutual_information(
    a: Sequence[object], b: Sequence[object], weights: Sequence[int] | None = None
) -> tuple[float, float]:
    """Mutual information (nats) between two labelings, and its normalised form.

    Args:
        a: The first label of each item.
        b: The second label of each item.
        weights: How many cases each item stands for (default: 1 each).
    """
    w = [1] * len(a) if weights is None else list(weights)
    n = sum(w)
    if n == 0:
        return 0.0, 0.0
    joint: Counter[tuple[object, object]] = Counter()
    ca: Counter[object] = Counter()
    cb: Counter[object] = Counter()
    for x, y, k in zip(a, b, w, strict=True):
        joint[(x, y)] += k
        ca[x] += k
        cb[y] += k
    mi = math.fsum(nxy / n * math.log(nxy * n / (ca[x] * cb[y])) for (x, y), nxy in joint.items())
    mi = max(mi, 0.0)
    ha, hb = _entropy(ca, n), _entropy(cb, n)
    if ha == 0 and hb == 0:
        return mi, 1.0
    if ha == 0 or hb == 0:
        return mi, 0.0
    return mi, min(1.0, mi / ((ha + hb) / 2))


def _entropy(counts: Counter[Any], n: int) -> float:
    return -math.fsum(c / n * math.log(c / n) for c in counts.values())


def _summaries(
    columns: CaseColumns,
    *,
    case_cluster: NDArray[np.int64],
    pair_cluster: NDArray[np.int64],
    docs: CaseDocuments,
    model: CaseEmbedding,
) -> list[dict[str, Any]]:
    out = []
    for cid in range(int(case_cluster.max()) + 1):
        mask = case_cluster == cid
        size = int(mask.sum())
        if not size:
            continue
        cats = Counter(columns.category[mask].tolist())
        asked, happened = model.centroid_terms(docs, np.flatnonzero(pair_cluster == cid), TOP_TERMS)
        out.append(
            {
                "id": cid,
                "size": size,
                "fail_rate": int(size - columns.passed[mask].sum()) / size,
                "risk_mean": math.fsum(np.sort(columns.risk[mask]).tolist()) / size,
                "top_terms": _interleave(asked, happened, TOP_TERMS),
                "top_probe_terms": asked,
                "top_verdict_terms": happened,
                "dominant_category": _dominant(cats),
                "dominant_severity": _dominant(Counter(columns.severity[mask].tolist())),
                "categories": dict(sorted(cats.items(), key=lambda kv: (-kv[1], kv[0]))[:5]),
            }
        )
    return out


def _interleave(first: list[str], second: list[str], top: int) -> list[str]:
    """Alternate the two lists' terms, without repeats, up to ``top``."""
    out: list[str] = []
    for pair in zip(first, second, strict=False):
        out.extend(t for t in pair if t not in out)
    out.extend(t for t in first[len(second) :] + second[len(first) :] if t not in out)
    return out[:top]


def _dominant(counts: Counter[Any]) -> str:
    return str(min(counts, key=lambda v: (-counts[v], v)))
