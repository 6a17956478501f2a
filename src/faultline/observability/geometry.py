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
from faultline.observability.documents import build_documents
from faultline.observability.embedding import WeightedLSA
from faultline.scoring.case import CaseScore

__all__ = ["DEFAULT_MIN_CASES", "Geometry", "compute_observability", "mutual_information"]

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
    from threadpoolctl import threadpool_limits

    _load_numeric_libraries()
    scored = [c for c in cases if c.status != "error"]
    if len(scored) < min_cases or not scored:
        return None
    docs = build_documents(scored)
    weights = np.asarray(docs.weights, dtype=np.float64)
    with threadpool_limits(limits=1):  # one thread: the same bits on any machine
        lsa = WeightedLSA(seed=seed)
        embedding, projection, tfidf = lsa.fit_transform(docs.texts, docs.weights)
        choice = choose_and_fit(embedding, docs.weights, seed=seed, max_clusters=max_clusters)
    doc_cluster = choice.labels
    case_doc = np.asarray(docs.case_doc)
    case_cluster = doc_cluster[case_doc]
    # Category, severity and outcome are the same for every case of a document, so the
    # contingency tables are built over documents, weighted by how many cases share each.
    first = [scored[i] for i in docs.first_case]
    labels: dict[str, list[object]] = {
        "category": [c.category for c in first],
        "severity": [c.severity for c in first],
        "pass_fail": [bool(c.passed) for c in first],
    }
    clusters = doc_cluster.tolist()
    mi = {name: mutual_information(clusters, lab, docs.weights) for name, lab in labels.items()}
    summary = {
        "min_cases": min_cases,
        "n_cases": len(scored),
        "seed": seed,
        "embedding": {**lsa.describe(), "documents": len(docs.texts)},
        "clustering": {
            "method": "kmeans",
            "selection": "silhouette",
            "candidates": choice.candidates,
        },
        "n_clusters": choice.k,
        "mutual_information": {k: v[0] for k, v in mi.items()},
        "normalized_mutual_information": {k: v[1] for k, v in mi.items()},
        "clusters": _summaries(
            scored,
            case_cluster=case_cluster,
            doc_cluster=doc_cluster,
            weights=weights,
            tfidf=tfidf,
            vocabulary=lsa.vocabulary_,
        ),
    }
    xy = projection[case_doc]
    return Geometry(summary, case_cluster.tolist(), xy[:, 0].tolist(), xy[:, 1].tolist())


def _load_numeric_libraries() -> None:
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
    scored: Sequence[CaseScore],
    *,
    case_cluster: NDArray[np.int64],
    doc_cluster: NDArray[np.int64],
    weights: NDArray[np.float64],
    tfidf: Any,
    vocabulary: Sequence[str],
) -> list[dict[str, Any]]:
    passed = np.fromiter((bool(c.passed) for c in scored), dtype=bool, count=len(scored))
    risk = np.fromiter((c.risk_score or 0.0 for c in scored), dtype=np.float64, count=len(scored))
    category = np.asarray([c.category for c in scored], dtype=object)
    severity = np.asarray([c.severity for c in scored], dtype=object)
    words = np.asarray(vocabulary, dtype=object)
    out = []
    for cid in range(int(case_cluster.max()) + 1):
        mask = case_cluster == cid
        size = int(mask.sum())
        if not size:
            continue
        docs = np.flatnonzero(doc_cluster == cid)
        centroid = np.asarray(tfidf[docs].T @ weights[docs]).ravel() / weights[docs].sum()
        order = np.lexsort((words, -centroid))[:TOP_TERMS]
        cats = Counter(category[mask].tolist())
        out.append(
            {
                "id": cid,
                "size": size,
                "fail_rate": int(size - passed[mask].sum()) / size,
                "risk_mean": math.fsum(np.sort(risk[mask]).tolist()) / size,
                "top_terms": [str(words[i]) for i in order if centroid[i] > 0],
                "dominant_category": _dominant(cats),
                "dominant_severity": _dominant(Counter(severity[mask].tolist())),
                "categories": dict(sorted(cats.items(), key=lambda kv: (-kv[1], kv[0]))[:5]),
            }
        )
    return out


def _dominant(counts: Counter[Any]) -> str:
    return str(min(counts, key=lambda v: (-counts[v], v)))
