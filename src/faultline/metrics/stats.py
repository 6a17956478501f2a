"""Order-independent statistics: the same multiset of numbers gives the same bits.

Every function sorts its input first, so a metric merged from partial results in any order,
or computed in another process, is identical to the last bit. Undefined statistics (the
mean of nothing) are ``None``, never NaN or 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "MCNEMAR_EXACT_BELOW",
    "Summary",
    "mcnemar_test",
    "quantile_sorted",
    "rate",
    "summarize",
    "two_proportion_test",
    "wilson_interval",
]

Summary = dict[str, float | None]

MCNEMAR_EXACT_BELOW = 25
"""McNemar's test is exact (binomial) below this many discordant pairs, chi-square above."""


def summarize(values: NDArray[np.float64] | Sequence[float]) -> Summary:
    """Mean, median, population standard deviation, P90 and max of ``values``.

    Quantiles use linear interpolation between order statistics.

    Args:
        values: The numbers, in any order.
    """
    arr = np.sort(np.asarray(values, dtype=np.float64))
    n = arr.size
    if n == 0:
        return {"mean": None, "median": None, "std": None, "p90": None, "max": None}
    mean = math.fsum(arr.tolist()) / n
    std = math.sqrt(math.fsum(((arr - mean) ** 2).tolist()) / n)
    return {
        "mean": mean,
        "median": quantile_sorted(arr, 0.5),
        "std": std,
        "p90": quantile_sorted(arr, 0.9),
        "max": float(arr[-1]),
    }


def quantile_sorted(sorted_arr: NDArray[np.float64], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolating linearly between order statistics.

    Args:
        sorted_arr: The values, sorted ascending; not empty.
        q: The quantile, in [0, 1].
    """
    pos = (sorted_arr.size - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return float(sorted_arr[lo] + (sorted_arr[hi] - sorted_arr[lo]) * (pos - lo))


def rate(part: float, whole: float) -> float | None:
    """``part / whole``, or ``None`` when ``whole`` is 0."""
    return part / whole if whole else None


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> list[float] | None:
    """The Wilson score interval for a proportion (95% by default), or ``None`` when n is 0.

    The ends are exact where the formula's are by rounding alone: for 0 of n the lower end is
    0.0 (not 5.55e-17), and for n of n the upper end is 1.0 (not 0.9999999999999999).

    Args:
        successes: How many of the ``n`` trials succeeded.
        n: How many trials.
        z: The normal quantile of the confidence level.
    """
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return [low, high]


def _normal_two_sided(z: float) -> float:
    """P(|Z| >= |z|) for a standard normal Z (also the chi-square(1) tail of ``z**2``)."""
    return min(1.0, math.erfc(abs(z) / math.sqrt(2)))


def mcnemar_test(b: int, c: int) -> dict[str, Any]:
    """McNemar's test of paired outcomes, from the two discordant counts.

    With fewer than :data:`MCNEMAR_EXACT_BELOW` discordant pairs the p-value is the exact
    two-sided binomial one (``b`` out of ``b + c`` at one half); otherwise it is the
    chi-square test with Edwards' continuity correction, ``max(0, |b - c| - 1)² / (b + c)``
    on one degree of freedom (no correction when ``b == c``, as in R's ``mcnemar.test``).
    With no discordant pair there is no evidence of a change: the p-value is 1.

    Args:
        b: Pairs that went one way (in faultline, pass in the base and fail in the new run).
        c: Pairs that went the other way (fail, then pass).

    Returns:
        ``{"test": "mcnemar", "method": "exact" | "chi2_cc", "discordant": {"pass_to_fail",
        "fail_to_pass"}, "statistic", "p_value"}``; the exact method's statistic is
        ``min(b, c)``, the chi-square method's the corrected chi-square.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must not be negative, got {b} and {c}")
    n = b + c
    if n < MCNEMAR_EXACT_BELOW:
        statistic = float(min(b, c))
        if n == 0:
            p_value = 1.0
        else:
            from scipy.stats import binomtest

            p_value = min(1.0, float(binomtest(min(b, c), n, 0.5).pvalue))
        method = "exact"
    else:
        statistic = max(0, abs(b - c) - 1) ** 2 / n
        p_value = _normal_two_sided(math.sqrt(statistic))
        method = "chi2_cc"
    return {
        "test": "mcnemar",
        "method": method,
        "discordant": {"pass_to_fail": b, "fail_to_pass": c},
        "statistic": statistic,
        "p_value": p_value,
    }


def two_proportion_test(x1: int, n1: int, x2: int, n2: int) -> dict[str, Any]:
    """The pooled two-proportion z test, two-sided: do ``x1 / n1`` and ``x2 / n2`` differ?

    ``z = (x2/n2 - x1/n1) / sqrt(p (1 - p) (1/n1 + 1/n2))`` with ``p = (x1 + x2) / (n1 + n2)``,
    so a positive z means the second proportion is higher. ``z²`` is Pearson's chi-square of
    the 2×2 table without continuity correction.

    Args:
        x1: Successes in the first sample (in faultline, passes in the base run).
        n1: Size of the first sample.
        x2: Successes in the second sample.
        n2: Size of the second sample.

    Returns:
        ``{"test": "two_proportion", "method": "pooled_z", "counts": {"x1", "n1", "x2",
        "n2"}, "difference", "statistic", "p_value"}``. The difference is ``None`` when a
        sample is empty; the statistic and p-value are ``None`` when the test is undefined
        (an empty sample, or both proportions 0 or both 1).
    """
    if min(x1, n1, x2, n2) < 0 or x1 > n1 or x2 > n2:
        raise ValueError(f"need 0 <= x <= n, got {x1}/{n1} and {x2}/{n2}")
    difference = x2 / n2 - x1 / n1 if n1 and n2 else None
    statistic = p_value = None
    pooled = rate(x1 + x2, n1 + n2)
    if difference is not None and pooled is not None and 0.0 < pooled < 1.0:
        se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
        statistic = difference / se
        p_value = _normal_two_sided(statistic)
    return {
        "test": "two_proportion",
        "method": "pooled_z",
        "counts": {"x1": x1, "n1": n1, "x2": x2, "n2": n2},
        "difference": difference,
        "statistic": statistic,
        "p_value": p_value,
    }
