"""Metrics: the run-level ``aggregate_metrics``, computed from cases; pure.

Metrics never look at responses, only at scored cases, and merge exactly from partial
results (:class:`MetricsAccumulator`), so a run split across processes or machines gives the
same numbers as one pass. The accumulator's memory is bounded by the number of distinct
groups (categories, models, probes), not of cases, except for the values it keeps for exact
quantiles (16 bytes a scored case, up to ``exact_quantile_limit``; a fixed histogram above).
To add a metric, compute it in ``MetricsAccumulator.result`` from the grouped tables it keeps
(:mod:`faultline.metrics._cells`), adding a column there if it needs one, and document it in
docs/metrics.md.
"""

from __future__ import annotations

from faultline.metrics.aggregate import UNSPECIFIED_MODEL, MetricsAccumulator, aggregate_metrics
from faultline.metrics.stats import summarize, wilson_interval

__all__ = [
    "UNSPECIFIED_MODEL",
    "MetricsAccumulator",
    "aggregate_metrics",
    "summarize",
    "wilson_interval",
]
