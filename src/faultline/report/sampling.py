"""A seeded sample of cases, stratified by category and outcome, for the HTML report.

A large run shows a sample in its page, not every case. Each stratum (category, status) gets
a share of the sample in proportion to its size (largest remainders, at least one case for
every stratum while room lasts), and within a stratum the cases with the smallest priority
are kept. A case's priority is a hash of the seed and the case's row, so the choice needs no
random state: it can be made in one pass over batches, in any batching, and again later
from cases.parquet, with the same result.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["StratifiedSampler", "priorities", "quotas"]

Stratum = tuple[str, str]

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def priorities(rows: NDArray[np.int64], seed: int) -> NDArray[np.uint64]:
    """A pseudo-random 64-bit priority for each row (splitmix64 of the seed and the row)."""
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        out: NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return out


def quotas(sizes: Mapping[Stratum, int], total: int) -> dict[Stratum, int]:
    """How many cases of each stratum to keep, ``total`` in all (everything if it fits)."""
    n = sum(sizes.values())
    if n <= total:
        return dict(sizes)
    strata = sorted(s for s, k in sizes.items() if k)
    out = {s: 0 for s in strata}
    room = total
    for s in strata[:room]:  # every stratum is seen, while there is room
        out[s] = 1
    room -= sum(out.values())
    rest = {s: sizes[s] - out[s] for s in strata}
    left = sum(rest.values())
    if room <= 0 or left == 0:
        return out
    shares = {s: room * rest[s] / left for s in strata}
    for s in strata:
        out[s] += int(shares[s])
    leftover = room - sum(int(v) for v in shares.values())
    for s in sorted(strata, key=lambda s: (-(shares[s] - int(shares[s])), s))[:leftover]:
        out[s] += 1
    return out


class StratifiedSampler:
    """Keeps, per stratum, the rows of smallest priority, up to the stratum's quota.

    Args:
        sizes: How many cases each stratum has in the whole run.
        total: The sample size.
        seed: Seeds the priorities.
    """

    def __init__(self, sizes: Mapping[Stratum, int], total: int, seed: int) -> None:
        self.quota = quotas(sizes, total)
        self.seed = seed
        self.strata = sorted(self.quota)
        self.code = {s: i for i, s in enumerate(self.strata)}
        self._heaps: list[list[tuple[int, int, Any]]] = [[] for _ in self.strata]
        # A row can enter a stratum's sample while its priority is below the threshold.
        self._threshold = np.full(len(self.strata), np.iinfo(np.uint64).max, dtype=np.uint64)
        self._open = np.asarray([self.quota[s] > 0 for s in self.strata], dtype=bool)

    def codes(self, strata: list[Stratum]) -> NDArray[np.int64]:
        """The code of each stratum (-1 for one the run does not have)."""
        return np.fromiter(
            (self.code.get(s, -1) for s in strata), dtype=np.int64, count=len(strata)
        )

    def wants(self, rows: NDArray[np.int64], codes: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which rows could still enter the sample (a cheap filter before building items)."""
        known = codes >= 0
        safe = np.where(known, codes, 0)
        out: NDArray[np.bool_] = (
            known & self._open[safe] & (priorities(rows, self.seed) <= self._threshold[safe])
        )
        return out

    def offer(self, rows: NDArray[np.int64], codes: NDArray[np.int64], items: list[Any]) -> None:
        """Consider rows: their global row numbers, stratum codes, and what to keep of each."""
        prio = priorities(rows, self.seed).tolist()
        for p, row, code, item in zip(prio, rows.tolist(), codes.tolist(), items, strict=True):
            # A stratum the run lacks, or one with no room (more strata than the sample holds).
            if code < 0 or not self._open[code]:
                continue
            heap, k = self._heaps[code], self.quota[self.strata[code]]
            entry = (-p, -row, item)
            if len(heap) < k:
                heapq.heappush(heap, entry)
            elif (-heap[0][0], -heap[0][1]) > (p, row):
                heapq.heapreplace(heap, entry)
            else:
                continue
            if len(heap) == k:
                self._threshold[code] = np.uint64(-heap[0][0])

    def chosen(self) -> list[tuple[int, Any]]:
        """The sample as ``(row, item)``, by row."""
        return sorted(
            ((-row, item) for heap in self._heaps for _, row, item in heap), key=lambda e: e[0]
        )
