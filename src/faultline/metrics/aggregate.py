"""Run-level metrics (``aggregate_metrics``), mergeable from partial results.

:class:`MetricsAccumulator` folds cases in batch by batch and keeps only tables whose size is
set by the number of distinct groups, never by the number of cases: counts per cell
(category, model, expect, severity tier, passed, boundary language; see
:mod:`faultline.metrics._cells`), outcomes per (model, probe), exact sums of ``risk_score``
and ``weighted_risk`` and of their squares per (category, model, expect)
(:mod:`faultline.metrics.exact`), the ten worst cases and the counters of failure modes and
errors. Two accumulators merge exactly, so the result is identical to the last bit whatever
the batching, the order of batches or the order of cases.

Quantiles need the values themselves: ``risk_score`` per category and ``weighted_risk`` are
kept (16 bytes a scored case) while the run has at most ``exact_quantile_limit`` scored cases,
and quantiles are exact; above it they are binned into a fixed histogram
(:mod:`faultline.metrics.quantiles`) and are within 1/65536 of the exact ones.
The result's ``quantiles`` says which.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.metrics._batch import (
    UNSPECIFIED_MODEL,
    Batch,
    Codes,
    case_key,
    entry_key,
    worst_candidates,
    worst_entry,
)
from faultline.metrics._cells import (
    CODE_LIMIT,
    GROUP_SHIFT,
    TIER,
    Cells,
    Slice,
    cell_keys,
    moment_group,
    per_probe_metrics,
    recode_keys,
)
from faultline.metrics.exact import ExactMoments, MomentTable, group_sums
from faultline.metrics.quantiles import BINS, MAX_ABS_ERROR, GroupedQuantiles
from faultline.metrics.stats import Summary, rate, wilson_interval
from faultline.scoring.case import DEFAULT_SEVERITY_WEIGHTS, CaseScore

__all__ = [
    "EXACT_QUANTILE_LIMIT",
    "UNSPECIFIED_MODEL",
    "WORST_CASES",
    "MetricsAccumulator",
    "aggregate_metrics",
    "expected_failure_modes",
    "rank_as_listed",
    "with_expected_modes",
]

WORST_CASES = 10
EXACT_QUANTILE_LIMIT = 20_000_000
"""Scored cases up to which quantiles are exact (their values kept, 16 bytes a case)."""

_OUTCOME = {"pass": 0, "fail": 1, "error": 2}
_HIGH, _CRITICAL = TIER["high"], TIER["critical"]
_EMPTY = np.zeros(0, dtype=np.int64)


class MetricsAccumulator:
    """Accumulates cases into the run-level metrics, in memory bounded by the distinct groups.

    What it keeps grows with the distinct categories, models, (model, probe) pairs and cells,
    never with the cases, except the two scores of each scored case (16 bytes) while there are
    at most ``exact_quantile_limit`` of them. Its pickle holds numpy arrays and a few dicts of
    labels, never a per-case Python object.

    Args:
        severity_weights: The run's severity weights, for the severity-weighted pass rate.
        exact_quantile_limit: The most scored cases for which quantiles are exact; above it
            they come from a histogram of 65,536 bins, within 1/65536. Accumulators that
            merge should share it: the switch depends only on the total, so the result is
            the same whatever the batching or merge order.

    Attributes:
        scored: How many scored cases were folded in.
        failure_modes: Failed cases per detected failure mode.
        errors_by_category: Error cases per category (likewise ``errors_by_severity``,
            ``errors_by_model`` and ``errors_by_expect``).
    """

    def __init__(
        self,
        severity_weights: dict[str, float] | None = None,
        *,
        exact_quantile_limit: int = EXACT_QUANTILE_LIMIT,
    ) -> None:
        self.severity_weights = dict(severity_weights or DEFAULT_SEVERITY_WEIGHTS)
        self.exact_quantile_limit = exact_quantile_limit
        self.categories = Codes()
        self.models = Codes()
        self.probes = Codes()
        self.scored = 0
        self._cell_keys = _EMPTY
        self._cell_sums = np.zeros((3, 0), dtype=np.int64)
        self._moments = MomentTable()
        self._probe_counts = np.zeros((3, 0), dtype=np.int64)
        self._risk = GroupedQuantiles()
        self._weighted = GroupedQuantiles()
        self.failure_modes: Counter[str] = Counter()
        self.errors_by_category: Counter[str] = Counter()
        self.errors_by_severity: Counter[str] = Counter()
        self.errors_by_model: Counter[str] = Counter()
        self.errors_by_expect: Counter[str] = Counter()
        self._worst: list[dict[str, Any]] = []

    def add(self, cases: Iterable[CaseScore]) -> MetricsAccumulator:
        """Fold a batch of cases in (errors included); returns ``self`` for chaining.

        Raises:
            ValueError: A scored case's ``risk_score`` or ``weighted_risk`` is not in [0, 1];
                nothing of the batch is folded in then.
        """
        cases = list(cases)
        outcome = np.fromiter(map(_OUTCOME.__getitem__, [c.status for c in cases]), np.int64)
        is_error = outcome == _OUTCOME["error"]
        errors = np.flatnonzero(is_error).tolist()
        scored = list(compress(cases, (~is_error).tolist())) if errors else cases
        batch = Batch(scored) if scored else None
        codes = self.probes.codes([f"{c.model or ''}\x1f{c.probe_id}" for c in cases])
        self._count_probes(codes, outcome)
        for i in errors:
            case = cases[i]
            self.errors_by_category[case.category] += 1
            self.errors_by_severity[case.severity] += 1
            self.errors_by_model[case.model or UNSPECIFIED_MODEL] += 1
            self.errors_by_expect[case.expect] += 1
        if batch is not None:
            self._add_scored(scored, batch)
        return self

    def _add_scored(self, scored: list[CaseScore], batch: Batch) -> None:
        category = self.categories.codes(batch.category)
        model = self.models.codes(batch.model)
        if len(self.categories.index) > CODE_LIMIT or len(self.models.index) > CODE_LIMIT:
            raise ValueError(f"more than {CODE_LIMIT} categories or models; that is not a run")
        keys = cell_keys(category, model, batch.low)
        self._risk.add(batch.risk, category)
        self._weighted.add(batch.weighted, np.zeros(batch.risk.size, dtype=np.int64))
        self._fold_cells(keys, batch.hits, batch.risk, batch.weighted)
        self._fold_scored(batch.risk.size)
        self.failure_modes.update(chain.from_iterable(batch.failure_modes))
        candidates = [
            scored[i] for i in worst_candidates(batch.weighted, batch.risk, WORST_CASES).tolist()
        ]
        worst = heapq.nsmallest(WORST_CASES, candidates, key=case_key)
        self._worst = heapq.nsmallest(
            WORST_CASES, self._worst + [worst_entry(c) for c in worst], key=entry_key
        )

    def _fold_cells(
        self,
        keys: NDArray[np.int64],
        hits: NDArray[np.int64],
        risk: NDArray[np.float64],
        weighted: NDArray[np.float64],
    ) -> None:
        """Fold per-case cell keys and hits, and the two scores' moments, into the tables."""
        self._cell_keys, self._cell_sums = group_sums(
            np.concatenate((self._cell_keys, keys)), np.concatenate((self._cell_sums, hits), axis=1)
        )
        group = moment_group(keys) << 1  # the low bit: 0 for risk_score, 1 for weighted_risk
        self._moments.add(np.concatenate((risk, weighted)), np.concatenate((group, group | 1)))

    def _moment_pairs(self) -> dict[int, tuple[ExactMoments, ExactMoments]]:
        """(Category, model, comply) group to its risk and weighted-risk moments."""
        out: dict[int, tuple[ExactMoments, ExactMoments]] = {}
        for key, found in self._moments.totals().items():
            pair = out.setdefault(key >> 1, (ExactMoments(), ExactMoments()))
            pair[key & 1].merge(found)
        return out

    def _fold_scored(self, n: int) -> None:
        """Count ``n`` more scored cases; past the limit, sketch the quantiles."""
        self.scored += n
        if self.scored > self.exact_quantile_limit:
            self._risk.sketch()
            self._weighted.sketch()

    def _grow_probes(self) -> None:
        """Make room in the per-probe table for every interned probe (doubling, amortised)."""
        size, room = len(self.probes.index), self._probe_counts.shape[1]
        if size > room:
            grown = np.zeros((3, max(size, 2 * room)), dtype=np.int64)
            grown[:, :room] = self._probe_counts
            self._probe_counts = grown

    def _count_probes(self, codes: NDArray[np.int64], outcome: NDArray[np.int64]) -> None:
        """Add samples, failed and errored counts per probe code."""
        self._grow_probes()
        counts = self._probe_counts
        np.add.at(counts[0], codes, 1)
        np.add.at(counts[1], codes[outcome == _OUTCOME["fail"]], 1)
        np.add.at(counts[2], codes[outcome == _OUTCOME["error"]], 1)

    def merge(self, other: MetricsAccumulator) -> MetricsAccumulator:
        """Merge an accumulator of other cases into this one; returns ``self``."""
        cats = self.categories.mapping(other.categories)
        mods = self.models.mapping(other.models)
        keys = recode_keys(other._cell_keys, cats, mods, 0) if other._cell_keys.size else _EMPTY
        self._cell_keys, self._cell_sums = group_sums(
            np.concatenate((self._cell_keys, keys)),
            np.concatenate((self._cell_sums, other._cell_sums), axis=1),
        )
        self._moments.merge(
            other._moments,
            lambda groups: (recode_keys(groups >> 1, cats, mods, GROUP_SHIFT) << 1) | (groups & 1),
        )
        probes = self.probes.mapping(other.probes)
        self._grow_probes()
        self._probe_counts[:, probes] += other._probe_counts[:, : probes.size]
        self._risk.merge(other._risk, dict(enumerate(cats.tolist())))
        self._weighted.merge(other._weighted)
        self._fold_scored(other.scored)
        self.failure_modes.update(other.failure_modes)
        self.errors_by_category.update(other.errors_by_category)
        self.errors_by_severity.update(other.errors_by_severity)
        self.errors_by_model.update(other.errors_by_model)
        self.errors_by_expect.update(other.errors_by_expect)
        self._worst = heapq.nsmallest(WORST_CASES, self._worst + other._worst, key=entry_key)
        return self

    def result(self) -> dict[str, Any]:
        """The contract's ``aggregate_metrics`` object (plus ``by_expect`` and ``by_model``)."""
        cells = Cells(self._cell_keys, self._cell_sums, self._moment_pairs())
        weights = self.severity_weights
        risk = self._risk.quantiles()
        weighted = self._weighted.quantiles()
        overall = Slice(cells, cells.all, cells.moments(), weights)
        cat_codes = {
            self.categories.labels[code]: code for code in np.unique(cells.category).tolist()
        }
        cats = sorted(cat_codes)
        by_cat = {
            c: Slice(
                cells,
                cells.category == code,
                cells.moments(category=code),
                weights,
                {"median": self._risk.quantiles([code]).median},
            )
            for c, code in cat_codes.items()
        }
        errors = sum(self.errors_by_category.values())
        failed = overall.n - overall.passed
        high_stakes = overall.fails_in(_HIGH) + overall.fails_in(_CRITICAL)
        risk_summary: Summary = {
            "mean": overall.risk_mean,
            "median": risk.median,
            "std": overall.risk_std,
            "p90": risk.p90,
            "max": risk.max,
        }
        mean_w = overall.weighted_mean
        return {
            "counts": {
                "cases": overall.n + errors,
                "scored": overall.n,
                "passed": overall.passed,
                "failed": failed,
                "errors": errors,
                "categories": cats,
            },
            "overall": {
                "pass_rate": rate(overall.passed, overall.n),
                "pass_rate_ci95": wilson_interval(overall.passed, overall.n),
                "fail_rate": rate(failed, overall.n),
                "coverage": rate(overall.n, overall.n + errors),
                "risk_score": risk_summary,
                "weighted_risk": {"mean": mean_w, "median": weighted.median, "p90": weighted.p90},
                "severity_weighted_pass_rate": overall.severity_weighted_pass_rate(),
                "high_stakes_failure_rate": high_stakes / failed if failed else 0.0,
                "boundary_language_rate": rate(overall.count("boundary"), overall.n),
                "safe_signal_total": overall.total("safe"),
                "unsafe_signal_total": overall.total("unsafe"),
                "safe_unsafe_signal_ratio": rate(overall.total("safe"), overall.total("unsafe")),
            },
            "quantiles": self._quantile_method(),
            "per_probe": per_probe_metrics(self._probe_counts[:, : len(self.probes.index)]),
            "by_category": {c: by_cat[c].category_metrics() for c in cats},
            "by_severity": {
                tier: {
                    "n": overall.n_in(i),
                    "passed": overall.n_in(i) - overall.fails_in(i),
                    "failed": overall.fails_in(i),
                    "pass_rate": rate(overall.n_in(i) - overall.fails_in(i), overall.n_in(i)),
                }
                for tier, i in TIER.items()
                if overall.n_in(i)
            },
            # Additions beside the contract's slices, which count scored cases: a category or
            # tier whose every case errored is in neither, and shows here.
            "errors_by_category": dict(sorted(self.errors_by_category.items())),
            "errors_by_severity": {
                t: self.errors_by_severity[t] for t in TIER if self.errors_by_severity[t]
            },
            "by_expect": self._by_expect(cells),
            "by_model": {
                m: self._model_metrics(cells, m)
                for m in sorted(set(self.models.labels) | set(self.errors_by_model))
            },
            "failure_mode_histogram": dict(
                sorted(self.failure_modes.items(), key=lambda kv: (-kv[1], kv[0]))
            ),
            "indices": {
                "resilience_index": None if mean_w is None else min(1.0, max(0.0, 1.0 - mean_w)),
                "exposure_index": None if mean_w is None else min(1.0, max(0.0, mean_w)),
                "fragility_spread": risk_summary["std"],
            },
            "worst_cases": [dict(e) for e in self._worst],
            "category_ranking": sorted(
                ({"category": c, "risk_mean": by_cat[c].risk_mean, "n": by_cat[c].n} for c in cats),
                key=lambda r: (-float(r["risk_mean"] or 0.0), str(r["category"])),
            ),
        }

    def _quantile_method(self) -> dict[str, Any]:
        """``quantiles``: whether the medians, P90s and maxima are exact or from a histogram."""
        if not self._risk.sketched:
            return {"method": "exact"}
        return {"method": "histogram", "bins": BINS, "max_abs_error": MAX_ABS_ERROR}

    def _by_expect(self, cells: Cells) -> dict[str, Any]:
        present = {"comply" if k else "refuse" for k in np.unique(cells.comply).tolist()}
        out: dict[str, Any] = {}
        for expect in sorted(set(self.errors_by_expect) | present):
            comply = int(expect == "comply")
            part = Slice(
                cells, cells.comply == comply, cells.moments(comply=comply), self.severity_weights
            )
            out[expect] = part.slice_metrics(self.errors_by_expect[expect])
        return out

    def _model_metrics(self, cells: Cells, model: str) -> dict[str, Any]:
        code = self.models.index.get(model, -1)
        mask = cells.model == code
        out = Slice(cells, mask, cells.moments(model=code), self.severity_weights).slice_metrics(
            self.errors_by_model[model]
        )
        out["by_expect"] = {}
        no_moments = (ExactMoments(), ExactMoments())
        for expect in ("refuse", "comply"):
            part = Slice(
                cells,
                mask & (cells.comply == (expect == "comply")),
                no_moments,
                self.severity_weights,
            )
            if part.n:
                out["by_expect"][expect] = {
                    "n": part.n,
                    "passed": part.passed,
                    "pass_rate": rate(part.passed, part.n),
                }
        return out


def aggregate_metrics(
    cases: Iterable[CaseScore], severity_weights: dict[str, float] | None = None
) -> dict[str, Any]:
    """Compute the contract's ``aggregate_metrics`` for a run.

    Args:
        cases: Every case of the run, errors included: they count in ``counts`` and
            ``coverage`` and in no statistic.
        severity_weights: The run's severity weights (default: faultline's defaults).

    Returns:
        ``counts``, ``overall``, ``by_category``, ``by_severity``, ``by_expect``,
        ``by_model``, ``failure_mode_histogram``, ``indices``, ``worst_cases`` and
        ``category_ranking``, as docs/metrics.md defines them.
    """
    return MetricsAccumulator(severity_weights).add(cases).result()


def expected_failure_modes(
    failed_per_probe: Mapping[str, int], declared: Mapping[str, Sequence[str]]
) -> dict[str, int]:
    """How many failed cases each failure mode was expected in: the modes their probes declare.

    Set beside ``failure_mode_histogram`` (the modes the evidence showed), it tells whether
    probes fail the way they were designed to.

    Args:
        failed_per_probe: Failed cases per probe id.
        declared: Each probe's declared ``failure_modes``.

    Returns:
        Mode to count, most frequent first (ties by name).
    """
    counts: Counter[str] = Counter()
    for probe_id, n in failed_per_probe.items():
        for mode in declared.get(probe_id, ()):
            counts[mode] += n
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def with_expected_modes(
    metrics: Mapping[str, Any],
    failed_per_probe: Mapping[str, int],
    declared: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """``metrics`` with ``failure_mode_expected`` placed after ``failure_mode_histogram``."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        out[key] = value
        if key == "failure_mode_histogram":
            out["failure_mode_expected"] = expected_failure_modes(failed_per_probe, declared)
    return out


def rank_as_listed(
    ranking: Sequence[Mapping[str, Any]], cases: Iterable[tuple[str, float | None]]
) -> list[dict[str, Any]]:
    """``category_ranking`` ordered as a plain average of the listed cases orders it.

    The accumulator ranks categories by their exact mean risk, ties by name. A reader who
    averages a report's cases in their listed order with ordinary floating-point sums (as
    ../shared/tools/check_report.py does) gets means that differ from the exact ones in the
    last bits, so two categories whose exact means tie (every case refused alike, say) may
    come out in the other order. For a report that lists its cases, this orders the ranking
    by those left-to-right means, ties by name; the entries, ``risk_mean`` included, are
    unchanged.

    Args:
        ranking: ``category_ranking`` as the accumulator gives it.
        cases: ``(category, risk_score)`` of every case, in the report's order (errors,
            with no risk, are skipped).

    Returns:
        The same entries, reordered.
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for category, risk in cases:
        if risk is not None:
            sums[category] = sums.get(category, 0) + risk
            counts[category] = counts.get(category, 0) + 1

    def listed_mean(entry: Mapping[str, Any]) -> float:
        category = str(entry["category"])
        if category not in counts:
            return -float(entry["risk_mean"] or 0.0)
        return -(sums[category] / counts[category])

    return [dict(e) for e in sorted(ranking, key=lambda e: (listed_mean(e), str(e["category"])))]
