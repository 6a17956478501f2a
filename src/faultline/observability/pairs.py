"""Scored cases reduced to their distinct (probe, verdict) pairs, mergeable across batches.

The failure geometry only needs, for each distinct pair of a probe and a verdict: how many
cases share it, where its first case stands in the report's order (documents are numbered by
first appearance), and the total risk of its cases. Batches scored apart (in worker processes
or on a cluster) reduce their cases to :class:`PairStats`; the parent merges them, so it
never holds a column per case.

Risk totals are kept in fixed point (:data:`RISK_SCALE` units per 1.0, rounded once per case)
as integers: integer sums are exact, so a total is the same whatever the batching. A
cluster's ``risk_mean`` is therefore exact for risks on a 2**-32 grid and within 2**-33 of the
float mean otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

__all__ = ["RISK_SCALE", "PairStats", "fixed_risk"]

RISK_SCALE = 1 << 32
"""Fixed-point units per 1.0 of risk in the pair totals."""


def fixed_risk(risk: NDArray[np.float64]) -> NDArray[np.int64]:
    """Risk scores in [0, 1] as fixed-point integers."""
    fixed: NDArray[np.int64] = np.rint(risk * RISK_SCALE).astype(np.int64)
    return fixed


@dataclass(frozen=True)
class PairStats:
    """Distinct (probe, verdict) pairs of scored cases.

    Attributes:
        probe: Each pair's probe (an index in the probe set).
        verdict: Each pair's verdict (an index in a verdict table).
        count: How many cases share the pair.
        first: The smallest order key of the pair's cases, one row per pair: the report
            sorts cases by (model rank, probe, sample), or by position for a list of cases.
        risk: The total risk of the pair's cases, in :data:`RISK_SCALE` units.
    """

    probe: NDArray[np.int64]
    verdict: NDArray[np.int64]
    count: NDArray[np.int64]
    first: NDArray[np.int64]
    risk: NDArray[np.int64]

    @classmethod
    def of_cases(
        cls,
        probe: NDArray[np.int64],
        verdict: NDArray[np.int64],
        order_key: NDArray[np.int64],
        risk: NDArray[np.float64],
    ) -> PairStats:
        """The pairs of scored cases.

        Args:
            probe: Each case's probe.
            verdict: Each case's verdict.
            order_key: Each case's order key, one row of three integers per case.
            risk: Each case's risk score.
        """
        return cls(
            probe, verdict, np.ones(probe.size, dtype=np.int64), order_key, fixed_risk(risk)
        )._grouped()

    @classmethod
    def empty(cls) -> PairStats:
        """No pairs."""
        none = np.zeros(0, dtype=np.int64)
        return cls(none, none, none, np.zeros((0, 3), dtype=np.int64), none)

    @classmethod
    def merged(cls, parts: Sequence[PairStats]) -> PairStats:
        """The pairs of several batches together (their verdicts in one table)."""
        if not parts:
            return cls.empty()
        return cls(
            np.concatenate([p.probe for p in parts]),
            np.concatenate([p.verdict for p in parts]),
            np.concatenate([p.count for p in parts]),
            np.concatenate([p.first for p in parts]),
            np.concatenate([p.risk for p in parts]),
        )._grouped()

    def with_verdicts(self, mapping: NDArray[np.int64]) -> PairStats:
        """The same pairs with each verdict renumbered through ``mapping``."""
        return PairStats(self.probe, mapping[self.verdict], self.count, self.first, self.risk)

    def in_report_order(self) -> PairStats:
        """The pairs sorted by the place of their first case."""
        order = np.lexsort(self.first.T[::-1])
        return PairStats(
            self.probe[order],
            self.verdict[order],
            self.count[order],
            self.first[order],
            self.risk[order],
        )

    def codes(self) -> NDArray[np.int64]:
        """One integer per pair, to find a case's pair with :meth:`locate`."""
        return _codes(self.probe, self.verdict)

    def locate(self, probe: NDArray[np.int64], verdict: NDArray[np.int64]) -> NDArray[np.int64]:
        """The index of each (probe, verdict) in these pairs (every one must be present)."""
        order, sorted_codes = self._lookup
        found: NDArray[np.int64] = order[np.searchsorted(sorted_codes, _codes(probe, verdict))]
        return found

    @cached_property
    def _lookup(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The pairs' codes sorted, and where each sorted code is: built once per table."""
        codes = self.codes()
        order = np.argsort(codes, kind="stable")
        return order, codes[order]

    def _grouped(self) -> PairStats:
        if self.probe.size == 0:
            return PairStats.empty()
        unique, inverse = np.unique(_codes(self.probe, self.verdict), return_inverse=True)
        inverse = inverse.ravel()
        n = unique.size
        count = np.zeros(n, dtype=np.int64)
        np.add.at(count, inverse, self.count)
        risk = np.zeros(n, dtype=np.int64)
        np.add.at(risk, inverse, self.risk)
        keys = self.first.T
        order = np.lexsort((keys[2], keys[1], keys[0], inverse))
        starts = np.flatnonzero(np.r_[True, np.diff(inverse[order]) != 0])
        first_rows = order[starts]
        return PairStats(
            self.probe[first_rows], self.verdict[first_rows], count, self.first[first_rows], risk
        )


def _codes(probe: NDArray[np.int64], verdict: NDArray[np.int64]) -> NDArray[np.int64]:
    # Probe indices and verdict indices are both far below 2**31.
    codes: NDArray[np.int64] = (probe.astype(np.int64) << 31) | verdict.astype(np.int64)
    return codes
