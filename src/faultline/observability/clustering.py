"""Choose the number of clusters and fit KMeans on weighted points, deterministically.

The rule (docs/metrics.md): try every k from 2 to ``k_max = min(max_clusters,
floor(sqrt(n_cases / 2)), distinct points - 1)`` (at least 2: two distinct points are
always split; with one, every point is in cluster 0 and no k is tried); fit KMeans for each on a
weighted sample of at most ``select_max`` points; keep the k with the highest silhouette on a
seeded sample of at most ``silhouette_sample`` cases (ties go to the smaller k); fit the
chosen k on at most ``fit_max`` points and assign every point to its nearest centre, a block
of :data:`ASSIGN_BLOCK` points at a time. Clusters are then renumbered by size, largest first.
The points are asked for by row (:class:`Points`), so only the samples and one block are ever
held as a dense matrix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["ASSIGN_BLOCK", "ClusterChoice", "Points", "choose_and_fit"]

ASSIGN_BLOCK = 1 << 16
"""Points assigned to their nearest centre at once (a multiple of scikit-learn's 256-row chunks)."""


class Points(Protocol):
    """Points given by row: :class:`faultline.observability.embedding.PairPoints`."""

    def __len__(self) -> int: ...

    def take(self, rows: NDArray[np.int64] | slice) -> NDArray[np.float64]:
        """The points of ``rows``, one row each."""
        ...


@dataclass
class ClusterChoice:
    """The chosen clustering.

    Attributes:
        labels: The cluster of each distinct point, numbered by size (0 is the largest).
        k: The number of clusters.
        candidates: ``{"k": k, "silhouette": score}`` for every k tried.
    """

    labels: NDArray[np.int64]
    k: int
    candidates: list[dict[str, float | int | None]] = field(default_factory=list)


def choose_and_fit(
    points: Points,
    weights: Sequence[float] | NDArray[np.float64],
    *,
    seed: int,
    max_clusters: int = 8,
    silhouette_sample: int = 2000,
    fit_max: int = 20_000,
    select_max: int = 5_000,
) -> ClusterChoice:
    """Pick k by silhouette and cluster the weighted points.

    Args:
        points: One row per distinct point (L2-normalised embedding).
        weights: How many cases each point stands for.
        seed: Seeds KMeans and every sample.
        max_clusters: The largest k considered.
        silhouette_sample: How many cases the silhouette is measured on.
        fit_max: Fit the final KMeans on at most this many distinct points (a weighted
            sample); the others are then assigned to the nearest centre.
        select_max: Fit the candidate KMeans (two initialisations each) on at most this many
            of those points.
    """
    w = np.asarray(weights, dtype=np.float64)
    n_points, n_cases = len(points), int(w.sum())
    rng = np.random.default_rng(seed)
    fit_rows = _weighted_rows(rng, w, fit_max)
    fitted = points.take(fit_rows)
    distinct = _distinct_rows(fitted)
    if distinct < 2:
        return ClusterChoice(np.zeros(n_points, dtype=np.int64), 1)
    k_max = min(max(2, min(max_clusters, math.isqrt(n_cases // 2), distinct - 1)), distinct)
    select_rows = (
        fit_rows
        if fit_rows.size <= select_max
        else np.sort(rng.choice(fit_rows, select_max, replace=False))
    )
    sample = rng.choice(n_points, size=min(silhouette_sample, n_cases), replace=True, p=w / w.sum())
    sampled = points.take(sample)
    selected = fitted[np.searchsorted(fit_rows, select_rows)]
    best: tuple[float, int] | None = None
    candidates: list[dict[str, float | int | None]] = []
    for k in range(2, k_max + 1):
        model = _kmeans(selected, w[select_rows], k=k, seed=seed, n_init=2)
        score = _silhouette(sampled, _labels(model.predict(sampled)), seed)
        candidates.append({"k": k, "silhouette": score})
        if score is not None and (best is None or score > best[0]):
            best = (score, k)
    k = 2 if best is None else best[1]
    model = _kmeans(fitted, w[fit_rows], k=k, seed=seed, n_init=4)
    labels = np.concatenate(
        [
            _labels(model.predict(points.take(slice(start, start + ASSIGN_BLOCK))))
            for start in range(0, n_points, ASSIGN_BLOCK)
        ]
    )
    return ClusterChoice(_by_size(labels, w), len(np.unique(labels)), candidates)


def _weighted_rows(
    rng: np.random.Generator, w: NDArray[np.float64], limit: int
) -> NDArray[np.int64]:
    """All rows, or a sample of ``limit`` drawn in proportion to weight, in order."""
    if w.size <= limit:
        return np.arange(w.size)
    return np.sort(rng.choice(w.size, size=limit, replace=False, p=w / w.sum()))


def _kmeans(
    points: NDArray[np.float64], w: NDArray[np.float64], *, k: int, seed: int, n_init: int
) -> Any:
    from sklearn.cluster import KMeans

    model = KMeans(n_clusters=k, n_init=n_init, random_state=seed, max_iter=300)
    return model.fit(points, sample_weight=w)


def _labels(predicted: Any) -> NDArray[np.int64]:
    labels: NDArray[np.int64] = np.asarray(predicted, dtype=np.int64)
    return labels


def _silhouette(points: NDArray[np.float64], labels: NDArray[np.int64], seed: int) -> float | None:
    from sklearn.metrics import silhouette_score

    n_labels = len(np.unique(labels))
    if not 2 <= n_labels <= len(labels) - 1:
        return None
    return float(silhouette_score(points, labels, metric="euclidean", random_state=seed))


def _by_size(labels: NDArray[np.int64], w: NDArray[np.float64]) -> NDArray[np.int64]:
    """Renumber clusters by weighted size (largest first), ties by first appearance."""
    ids = np.unique(labels)
    sizes = {int(c): float(w[labels == c].sum()) for c in ids}
    first = {int(c): int(np.argmax(labels == c)) for c in ids}
    order = sorted(sizes, key=lambda c: (-sizes[c], first[c]))
    mapping = np.zeros(int(ids.max()) + 1, dtype=np.int64)
    for new, old in enumerate(order):
        mapping[old] = new
    out: NDArray[np.int64] = mapping[labels]
    return out


def _distinct_rows(points: NDArray[np.float64]) -> int:
    return int(np.unique(np.round(points, 12), axis=0).shape[0])
