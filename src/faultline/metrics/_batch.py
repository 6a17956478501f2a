"""Reading cases for :class:`~faultline.metrics.aggregate.MetricsAccumulator`, batch by batch.

A batch of scored cases is read into columns once (:class:`Batch`), with every score checked
before anything is counted; labels become small integer codes (:class:`Codes`); and the few
cases that may be among the worst are picked with numpy (:func:`worst_candidates`) before
their ids break ties in Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.metrics._cells import BOUNDARY_BIT, EXPECT_BITS, PASSED_BIT, TIER_BITS
from faultline.scoring.case import CaseScore

__all__ = [
    "UNSPECIFIED_MODEL",
    "Batch",
    "Codes",
    "case_key",
    "entry_key",
    "worst_candidates",
    "worst_entry",
]

UNSPECIFIED_MODEL = "unspecified"
"""The ``by_model`` key for cases whose response named no model."""


class Codes:
    """Interns labels (categories, models, probes) as small integers, in first-seen order."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def code(self, label: str) -> int:
        """The label's code, interning it if new."""
        return self.index.setdefault(label, len(self.index))

    def codes(self, labels: Sequence[str]) -> NDArray[np.int64]:
        """The code of each label, interning new ones in first-seen order."""
        self._intern(dict.fromkeys(labels))
        return np.fromiter(map(self.index.__getitem__, labels), np.int64, len(labels))

    def _intern(self, unique: Iterable[str]) -> None:
        index = self.index
        new = [label for label in unique if label not in index]
        index.update(zip(new, range(len(index), len(index) + len(new)), strict=True))

    @property
    def labels(self) -> list[str]:
        """The labels, in code order."""
        return list(self.index)

    def mapping(self, other: Codes) -> NDArray[np.int64]:
        """Each of ``other``'s codes as a code of this one (interning labels new here)."""
        self._intern(other.index)
        return np.fromiter(map(self.index.__getitem__, other.index), np.int64, len(other.index))


class Batch:
    """The columns of a batch of scored cases, read field by field and checked.

    Raises:
        ValueError: A ``risk_score`` or ``weighted_risk`` is not in [0, 1].
    """

    def __init__(self, scored: Sequence[CaseScore]) -> None:
        n = len(scored)
        self.risk = _floats([c.risk_score for c in scored])
        self.weighted = _floats([c.weighted_risk for c in scored])
        for name, values in (("risk_score", self.risk), ("weighted_risk", self.weighted)):
            ok = (values >= 0.0) & (values <= 1.0)
            if not ok.all():
                case = scored[int(np.argmin(ok))]
                raise ValueError(
                    f"case {case.case_id!r} has {name} {getattr(case, name)!r}; "
                    "scores must be in [0, 1]"
                )
        self.category = [c.category for c in scored]
        self.model = [c.model or UNSPECIFIED_MODEL for c in scored]
        expect, tier, passed, boundary = EXPECT_BITS, TIER_BITS, PASSED_BIT, BOUNDARY_BIT
        self.low = np.fromiter(
            [
                expect[c.expect]
                | tier[c.severity]
                | (passed if c.passed else 0)
                | (boundary if c.boundary_or_refusal_signal else 0)
                for c in scored
            ],
            np.int64,
            n,
        )
        self.hits = np.stack(
            [
                np.ones(n, dtype=np.int64),
                np.fromiter([c.safe_signal_hits for c in scored], np.int64, n),
                np.fromiter([c.unsafe_signal_hits for c in scored], np.int64, n),
            ]
        )
        self.failure_modes = [c.detected_failure_modes for c in scored]


def _floats(values: list[float | None]) -> NDArray[np.float64]:
    """A float64 column (``None``, which a scored case never has, becomes NaN)."""
    try:
        return np.fromiter(values, np.float64, len(values))
    except TypeError:
        return np.asarray(values, dtype=np.float64)


def worst_candidates(
    weighted: NDArray[np.float64], risk: NDArray[np.float64], k: int
) -> NDArray[np.intp]:
    """The cases that may be among the ``k`` worst: not behind ``k`` others on both scores.

    Only ties on (weighted risk, risk) are left for :func:`case_key`'s case id to break.
    """
    if weighted.size <= k:
        return np.arange(weighted.size)
    kth = np.partition(weighted, weighted.size - k)[weighted.size - k]
    found = np.flatnonzero(weighted >= kth)
    if found.size > k:
        w, r = weighted[found], risk[found]
        last = np.lexsort((-r, -w))[k - 1]
        found = found[(w > w[last]) | ((w == w[last]) & (r >= r[last]))]
    return found


def case_key(case: CaseScore) -> tuple[float, float, str]:
    """The worst-case order of a case: highest weighted risk, then risk, then case id."""
    return (-(case.weighted_risk or 0.0), -(case.risk_score or 0.0), case.case_id)


def entry_key(entry: dict[str, Any]) -> tuple[float, float, str]:
    """:func:`case_key` of a ``worst_cases`` entry."""
    return (-entry["weighted_risk"], -entry["risk_score"], entry["case_id"])


def worst_entry(case: CaseScore) -> dict[str, Any]:
    """A case's ``worst_cases`` entry."""
    return {
        "case_id": case.case_id,
        "probe_id": case.probe_id,
        "category": case.category,
        "severity": case.severity,
        "risk_score": case.risk_score,
        "weighted_risk": case.weighted_risk,
    }
