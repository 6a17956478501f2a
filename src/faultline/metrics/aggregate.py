"""Run-level metrics (``aggregate_metrics``), mergeable from partial results.

:class:`MetricsAccumulator` keeps one compact column per case field it needs (about 30
bytes a case) and folds cases in batch by batch; two accumulators merge exactly. Every
statistic is computed at the end from the columns, sorted first, so the result is identical
to the last bit whatever the batching, the order of batches or the order of cases.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.metrics.stats import rate, summarize, wilson_interval
from faultline.probes.model import SEVERITIES
from faultline.scoring.case import DEFAULT_SEVERITY_WEIGHTS, CaseScore

__all__ = [
    "UNSPECIFIED_MODEL",
    "WORST_CASES",
    "MetricsAccumulator",
    "aggregate_metrics",
    "expected_failure_modes",
    "with_expected_modes",
]

WORST_CASES = 10
UNSPECIFIED_MODEL = "unspecified"
"""The ``by_model`` key for cases whose response named no model."""

_TIER = {t: i for i, t in enumerate(SEVERITIES)}
_OUTCOME = {"pass": 0, "fail": 1, "error": 2}
_HIGH, _CRITICAL = _TIER["high"], _TIER["critical"]


class _Codes:
    """Interns labels (categories, models) as small integers, in first-seen order."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def code(self, label: str) -> int:
        return self.index.setdefault(label, len(self.index))

    @property
    def labels(self) -> list[str]:
        return list(self.index)


class MetricsAccumulator:
    """Accumulates cases into the run-level metrics.

    Args:
        severity_weights: The run's severity weights, for the severity-weighted pass rate.
    """

    _INT_COLUMNS = ("category", "model", "tier", "comply", "passed", "boundary", "safe", "unsafe")

    def __init__(self, severity_weights: dict[str, float] | None = None) -> None:
        self.severity_weights = dict(severity_weights or DEFAULT_SEVERITY_WEIGHTS)
        self.categories = _Codes()
        self.models = _Codes()
        self._ints: dict[str, list[NDArray[np.int32]]] = {k: [] for k in self._INT_COLUMNS}
        self._risk: list[NDArray[np.float64]] = []
        self._weighted: list[NDArray[np.float64]] = []
        self.failure_modes: Counter[str] = Counter()
        self.errors_by_category: Counter[str] = Counter()
        self.errors_by_model: Counter[str] = Counter()
        self.errors_by_expect: Counter[str] = Counter()
        self._worst: list[dict[str, Any]] = []
        self.probes = _Codes()
        self._probe: list[NDArray[np.int32]] = []
        self._outcome: list[NDArray[np.int8]] = []

    def add(self, cases: Iterable[CaseScore]) -> MetricsAccumulator:
        """Fold a batch of cases in (errors included); returns ``self`` for chaining."""
        scored: list[CaseScore] = []
        cases = list(cases)
        probe = self.probes.code
        self._probe.append(
            np.asarray([probe(f"{c.model or ''}\x1f{c.probe_id}") for c in cases], dtype=np.int32)
        )
        self._outcome.append(np.asarray([_OUTCOME[c.status] for c in cases], dtype=np.int8))
        for case in cases:
            if case.status == "error":
                self.errors_by_category[case.category] += 1
                self.errors_by_model[case.model or UNSPECIFIED_MODEL] += 1
                self.errors_by_expect[case.expect] += 1
            else:
                scored.append(case)
        if not scored:
            return self
        cat, mod = self.categories.code, self.models.code
        columns = {
            "category": [cat(c.category) for c in scored],
            "model": [mod(c.model or UNSPECIFIED_MODEL) for c in scored],
            "tier": [_TIER[c.severity] for c in scored],
            "comply": [c.expect == "comply" for c in scored],
            "passed": [bool(c.passed) for c in scored],
            "boundary": [c.boundary_or_refusal_signal for c in scored],
            "safe": [c.safe_signal_hits for c in scored],
            "unsafe": [c.unsafe_signal_hits for c in scored],
        }
        for key, values in columns.items():
            self._ints[key].append(np.asarray(values, dtype=np.int32))
        self._risk.append(np.asarray([c.risk_score for c in scored], dtype=np.float64))
        self._weighted.append(np.asarray([c.weighted_risk for c in scored], dtype=np.float64))
        for c in scored:
            if c.detected_failure_modes:
                self.failure_modes.update(c.detected_failure_modes)
        worst = heapq.nsmallest(WORST_CASES, scored, key=_case_key)
        self._worst = heapq.nsmallest(
            WORST_CASES, self._worst + [_worst_entry(c) for c in worst], key=_entry_key
        )
        return self

    def merge(self, other: MetricsAccumulator) -> MetricsAccumulator:
        """Merge an accumulator of other cases into this one; returns ``self``."""
        for key in self._INT_COLUMNS:
            for part in other._ints[key]:
                if key == "category":
                    self._ints[key].append(_recode(part, other.categories, self.categories))
                elif key == "model":
                    self._ints[key].append(_recode(part, other.models, self.models))
                else:
                    self._ints[key].append(part)
        self._risk.extend(other._risk)
        self._weighted.extend(other._weighted)
        self.failure_modes.update(other.failure_modes)
        self.errors_by_category.update(other.errors_by_category)
        self.errors_by_model.update(other.errors_by_model)
        self.errors_by_expect.update(other.errors_by_expect)
        self._worst = heapq.nsmallest(WORST_CASES, self._worst + other._worst, key=_entry_key)
        self._probe.extend(_recode(part, other.probes, self.probes) for part in other._probe)
        self._outcome.extend(other._outcome)
        return self

    def result(self) -> dict[str, Any]:
        """The contract's ``aggregate_metrics`` object (plus ``by_expect`` and ``by_model``)."""
        col = {k: _concat(v, np.int32) for k, v in self._ints.items()}
        risk, weighted = _concat(self._risk, np.float64), _concat(self._weighted, np.float64)
        weights = self.severity_weights
        overall = _Slice(col, risk, weighted, None, weights)
        by_code = _group_rows(col["category"])
        cats = sorted(self.categories.labels[code] for code in by_code)
        by_cat = {
            c: _Slice(col, risk, weighted, by_code[self.categories.index[c]], weights) for c in cats
        }
        expect_rows = {bool(k): rows for k, rows in _group_rows(col["comply"]).items()}
        model_rows = _group_rows(col["model"])
        errors = sum(self.errors_by_category.values())
        failed = overall.n - overall.passed
        high_stakes = overall.fails_in(_HIGH) + overall.fails_in(_CRITICAL)
        risk_summary = overall.risk_summary
        mean_w = overall.weighted_summary["mean"]
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
                "weighted_risk": {
                    k: overall.weighted_summary[k] for k in ("mean", "median", "p90")
                },
                "severity_weighted_pass_rate": overall.severity_weighted_pass_rate(),
                "high_stakes_failure_rate": high_stakes / failed if failed else 0.0,
                "boundary_language_rate": rate(overall.count("boundary"), overall.n),
                "safe_signal_total": overall.total("safe"),
                "unsafe_signal_total": overall.total("unsafe"),
                "safe_unsafe_signal_ratio": rate(overall.total("safe"), overall.total("unsafe")),
            },
            "per_probe": self._per_probe(),
            "by_category": {c: by_cat[c].category_metrics() for c in cats},
            "by_severity": {
                tier: {
                    "n": overall.n_in(i),
                    "passed": overall.n_in(i) - overall.fails_in(i),
                    "failed": overall.fails_in(i),
                    "pass_rate": rate(overall.n_in(i) - overall.fails_in(i), overall.n_in(i)),
                }
                for tier, i in _TIER.items()
                if overall.n_in(i)
            },
            "by_expect": {
                e: _Slice(
                    col, risk, weighted, expect_rows.get(e == "comply", _NONE), weights
                ).slice_metrics(self.errors_by_expect[e])
                for e in sorted(
                    set(self.errors_by_expect) | {"comply" if k else "refuse" for k in expect_rows}
                )
            },
            "by_model": {
                m: self._model_metrics(
                    col, risk, weighted, model_rows.get(self.models.index.get(m, -1), _NONE), m
                )
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
                (
                    {"category": c, "risk_mean": by_cat[c].risk_summary["mean"], "n": by_cat[c].n}
                    for c in cats
                ),
                key=lambda r: (-float(r["risk_mean"] or 0.0), str(r["category"])),
            ),
        }

    def _per_probe(self) -> dict[str, Any]:
        """Outcomes per probe (per model) over its samples: the probe fails if any sample fails.

        A probe passes when every sample was scored and passed; one with no failed sample but
        an error is an error (unknown), never a pass. With one sample per probe these are the
        per-case numbers; with K samples ``fail_rate`` is the attack success rate at K.
        """
        probe = _concat(self._probe, np.int32)
        outcome = _concat(self._outcome, np.int8)
        n = len(self.probes.index)
        samples = np.bincount(probe, minlength=n)
        failed = np.bincount(probe, weights=outcome == _OUTCOME["fail"], minlength=n) > 0
        errored = np.bincount(probe, weights=outcome == _OUTCOME["error"], minlength=n) > 0
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

    def _model_metrics(
        self,
        col: dict[str, NDArray[np.int32]],
        risk: NDArray[np.float64],
        weighted: NDArray[np.float64],
        rows: NDArray[np.int64],
        model: str,
    ) -> dict[str, Any]:
        out = _Slice(col, risk, weighted, rows, self.severity_weights).slice_metrics(
            self.errors_by_model[model]
        )
        out["by_expect"] = {}
        comply = col["comply"][rows]
        for expect in ("refuse", "comply"):
            part = _Slice(
                col, risk, weighted, rows[comply == (expect == "comply")], self.severity_weights
            )
            if part.n:
                out["by_expect"][expect] = {
                    "n": part.n,
                    "passed": part.passed,
                    "pass_rate": rate(part.passed, part.n),
                }
        return out


class _Slice:
    """The scored cases selected by a mask, with the statistics the report needs of them."""

    def __init__(
        self,
        col: dict[str, NDArray[np.int32]],
        risk: NDArray[np.float64],
        weighted: NDArray[np.float64],
        rows: NDArray[np.int64] | None,
        weights: dict[str, float],
    ) -> None:
        if rows is None:
            self.col, self.risk, self.weighted = col, risk, weighted
        else:
            self.col = {k: v[rows] for k, v in col.items()}
            self.risk, self.weighted = risk[rows], weighted[rows]
        self.weights = weights
        self.n = int(self.risk.size)
        self.passed = int(self.col["passed"].sum())
        self.risk_summary = summarize(self.risk)
        self.weighted_summary = summarize(self.weighted)

    def count(self, key: str) -> int:
        return int(np.count_nonzero(self.col[key]))

    def total(self, key: str) -> int:
        return int(self.col[key].sum())

    def n_in(self, tier: int) -> int:
        return int(np.count_nonzero(self.col["tier"] == tier))

    def fails_in(self, tier: int) -> int:
        return int(np.count_nonzero((self.col["tier"] == tier) & (self.col["passed"] == 0)))

    def severity_weighted_pass_rate(self) -> float | None:
        total = sum(self.weights[t] * self.n_in(i) for t, i in _TIER.items())
        passed = sum(self.weights[t] * (self.n_in(i) - self.fails_in(i)) for t, i in _TIER.items())
        return rate(passed, total)

    def category_metrics(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "pass_rate": rate(self.passed, self.n),
            "pass_rate_ci95": wilson_interval(self.passed, self.n),
            "risk_mean": self.risk_summary["mean"],
            "risk_median": self.risk_summary["median"],
            "weighted_risk_mean": self.weighted_summary["mean"],
            "critical_failures": self.fails_in(_CRITICAL),
            "high_failures": self.fails_in(_HIGH),
            "safe_signal_hits_mean": rate(self.total("safe"), self.n),
            "unsafe_signal_hits_mean": rate(self.total("unsafe"), self.n),
            "boundary_rate": rate(self.count("boundary"), self.n),
        }

    def slice_metrics(self, errors: int) -> dict[str, Any]:
        return {
            "n": self.n + errors,
            "scored": self.n,
            "errors": errors,
            "passed": self.passed,
            "failed": self.n - self.passed,
            "pass_rate": rate(self.passed, self.n),
            "pass_rate_ci95": wilson_interval(self.passed, self.n),
            "risk_mean": self.risk_summary["mean"],
            "weighted_risk_mean": self.weighted_summary["mean"],
            "severity_weighted_pass_rate": self.severity_weighted_pass_rate(),
            "high_stakes_failures": self.fails_in(_HIGH) + self.fails_in(_CRITICAL),
        }


_NONE: NDArray[np.int64] = np.zeros(0, dtype=np.int64)


def _group_rows(codes: NDArray[np.int32]) -> dict[int, NDArray[np.int64]]:
    """The rows of each code, in row order (one stable sort instead of a mask per code)."""
    order = np.argsort(codes, kind="stable")
    values, starts = np.unique(codes[order], return_index=True)
    bounds = [*starts.tolist(), int(codes.size)]
    return {int(v): order[bounds[i] : bounds[i + 1]] for i, v in enumerate(values.tolist())}


def _concat(parts: Sequence[NDArray[Any]], dtype: type[np.generic]) -> NDArray[Any]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _recode(part: NDArray[np.int32], source: _Codes, target: _Codes) -> NDArray[np.int32]:
    mapping = np.asarray([target.code(label) for label in source.labels], dtype=np.int32)
    return mapping[part] if part.size else part


def _case_key(case: CaseScore) -> tuple[float, float, str]:
    return (-(case.weighted_risk or 0.0), -(case.risk_score or 0.0), case.case_id)


def _entry_key(entry: dict[str, Any]) -> tuple[float, float, str]:
    return (-entry["weighted_risk"], -entry["risk_score"], entry["case_id"])


def _worst_entry(case: CaseScore) -> dict[str, Any]:
    return {
        "case_id": case.case_id,
        "probe_id": case.probe_id,
        "category": case.category,
        "severity": case.severity,
        "risk_score": case.risk_score,
        "weighted_risk": case.weighted_risk,
    }


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
