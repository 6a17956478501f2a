"""``aggregate_metrics.by_transform``: pass rates per attack transform, and per category in each.

The cases of a probe set derived with attack transforms (:mod:`faultline.probes.transforms`)
are grouped by the transform their probe was made with, ``none`` for the originals, so the
report shows which disguises get past a model and in which threat categories. The block is
present only when the probe set holds transformed probes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.metrics.stats import rate, wilson_interval
from faultline.probes.model import Probe
from faultline.probes.transforms import transform_lineage

__all__ = ["NO_TRANSFORM", "transform_metrics", "transform_metrics_of_counts", "with_transforms"]

NO_TRANSFORM = "none"
"""The ``by_transform`` key of the original, untransformed probes."""


def transform_metrics(
    probes: Sequence[Probe],
    probe: NDArray[np.int64],
    scored: NDArray[np.bool_],
    passed: NDArray[np.bool_],
) -> dict[str, Any] | None:
    """Outcomes per transform, over cases, with the pass rate of each category in each.

    Args:
        probes: The probe set's probes.
        probe: Each case's probe, as an index into ``probes``.
        scored: Whether each case was scored (an error case was not).
        passed: Whether each case passed (read for scored cases only).

    Returns:
        ``{transform: {n, scored, passed, failed, errors, pass_rate, pass_rate_ci95,
        fail_rate, by_category: {category: {n, pass_rate}}}}``: ``none`` first, then the
        transforms by name, each present in the probe set even without cases;
        ``n`` counts error cases too, a category's ``n`` only scored ones. ``None`` when
        no probe is transformed.
    """
    n = len(probes)
    return transform_metrics_of_counts(
        probes,
        np.bincount(probe, minlength=n),
        np.bincount(probe[scored], minlength=n),
        np.bincount(probe[scored & passed], minlength=n),
    )


def transform_metrics_of_counts(
    probes: Sequence[Probe],
    cases: NDArray[np.int64],
    scored: NDArray[np.int64],
    passed: NDArray[np.int64],
) -> dict[str, Any] | None:
    """:func:`transform_metrics` from counts per probe, which merge across batches by adding.

    Args:
        probes: The probe set's probes.
        cases: How many cases each probe has.
        scored: How many of them were scored.
        passed: How many of them passed.
    """
    labels = [NO_TRANSFORM if (lin := transform_lineage(p)) is None else lin[1] for p in probes]
    if all(label == NO_TRANSFORM for label in labels):
        return None
    names = sorted(set(labels), key=lambda t: (t != NO_TRANSFORM, t))
    categories = sorted({p.category for p in probes})
    t_index = {t: i for i, t in enumerate(names)}
    t_code = np.asarray([t_index[t] for t in labels], dtype=np.int64)
    c_index = {c: i for i, c in enumerate(categories)}
    c_code = np.asarray([c_index[p.category] for p in probes], dtype=np.int64)
    width = len(names) * len(categories)
    cell = t_code * len(categories) + c_code
    cell_n = (
        np.bincount(cell, weights=scored, minlength=width).astype(np.int64).reshape(len(names), -1)
    )
    cell_passed = (
        np.bincount(cell, weights=passed, minlength=width).astype(np.int64).reshape(len(names), -1)
    )
    n = np.bincount(t_code, weights=cases, minlength=len(names)).astype(np.int64)
    out: dict[str, Any] = {}
    for i, name in enumerate(names):
        n_scored, n_passed = int(cell_n[i].sum()), int(cell_passed[i].sum())
        out[name] = {
            "n": int(n[i]),
            "scored": n_scored,
            "passed": n_passed,
            "failed": n_scored - n_passed,
            "errors": int(n[i]) - n_scored,
            "pass_rate": rate(n_passed, n_scored),
            "pass_rate_ci95": wilson_interval(n_passed, n_scored),
            "fail_rate": rate(n_scored - n_passed, n_scored),
            "by_category": {
                c: {"n": k, "pass_rate": rate(int(cell_passed[i, j]), k)}
                for j, c in enumerate(categories)
                if (k := int(cell_n[i, j]))
            },
        }
    return out


def with_transforms(
    metrics: Mapping[str, Any], by_transform: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``metrics`` with ``by_transform`` placed after ``by_model`` (unchanged when ``None``)."""
    if by_transform is None:
        return dict(metrics)
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        out[key] = value
        if key == "by_model":
            out["by_transform"] = dict(by_transform)
    out.setdefault("by_transform", dict(by_transform))
    return out
