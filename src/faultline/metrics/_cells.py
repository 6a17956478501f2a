"""The grouped tables :class:`~faultline.metrics.aggregate.MetricsAccumulator` keeps, and their slices.

Scored cases are counted per *cell*: a (category, model, expect, severity tier, passed,
boundary language) combination, with the cell's case count and its sums of safe and unsafe
signal hits. Exact moments of ``risk_score`` and ``weighted_risk``
(:class:`~faultline.metrics.exact.ExactMoments`) are kept per (category, model, expect).
Any slice the report needs (overall, a category, a model, an expectation, a model and an
expectation) is a mask over these few rows, so memory grows with the number of distinct
combinations, never with the number of cases. Outcomes per (model, probe) are a table of
three counts per pair (:func:`per_probe_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.metrics.exact import ExactMoments
from faultline.metrics.stats import Summary, rate, wilson_interval
from faultline.probes.model import SEVERITIES

__all__ = [
    "BOUNDARY_BIT",
    "CODE_LIMIT",
    "EXPECT_BITS",
    "GROUP_SHIFT",
    "PASSED_BIT",
    "TIER",
    "TIER_BITS",
    "Cells",
    "Slice",
    "cell_keys",
    "moment_group",
    "per_probe_metrics",
    "recode_keys",
]

TIER = {t: i for i, t in enumerate(SEVERITIES)}
"""Each severity tier's code."""
HIGH, CRITICAL = TIER["high"], TIER["critical"]
CODE_LIMIT = 1 << 24
"""Category and model codes must be below this to pack into a cell key."""

# A cell key packs, from the top: category (bits 30+), model (6-29), comply (5), tier (2-4),
# passed (1), boundary (0). Shifted right by 5 it is the (category, model, comply) group.
_CATEGORY, _MODEL, _COMPLY, _TIER_BIT, _PASSED = 30, 6, 5, 2, 1
_GROUP = _COMPLY
_CODE_MASK = CODE_LIMIT - 1
GROUP_SHIFT = _GROUP
"""A cell key shifted right by this many bits is its (category, model, comply) group key."""


EXPECT_BITS = {"refuse": 0, "comply": 1 << _COMPLY}
"""The low bits of a cell key for each expectation."""
TIER_BITS = {t: i << _TIER_BIT for t, i in TIER.items()}
"""The low bits of a cell key for each severity tier."""
PASSED_BIT = 1 << _PASSED
BOUNDARY_BIT = 1


def cell_keys(
    category: NDArray[np.int64], model: NDArray[np.int64], low: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Each case's cell key, from its category and model codes and its low bits.

    The low bits are ``EXPECT_BITS[expect] | TIER_BITS[severity] | PASSED_BIT * passed |
    BOUNDARY_BIT * boundary``, computed per case by the caller in one pass.
    """
    return (category << _CATEGORY) | (model << _MODEL) | low


def moment_group(keys: NDArray[np.int64]) -> NDArray[np.int64]:
    """The (category, model, comply) group of each cell key."""
    return keys >> _GROUP


def recode_keys(
    keys: NDArray[np.int64], categories: NDArray[np.int64], models: NDArray[np.int64], shift: int
) -> NDArray[np.int64]:
    """Cell keys (``shift`` 0) or group keys (``shift`` GROUP_SHIFT) with their codes mapped anew."""
    cat: NDArray[np.int64] = categories[keys >> (_CATEGORY - shift)]
    mod: NDArray[np.int64] = models[(keys >> (_MODEL - shift)) & _CODE_MASK]
    rest = keys & ((1 << (_MODEL - shift)) - 1)
    return (cat << (_CATEGORY - shift)) | (mod << (_MODEL - shift)) | rest


class Cells:
    """The cell table unpacked into columns, with the moments of each group.

    Args:
        keys: The cell keys.
        sums: Per cell: case count, safe hits, unsafe hits (shape ``(3, cells)``).
        moments: Per (category, model, comply) group key: the moments of ``risk_score``
            and of ``weighted_risk``.
    """

    def __init__(
        self,
        keys: NDArray[np.int64],
        sums: NDArray[np.int64],
        moments: Mapping[int, tuple[ExactMoments, ExactMoments]],
    ) -> None:
        self.category = keys >> _CATEGORY
        self.model = (keys >> _MODEL) & _CODE_MASK
        self.comply = (keys >> _COMPLY) & 1
        self.tier = (keys >> _TIER_BIT) & 7
        self.passed = (keys >> _PASSED) & 1
        self.boundary = keys & 1
        self.n, self.safe, self.unsafe = sums
        groups = np.asarray(sorted(moments), dtype=np.int64)
        self.m_category = groups >> (_CATEGORY - _GROUP)
        self.m_model = (groups >> (_MODEL - _GROUP)) & _CODE_MASK
        self.m_comply = groups & 1
        self.m_values = [moments[g] for g in groups.tolist()]

    @property
    def all(self) -> NDArray[np.bool_]:
        """A mask selecting every cell."""
        return np.ones(self.n.size, dtype=bool)

    def moments(
        self, category: int | None = None, model: int | None = None, comply: int | None = None
    ) -> tuple[ExactMoments, ExactMoments]:
        """The risk and weighted-risk moments of the groups that match (``None``: any)."""
        mask = np.ones(len(self.m_values), dtype=bool)
        for column, want in (
            (self.m_category, category),
            (self.m_model, model),
            (self.m_comply, comply),
        ):
            if want is not None:
                mask &= column == want
        risk, weighted = ExactMoments(), ExactMoments()
        for i in np.flatnonzero(mask).tolist():
            risk.merge(self.m_values[i][0])
            weighted.merge(self.m_values[i][1])
        return risk, weighted


class Slice:
    """The scored cases of some cells, with the statistics the report needs of them.

    Args:
        cells: The cell table.
        mask: Which cells.
        moments: The slice's risk and weighted-risk moments.
        weights: The run's severity weights.
        risk: Median, P90 and max of ``risk_score``, when the slice needs them.
    """

    def __init__(
        self,
        cells: Cells,
        mask: NDArray[np.bool_],
        moments: tuple[ExactMoments, ExactMoments],
        weights: dict[str, float],
        risk: Summary | None = None,
    ) -> None:
        self.c = cells
        self.mask = mask
        self.weights = weights
        self.n = self._sum(cells.n)
        self.passed = self._sum(cells.n, cells.passed == 1)
        risk_m, weighted_m = moments
        self.risk_mean, self.risk_std = risk_m.mean(), risk_m.pstdev()
        self.weighted_mean = weighted_m.mean()
        self.risk = risk or {}

    def _sum(self, column: NDArray[np.int64], where: NDArray[np.bool_] | None = None) -> int:
        mask = self.mask if where is None else self.mask & where
        return int(column[mask].sum())

    def count(self, key: str) -> int:
        """Cases with refusal or boundary language (``key`` is ``boundary``)."""
        return self._sum(self.c.n, getattr(self.c, key) == 1)

    def total(self, key: str) -> int:
        """The sum of ``safe`` or ``unsafe`` signal hits."""
        column: NDArray[np.int64] = getattr(self.c, key)
        return self._sum(column)

    def n_in(self, tier: int) -> int:
        """Cases in a severity tier."""
        return self._sum(self.c.n, self.c.tier == tier)

    def fails_in(self, tier: int) -> int:
        """Failed cases in a severity tier."""
        return self._sum(self.c.n, (self.c.tier == tier) & (self.c.passed == 0))

    def severity_weighted_pass_rate(self) -> float | None:
        """Σ weight over passed / Σ weight over scored."""
        total = sum(self.weights[t] * self.n_in(i) for t, i in TIER.items())
        passed = sum(self.weights[t] * (self.n_in(i) - self.fails_in(i)) for t, i in TIER.items())
        return rate(passed, total)

    def category_metrics(self) -> dict[str, Any]:
        """The ``by_category`` entry."""
        return {
            "n": self.n,
            "pass_rate": rate(self.passed, self.n),
            "pass_rate_ci95": wilson_interval(self.passed, self.n),
            "risk_mean": self.risk_mean,
            "risk_median": self.risk.get("median"),
            "weighted_risk_mean": self.weighted_mean,
            "critical_failures": self.fails_in(CRITICAL),
            "high_failures": self.fails_in(HIGH),
            "safe_signal_hits_mean": rate(self.total("safe"), self.n),
            "unsafe_signal_hits_mean": rate(self.total("unsafe"), self.n),
            "boundary_rate": rate(self.count("boundary"), self.n),
        }

    def slice_metrics(self, errors: int) -> dict[str, Any]:
        """A ``by_expect`` or ``by_model`` entry, given the slice's error cases."""
        return {
            "n": self.n + errors,
            "scored": self.n,
            "errors": errors,
            "passed": self.passed,
            "failed": self.n - self.passed,
            "pass_rate": rate(self.passed, self.n),
            "pass_rate_ci95": wilson_interval(self.passed, self.n),
            "risk_mean": self.risk_mean,
            "weighted_risk_mean": self.weighted_mean,
            "severity_weighted_pass_rate": self.severity_weighted_pass_rate(),
            "high_stakes_failures": self.fails_in(HIGH) + self.fails_in(CRITICAL),
        }


def per_probe_metrics(counts: NDArray[np.int64]) -> dict[str, Any]:
    """Outcomes per probe (per model) over its samples: the probe fails if any sample fails.

    A probe passes when every sample was scored and passed; one with no failed sample but
    an error is an error (unknown), never a pass. With one sample per probe these are the
    per-case numbers; with K samples ``fail_rate`` is the attack success rate at K.

    Args:
        counts: Per (model, probe): samples, failed samples, error samples (``(3, probes)``).
    """
    n = int(counts.shape[1])
    samples, failed_samples, errored_samples = counts
    failed = failed_samples > 0
    errored = errored_samples > 0
    n_failed = int(np.count_nonzero(failed))
    n_errors = int(np.count_nonzero(errored & ~failed))
    n_passed = n - n_failed - n_errors
    return {
        "probes": n,
        "samples": {
            "min": int(samples.min()) if n else None,
            "max": int(samples.max()) if n else None,
        },
        "passed": n_passed,
        "failed": n_failed,
        "errors": n_errors,
        "pass_rate": rate(n_passed, n_passed + n_failed),
        "pass_rate_ci95": wilson_interval(n_passed, n_passed + n_failed),
        "fail_rate": rate(n_failed, n_passed + n_failed),
    }
