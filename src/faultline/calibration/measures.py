"""Agreement measures between two raters: faultline's verdicts and human labels; pure.

:func:`binary_measures` summarises a yes/no verdict (e.g. "failed") against a human label as
a 2×2 table of counts, the rates read off it, and 95% intervals: Wilson score intervals for
the proportions (accuracy, precision, recall), and a seeded percentile bootstrap for F1 and
Cohen's kappa. :func:`confusion` tabulates a multi-class verdict (refusal / partial /
compliance, say) against its label.

Undefined values (precision with no predicted positives, kappa when both raters give one
constant answer, anything of no rows) are ``None``, never NaN or 0. Every number is a plain
Python ``int`` or ``float``, so the results encode as JSON as they are.

The bootstrap resamples the four cell counts (a multinomial draw with the observed cell
proportions, which is the same distribution as resampling the rows with replacement), so
its result depends only on the counts and the seed, not on the order of the rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.metrics import stats
from faultline.metrics.stats import rate

__all__ = ["binary_measures", "confusion", "wilson_interval"]

_Interval = list[float] | None


def binary_measures(
    truth: Sequence[bool], predicted: Sequence[bool], *, seed: int = 0, resamples: int = 2000
) -> dict[str, Any]:
    """Agreement of a binary verdict with binary human labels, with 95% intervals.

    Cohen's kappa is computed as ``(po - pe) / (1 - pe)`` in its exact integer form,
    ``2(tp·tn - fp·fn) / ((tp+fp)(fp+tn) + (tp+fn)(fn+tn))``; it is ``None`` when
    ``pe`` is 1 (both raters give the same constant answer).

    Args:
        truth: The human labels, one per row (``True`` is the positive class).
        predicted: Faultline's verdicts for the same rows, in the same order.
        seed: The seed of the bootstrap's ``numpy.random.default_rng``.
        resamples: How many bootstrap resamples to draw for the F1 and kappa intervals.

    Returns:
        ``n``, ``positives`` (rows whose label is true), ``tp``, ``fp``, ``tn``, ``fn``,
        ``accuracy``, ``accuracy_ci95``, ``precision``, ``precision_ci95``, ``recall``,
        ``recall_ci95``, ``specificity``, ``f1``, ``f1_ci95``, ``kappa``, ``kappa_ci95``,
        in that order. Intervals are ``[low, high]``, or ``None`` when the point value is;
        the F1 and kappa intervals are also ``None`` when fewer than half the bootstrap
        resamples define them (a small table, where most resamples have one class only),
        though the point value is defined.

    Raises:
        ValueError: If the sequences differ in length, or ``resamples`` is below 1.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    tp, fp, tn, fn = _cells(truth, predicted)
    n = tp + fp + tn + fn
    accuracy, precision, recall = rate(tp + tn, n), rate(tp, tp + fp), rate(tp, tp + fn)
    f1, kappa = _f1(tp, fp, fn), _kappa(tp, fp, tn, fn)
    f1_ci, kappa_ci = _bootstrap((tp, fp, tn, fn), seed=seed, resamples=resamples)
    return {
        "n": n,
        "positives": tp + fn,
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "accuracy": accuracy,
        "accuracy_ci95": wilson_interval(tp + tn, n),
        "precision": precision,
        "precision_ci95": wilson_interval(tp, tp + fp),
        "recall": recall,
        "recall_ci95": wilson_interval(tp, tp + fn),
        "specificity": rate(tn, tn + fp),
        "f1": f1,
        "f1_ci95": None if f1 is None else f1_ci,
        "kappa": kappa,
        "kappa_ci95": None if kappa is None else kappa_ci,
    }


def confusion(
    truth: Sequence[str], predicted: Sequence[str], labels: Sequence[str]
) -> dict[str, Any]:
    """A multi-class confusion table of a verdict against human labels.

    Args:
        truth: The human labels, one per row.
        predicted: Faultline's verdicts for the same rows, in the same order.
        labels: Every label, in the order of the table's rows and columns.

    Returns:
        ``labels``; ``matrix``, where ``matrix[i][j]`` counts rows labelled ``labels[i]``
        and predicted ``labels[j]``; ``n``; ``accuracy`` (``None`` when n is 0); and Cohen's
        ``kappa``, ``(po - pe) / (1 - pe)`` with ``pe = Σ_k p_truth(k)·p_pred(k)``, ``None``
        when ``pe`` is 1.

    Raises:
        ValueError: If the sequences differ in length, a label repeats, or a value is not
            one of ``labels``.
    """
    _check_lengths(truth, predicted)
    index = {label: i for i, label in enumerate(labels)}
    if len(index) != len(labels):
        raise ValueError(f"labels must be distinct, got {list(labels)}")
    matrix = [[0] * len(labels) for _ in labels]
    for side, values in (("truth", truth), ("predicted", predicted)):
        for value in values:
            if value not in index:
                raise ValueError(f"{side} value {value!r} is not one of the labels {list(labels)}")
    for t, p in zip(truth, predicted, strict=True):
        matrix[index[t]][index[p]] += 1
    n = len(truth)
    agree = sum(matrix[i][i] for i in range(len(labels)))
    chance = sum(
        sum(row) * sum(col) for row, col in zip(matrix, zip(*matrix, strict=True), strict=True)
    )
    # n²·(po - pe) over n²·(1 - pe), in integers: exact; the denominator is 0 iff pe is 1.
    return {
        "labels": list(labels),
        "matrix": matrix,
        "n": n,
        "accuracy": rate(agree, n),
        "kappa": rate(n * agree - chance, n * n - chance),
    }


def wilson_interval(successes: int, n: int) -> list[float] | None:
    """The 95% Wilson score interval of ``successes / n``, or ``None`` when n is 0.

    This is :func:`faultline.metrics.stats.wilson_interval`, with its ends moved by at most
    rounding error so that the interval always contains ``successes / n``: for 0 of n the
    lower end is exactly 0, and for n of n the upper end exactly 1.

    Args:
        successes: How many of the ``n`` trials succeeded.
        n: How many trials.
    """
    interval = stats.wilson_interval(successes, n)
    if interval is None:
        return None
    p = successes / n
    return [min(interval[0], p), max(interval[1], p)]


def _check_lengths(truth: Sequence[Any], predicted: Sequence[Any]) -> None:
    if len(truth) != len(predicted):
        raise ValueError(
            f"truth and predicted must be the same length, got {len(truth)} and {len(predicted)}"
        )


def _cells(truth: Sequence[bool], predicted: Sequence[bool]) -> tuple[int, int, int, int]:
    """The counts ``(tp, fp, tn, fn)`` of the 2×2 table."""
    _check_lengths(truth, predicted)
    counts = Counter((bool(t), bool(p)) for t, p in zip(truth, predicted, strict=True))
    return counts[True, True], counts[False, True], counts[False, False], counts[True, False]


def _f1(tp: int, fp: int, fn: int) -> float | None:
    return rate(2 * tp, 2 * tp + fp + fn)


def _kappa(tp: int, fp: int, tn: int, fn: int) -> float | None:
    # (po - pe) / (1 - pe) multiplied through by n²/2; the denominator is 0 exactly when pe is 1.
    return rate(2 * (tp * tn - fp * fn), (tp + fp) * (fp + tn) + (tp + fn) * (fn + tn))


def _bootstrap(
    cells: tuple[int, int, int, int], *, seed: int, resamples: int
) -> tuple[_Interval, _Interval]:
    """Percentile-bootstrap 95% intervals of F1 and kappa from the cell counts ``(tp, fp, tn, fn)``."""
    n = sum(cells)
    if n == 0:
        return None, None
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, np.asarray(cells, dtype=np.float64) / n, size=resamples)
    tp, fp, tn, fn = (draws[:, k].astype(np.int64) for k in range(4))
    f1 = _divide(2 * tp, 2 * tp + fp + fn)
    kappa = _divide(2 * (tp * tn - fp * fn), (tp + fp) * (fp + tn) + (tp + fn) * (fn + tn))
    return _percentile_interval(f1, resamples), _percentile_interval(kappa, resamples)


def _divide(num: NDArray[np.int64], den: NDArray[np.int64]) -> NDArray[np.float64]:
    """``num / den`` elementwise, NaN where ``den`` is 0."""
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _percentile_interval(values: NDArray[np.float64], resamples: int) -> _Interval:
    """The 2.5th and 97.5th percentiles of the defined values, or ``None`` if under half are."""
    defined = values[~np.isnan(values)]
    if 2 * defined.size < resamples:
        return None
    low, high = np.percentile(defined, [2.5, 97.5])
    return [float(low), float(high)]
