"""Order-independent statistics: the same multiset of numbers gives the same bits.

Every function sorts its input first, so a metric merged from partial results in any order,
or computed in another process, is identical to the last bit. Undefined statistics (the
mean of nothing) are ``None``, never NaN or 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["Summary", "rate", "summarize", "wilson_interval"]

Summary = dict[str, float | None]


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
        "median": _quantile(arr, 0.5),
        "std": std,
        "p90": _quantile(arr, 0.9),
        "max": float(arr[-1]),
    }


def _quantile(sorted_arr: NDArray[np.float64], q: float) -> float:
    pos = (sorted_arr.size - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return float(sorted_arr[lo] + (sorted_arr[hi] - sorted_arr[lo]) * (pos - lo))


def rate(part: float, whole: float) -> float | None:
    """``part / whole``, or ``None`` when ``whole`` is 0."""
    return part / whole if whole else None


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> list[float] | None:
    """The Wilson score interval for a proportion (95% by default), or ``None`` when n is 0.

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
    return [max(0.0, centre - half), min(1.0, centre + half)]
