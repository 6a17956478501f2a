"""Quantiles of scores in [0, 1] per group: exact while small, a fixed histogram once large.

:class:`GroupedQuantiles` keeps the values of each group (a category, say) as float64 arrays,
so its quantiles are exact: the same linear interpolation between order statistics as
:func:`faultline.metrics.stats.summarize`. Asked to :meth:`~GroupedQuantiles.sketch`, it
bins every value into :data:`BINS` equal bins over [0, 1] (1.0 goes in the last bin) and
keeps, beside the counts, each group's exact minimum and maximum. Quantiles are then read
from the bins: the order statistics ``floor(pos)`` and ``ceil(pos)``, ``pos = (n - 1) q``,
are each taken as the midpoint of the bin holding them (clamped to the exact minimum and
maximum, which only brings it closer), then interpolated linearly as in the exact case.

Bound: an order statistic lies in its bin, so its midpoint is at most half a bin from it, and
so is any interpolation between two of them; the sketched quantile is within
:data:`MAX_ABS_ERROR` (one bin width, 1/65536, leaving room for rounding) of the exact one.
The maximum stays exact. Binning is a pure function of each value, so the sketch, like the
values, is the same whatever the batching or merge order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faultline.metrics.stats import quantile_sorted

__all__ = ["BINS", "MAX_ABS_ERROR", "GroupedQuantiles", "Quantiles"]

BINS = 1 << 16
"""Equal bins over [0, 1] in a sketch."""
MAX_ABS_ERROR = 1 / BINS
"""The most a sketched quantile is off the exact one."""
_COMPACT_BELOW = 1 << 17
"""Stored arrays are joined while this small, so tiny batches cost no per-array overhead."""


@dataclass(frozen=True)
class Quantiles:
    """The median, P90 and maximum of some values (``None`` each for no values)."""

    median: float | None
    p90: float | None
    max: float | None


class GroupedQuantiles:
    """Values in [0, 1] per integer group, for their quantiles, exact or sketched."""

    def __init__(self) -> None:
        self.values: dict[int, list[NDArray[np.float64]]] = {}
        self.hist: dict[int, NDArray[np.int64]] | None = None
        self.low: dict[int, float] = {}
        self.high: dict[int, float] = {}

    @property
    def sketched(self) -> bool:
        """Whether the values have been binned (quantiles within :data:`MAX_ABS_ERROR`)."""
        return self.hist is not None

    def add(self, values: NDArray[np.float64], groups: NDArray[np.int64]) -> None:
        """Fold in ``values``, each in the group ``groups`` gives it.

        Raises:
            ValueError: A value is outside [0, 1] (or NaN).
        """
        if not values.size:
            return
        if not ((values >= 0.0) & (values <= 1.0)).all():
            bad = values[~((values >= 0.0) & (values <= 1.0))][0]
            raise ValueError(f"scores must be in [0, 1] for their quantiles, got {bad}")
        order = np.argsort(groups, kind="stable")
        keys, values = groups[order], values[order]
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        bounds = [*starts.tolist(), int(keys.size)]
        for i, group in enumerate(keys[starts].tolist()):
            self._add_group(group, values[bounds[i] : bounds[i + 1]])

    def _add_group(self, group: int, part: NDArray[np.float64]) -> None:
        low, high = float(part.min()), float(part.max())
        self.low[group] = min(low, self.low.get(group, low))
        self.high[group] = max(high, self.high.get(group, high))
        if self.hist is None:
            _push(self.values.setdefault(group, []), part)
        else:
            found = self.hist.get(group)
            if found is None:
                found = self.hist[group] = np.zeros(BINS, dtype=np.int64)
            np.add.at(found, _bins(part), 1)

    def merge(self, other: GroupedQuantiles, mapping: Mapping[int, int] | None = None) -> None:
        """Fold in another's values, its group ``g`` becoming ``mapping[g]`` (default ``g``)."""
        if other.hist is not None:
            self.sketch()
        for group, parts in other.values.items():
            for part in parts:
                self._add_group(group if mapping is None else mapping[group], part)
        for group, counts in (other.hist or {}).items():
            target = group if mapping is None else mapping[group]
            assert self.hist is not None  # sketched above
            found = self.hist.get(target)
            self.hist[target] = counts.copy() if found is None else found + counts
            self.low[target] = min(other.low[group], self.low.get(target, math.inf))
            self.high[target] = max(other.high[group], self.high.get(target, -math.inf))

    def sketch(self) -> None:
        """Bin the values (once; later values are binned as they come)."""
        if self.hist is not None:
            return
        self.hist = {
            group: np.bincount(_bins(np.concatenate(parts)), minlength=BINS)
            for group, parts in self.values.items()
        }
        self.values = {}

    def quantiles(self, groups: Iterable[int] | None = None) -> Quantiles:
        """Median, P90 and maximum over ``groups`` together (default: every group)."""
        chosen = sorted(self.low if groups is None else set(groups) & set(self.low))
        if not chosen:
            return Quantiles(None, None, None)
        low = min(self.low[g] for g in chosen)
        high = max(self.high[g] for g in chosen)
        if self.hist is None:
            arr = np.concatenate([part for g in chosen for part in self.values[g]])
            arr.sort()
            return Quantiles(quantile_sorted(arr, 0.5), quantile_sorted(arr, 0.9), float(arr[-1]))
        counts = np.cumsum(sum((self.hist[g] for g in chosen), np.zeros(BINS, dtype=np.int64)))
        return Quantiles(
            _sketched_quantile(counts, 0.5, low, high),
            _sketched_quantile(counts, 0.9, low, high),
            high,
        )


def _push(parts: list[NDArray[np.float64]], part: NDArray[np.float64]) -> None:
    """Append ``part``, joining small trailing arrays (a binary counter: O(log n) arrays)."""
    parts.append(part)
    while len(parts) > 1 and parts[-2].size <= parts[-1].size and parts[-2].size < _COMPACT_BELOW:
        last = parts.pop()
        parts[-1] = np.concatenate((parts[-1], last))


def _bins(values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Each value's bin: ``floor(v * BINS)``, exact (a power of two), 1.0 in the last bin."""
    return np.minimum((values * BINS).astype(np.int64), BINS - 1)


def _sketched_quantile(cumulative: NDArray[np.int64], q: float, low: float, high: float) -> float:
    """The ``q`` quantile from cumulative bin counts, order statistics at bin midpoints."""
    pos = (int(cumulative[-1]) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    found = np.searchsorted(cumulative, [lo, hi], side="right").tolist()
    a, b = (min(high, max(low, (i + 0.5) / BINS)) for i in found)
    return float(a + (b - a) * (pos - lo))
