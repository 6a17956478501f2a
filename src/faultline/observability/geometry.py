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
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.metrics._batch import Codes
from faultline.observability.clustering import choose_and_fit
from faultline.observability.documents import (
    CaseDocuments,
    VerdictTable,
    pair_documents,
    probe_document,
)
from faultline.observability.embedding import CaseEmbedding
from faultline.observability.pairs import RISK_SCALE, PairStats
from faultline.scoring.case import CaseScore

__all__ = [
    "DEFAULT_MIN_CASES",
    "Geometry",
    "PairColumns",
    "PairGeometry",
    "compute_observability",
    "geometry_of",
    "load_numeric_libraries",
    "mutual_information",
    "pair_geometry",
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
class PairGeometry:
    """The observability summary and the place of each distinct (probe, verdict) pair.

    Every case of a pair has the pair's cluster and point.

    Attributes:
        summary: The contract's ``observability`` object.
        cluster: Each pair's cluster.
        x: Each pair's x in the 2-D projection.
        y: Each pair's y in the 2-D projection.
    """

    summary: dict[str, Any]
    cluster: NDArray[np.int64]
    x: NDArray[np.float64]
    y: NDArray[np.float64]

    def for_cases(self, case_pair: NDArray[np.int64]) -> Geometry:
        """The geometry of each case, given the pair of each."""
        return Geometry(
            self.summary,
            self.cluster[case_pair].tolist(),
            self.x[case_pair].tolist(),
            self.y[case_pair].tolist(),
        )


@dataclass(frozen=True)
class PairColumns:
    """The labels of each distinct pair that the geometry measures clusters against.

    Attributes:
        category: Each pair's category (its probe's).
        severity: Each pair's severity tier.
        passed: Whether the pair's cases passed (the verdict says).
        risk: The total risk of the pair's cases, in ``RISK_SCALE`` units.
    """

    category: NDArray[np.object_]
    severity: NDArray[np.object_]
    passed: NDArray[np.bool_]
    risk: NDArray[np.int64]


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
    probes: dict[str, int] = {}
    probe_texts: list[str] = []
    labels: list[tuple[str, str]] = []
    table = VerdictTable()
    verdict = np.fromiter((table.add(c) for c in scored), dtype=np.int64, count=len(scored))
    for case in scored:
        if case.probe_id not in probes:
            probes[case.probe_id] = len(probe_texts)
            probe_texts.append(
                probe_document(
                    case.category, case.severity, case.expect, case.task, case.probe_input
                )
            )
            labels.append((case.category, case.severity))
    probe = np.fromiter((probes[c.probe_id] for c in scored), dtype=np.int64, count=len(scored))
    position = np.zeros((len(scored), 3), dtype=np.int64)
    position[:, 1] = np.arange(len(scored))
    risk = np.fromiter((c.risk_score or 0.0 for c in scored), dtype=np.float64, count=len(scored))
    pairs = PairStats.of_cases(probe, verdict, position, risk).in_report_order()
    passed = np.asarray([key[0] == "pass" for key in table.verdict_keys()], dtype=bool)
    geometry = pair_geometry(
        pairs,
        probe_texts,
        table.texts(),
        probe_category=np.asarray([c for c, _ in labels], dtype=object),
        probe_severity=np.asarray([s for _, s in labels], dtype=object),
        verdict_passed=passed,
        seed=seed,
        min_cases=min_cases,
        max_clusters=max_clusters,
    )
    return geometry.for_cases(pairs.locate(probe, verdict))


def pair_geometry(
    pairs: PairStats,
    probe_texts: Sequence[str],
    verdict_texts: Sequence[str],
    *,
    probe_category: NDArray[np.object_],
    probe_severity: NDArray[np.object_],
    verdict_passed: NDArray[np.bool_],
    seed: int = 0,
    min_cases: int = DEFAULT_MIN_CASES,
    max_clusters: int = 8,
) -> PairGeometry:
    """The failure geometry of scored cases given as their distinct pairs.

    Args:
        pairs: The pairs, in report order (:meth:`PairStats.in_report_order`).
        probe_texts: The probe document of each probe index.
        verdict_texts: The verdict document of each verdict index.
        probe_category: The category of each probe index.
        probe_severity: The severity of each probe index.
        verdict_passed: Whether each verdict index is a pass.
        seed: Seeds every random step.
        min_cases: Recorded in the summary (the caller checks it).
        max_clusters: The largest number of clusters considered.

    Returns:
        The geometry, one row per pair in the order of ``pairs``.
    """
    docs = pair_documents(list(probe_texts), list(verdict_texts), pairs.probe, pairs.verdict)
    docs = replace(docs, pair_weight=pairs.count.astype(np.float64))
    columns = PairColumns(
        category=probe_category[pairs.probe],
        severity=probe_severity[pairs.probe],
        passed=verdict_passed[pairs.verdict],
        risk=pairs.risk,
    )
    return geometry_of(docs, columns, seed=seed, min_cases=min_cases, max_clusters=max_clusters)


def geometry_of(
    docs: CaseDocuments,
    columns: PairColumns,
    *,
    seed: int = 0,
    min_cases: int = DEFAULT_MIN_CASES,
    max_clusters: int = 8,
) -> PairGeometry:
    """The failure geometry of distinct pairs given as documents and label columns.

    Args:
        docs: The pairs' probe and verdict documents, with their case counts.
        columns: Each pair's labels, in the same order.
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
    # Category and severity belong to the probe, pass/fail to the verdict: each is constant
    # over a pair, so the contingency tables are built over pairs, weighted by their cases.
    weight = docs.pair_weight.astype(np.int64)
    category, severity = _label_codes(columns.category), _label_codes(columns.severity)
    mi = {
        name: mutual_information(*_contingency(pair_cluster, codes, weight))
        for name, codes in (
            ("category", category.codes),
            ("severity", severity.codes),
            ("pass_fail", columns.passed.astype(np.int64)),
        )
    }
    summary = {
        "min_cases": min_cases,
        "n_cases": int(weight.sum()),
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
            columns,
            pair_cluster=pair_cluster,
            docs=docs,
            model=model,
            category=category,
            severity=severity,
        ),
    }
    return PairGeometry(summary, pair_cluster, projection[:, 0].copy(), projection[:, 1].copy())


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
    columns: PairColumns,
    *,
    pair_cluster: NDArray[np.int64],
    docs: CaseDocuments,
    model: CaseEmbedding,
    category: _LabelCodes,
    severity: _LabelCodes,
) -> list[dict[str, Any]]:
    out = []
    weight = docs.pair_weight.astype(np.int64)
    for cid in range(int(pair_cluster.max()) + 1):
        mask = pair_cluster == cid
        size = int(weight[mask].sum())
        if not size:
            continue
        cats = category.counts(mask, weight)
        failed = int(weight[mask][~columns.passed[mask]].sum())
        asked, happened = model.centroid_terms(docs, np.flatnonzero(mask), TOP_TERMS)
        out.append(
            {
                "id": cid,
                "size": size,
                "fail_rate": failed / size,
                "risk_mean": int(columns.risk[mask].sum()) / (size * RISK_SCALE),
                "top_terms": _interleave(asked, happened, TOP_TERMS),
                "top_probe_terms": asked,
                "top_verdict_terms": happened,
                "dominant_category": _dominant(cats),
                "dominant_severity": _dominant(severity.counts(mask, weight)),
                "categories": dict(sorted(cats.items(), key=lambda kv: (-kv[1], kv[0]))[:5]),
            }
        )
    return out


@dataclass(frozen=True)
class _LabelCodes:
    """Each pair's label as a code, and the labels in code order."""

    codes: NDArray[np.int64]
    labels: list[str]

    def counts(self, mask: NDArray[np.bool_], weights: NDArray[np.int64]) -> Counter[str]:
        """How many cases of the masked pairs carry each label."""
        totals = np.bincount(self.codes[mask], weights=weights[mask], minlength=len(self.labels))
        return Counter(
            {self.labels[i]: int(n) for i, n in enumerate(totals.astype(np.int64).tolist()) if n}
        )


def _label_codes(values: NDArray[Any]) -> _LabelCodes:
    book = Codes()
    return _LabelCodes(book.codes(values.tolist()), book.labels)


def _contingency(
    cluster: NDArray[np.int64], codes: NDArray[np.int64], weights: NDArray[np.int64]
) -> tuple[list[int], list[int], list[int]]:
    """The non-empty cells of the cluster × label table: cluster, label code and case count."""
    width = int(codes.max()) + 1
    totals = np.bincount(cluster * width + codes, weights=weights).astype(np.int64)
    filled = np.flatnonzero(totals)
    return (filled // width).tolist(), (filled % width).tolist(), totals[filled].tolist()


def _interleave(first: list[str], second: list[str], top: int) -> list[str]:
    """Alternate the two lists' terms, without repeats, up to ``top``."""
    out: list[str] = []
    for pair in zip(first, second, strict=False):
        out.extend(t for t in pair if t not in out)
    out.extend(t for t in first[len(second) :] + second[len(first) :] if t not in out)
    return out[:top]


def _dominant(counts: Counter[Any]) -> str:
    return str(min(counts, key=lambda v: (-counts[v], v)))
