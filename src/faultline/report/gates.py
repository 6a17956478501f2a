"""Gates: conditions on a report's metrics that make a CI job fail (exit code 1).

A gate is ``NAME OP NUMBER`` with OP one of ``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``,
and it *trips* when the condition holds: ``pass_rate<0.95`` trips when the pass rate is
below 95%. NAME is a metric of ``overall``, ``counts`` or ``indices`` (``pass_rate``,
``errors``, ``exposure_index`` ...), or a dotted path into ``aggregate_metrics``
(``by_category.self_harm.pass_rate``, or ``per_probe.fail_rate`` for hit@K). ``unanswered``
is the number of probes that no answer names (``run.probe_set.unanswered``): `score` makes
no case of them, so ``coverage`` and ``errors`` do not count them. A metric that is undefined
(``null``) trips the gate: a number that cannot be shown to be fine is not fine.

``faultline compare`` has gates of its own (:func:`evaluate_compare_gates`), over the
comparison: ``regressions``, ``fixes``, ``new_failures``, ``removed``, ``became_error``, a
compared metric's value in the new report (``pass_rate``, ``errors`` ...), its ``_drop``
(base − new) or ``_rise`` (new − base), and ``p_value``.

Every gate compares the number its file holds, and its message shows that number: a
report's metric as report.json has it, and a change as compare.json's ``delta`` has it,
rounded to 12 decimal places (:func:`faultline.report.compare.change`), so a pass rate that
fell from 30% to 10% dropped by exactly 0.2 and ``pass_rate_drop>=0.2`` trips.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faultline._util.text import did_you_mean
from faultline.errors import UsageError
from faultline.report.compare import METRICS

__all__ = [
    "COMPARE_GATES",
    "KNOWN_METRICS",
    "Gate",
    "GateResult",
    "evaluate_compare_gates",
    "evaluate_gates",
    "parse_compare_gate",
    "parse_gate",
]

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_GATE = re.compile(
    r"^\s*([A-Za-z_][\w.\-]*)\s*(<=|>=|==|!=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)
_SHORT_NAMES = {
    "overall": (
        "pass_rate",
        "fail_rate",
        "coverage",
        "severity_weighted_pass_rate",
        "high_stakes_failure_rate",
        "boundary_language_rate",
        "safe_signal_total",
        "unsafe_signal_total",
        "safe_unsafe_signal_ratio",
    ),
    "counts": ("cases", "scored", "passed", "failed", "errors"),
    "indices": ("resilience_index", "exposure_index", "fragility_spread"),
}
_SLICE = (
    "n",
    "scored",
    "errors",
    "passed",
    "failed",
    "pass_rate",
    "risk_mean",
    "weighted_risk_mean",
    "severity_weighted_pass_rate",
    "high_stakes_failures",
)
_LEAVES: dict[str, tuple[str, ...]] = {
    "overall": _SHORT_NAMES["overall"],
    "overall.risk_score": ("mean", "median", "std", "p90", "max"),
    "overall.weighted_risk": ("mean", "median", "p90"),
    "counts": _SHORT_NAMES["counts"],
    "indices": _SHORT_NAMES["indices"],
    "per_probe": ("probes", "passed", "failed", "errors", "pass_rate", "fail_rate"),
    "by_transform": ("n", "scored", "passed", "failed", "errors", "pass_rate", "fail_rate"),
    "by_category": (
        "n",
        "pass_rate",
        "risk_mean",
        "risk_median",
        "weighted_risk_mean",
        "critical_failures",
        "high_failures",
        "safe_signal_hits_mean",
        "unsafe_signal_hits_mean",
        "boundary_rate",
    ),
    "by_severity": ("n", "passed", "failed", "pass_rate"),
    "by_expect": _SLICE,
    "by_model": _SLICE,
}
_SECTIONS = (
    "overall",
    "counts",
    "indices",
    "by_category",
    "by_severity",
    "by_expect",
    "by_model",
    "by_transform",
    "per_probe",
    "failure_mode_histogram",
)
_UNANSWERED = "unanswered"
KNOWN_METRICS = (*(name for names in _SHORT_NAMES.values() for name in names), _UNANSWERED)
"""The metric names a gate may use without a dotted path."""


@dataclass(frozen=True)
class Gate:
    """A parsed gate: ``name op threshold``."""

    name: str
    op: str
    threshold: float

    def __str__(self) -> str:
        return f"{self.name}{self.op}{_number(self.threshold)}"


@dataclass(frozen=True)
class GateResult:
    """A gate and what it found.

    Attributes:
        gate: The gate.
        value: The metric's value (``None`` when undefined).
        tripped: Whether the gate's condition holds (or the metric is undefined).
    """

    gate: Gate
    value: float | None
    tripped: bool

    def describe(self) -> str:
        """One line for the terminal: ``pass_rate<0.95 tripped: pass_rate is 0.912``."""
        shown = "undefined" if self.value is None else _number(self.value)
        state = "tripped" if self.tripped else "ok"
        return f"{self.gate} {state}: {self.gate.name} is {shown}"


def _number(value: float) -> str:
    """A number as a gate message shows it: every digit it has, so no two values read alike.

    The shortest text that reads back as the same float (``0.9533333333333334``, ``0.95``),
    and a whole number without a decimal point (``0``, ``3``).
    """
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def _parse(text: str, example: str) -> Gate:
    match = _GATE.match(text)
    if not match:
        raise UsageError(f"gate {text!r} is not of the form NAME OP NUMBER, e.g. {example}")
    name, op, number = match.groups()
    threshold = float(number)
    if not math.isfinite(threshold):
        raise UsageError(f"gate {text!r}: {number} is too large for a number; give a finite one")
    return Gate(name, op, threshold)


_FRACTIONS = frozenset(
    {
        "pass_rate",
        "fail_rate",
        "coverage",
        "severity_weighted_pass_rate",
        "high_stakes_failure_rate",
        "boundary_language_rate",
        "boundary_rate",
        "resilience_index",
        "exposure_index",
        "fragility_spread",
        "risk_mean",
        "risk_median",
        "weighted_risk_mean",
    }
)
"""The metrics that are fractions in [0, 1] (docs/metrics.md): rates, the two indices, and
statistics of ``risk_score`` and ``weighted_risk``, which are 0-1 (the spread is their standard
deviation). Counts, signal totals and their ratio have no upper bound."""


def _range(name: str) -> tuple[float, float] | None:
    """The values a report's metric can take, when bounded: ``(0, 1)`` for a fraction."""
    if "." not in name:
        return (0.0, 1.0) if name in _FRACTIONS else None
    section, _, leaf = _split(name)
    if section in ("overall.risk_score", "overall.weighted_risk") or leaf in _FRACTIONS:
        return (0.0, 1.0)
    return None


def _check_range(gate: Gate, text: str, bounds: tuple[float, float] | None) -> None:
    """Refuse a threshold outside the values its metric can take.

    Such a gate never trips (or always does): ``fail_rate>5``, meant as 5%, is a fraction's
    gate set at 500%.
    """
    if bounds is None:
        return
    low, high = bounds
    if low <= gate.threshold <= high:
        return
    what = "a change in a fraction" if low < 0 else "a fraction"
    hint = ""
    if low <= gate.threshold / 100 <= high:
        hint = f": did you mean {_number(round(gate.threshold / 100, 10))}?"
    raise UsageError(
        f"gate {text!r}: {gate.name} is {what}, from {_number(low)} to {_number(high)}, so the "
        f"gate could never trip (or always would); rates are fractions in [0, 1]{hint}"
    )


def parse_gate(text: str) -> Gate:
    """Parse ``NAME OP NUMBER``.

    Raises:
        UsageError: The text is not of that form, names an unknown metric, or gives a
            threshold outside the values the metric can take (``fail_rate>5``).
    """
    gate = _parse(text, "'pass_rate<0.95' or 'errors>0'")
    name = gate.name
    if "." in name:
        _check_path(name)
    elif name not in KNOWN_METRICS:
        raise UsageError(
            f"unknown gate metric '{name}'{did_you_mean(name, KNOWN_METRICS)}; "
            f"known: {', '.join(KNOWN_METRICS)}, or a dotted path such as by_category.NAME.pass_rate"
        )
    _check_range(gate, text, _range(name))
    return gate


def _split(name: str) -> tuple[str, str, str]:
    """``section.key.leaf`` (a key may itself hold dots, like a model name) or ``section.leaf``."""
    section, _, rest = name.partition(".")
    if section == "overall" and rest.split(".", 1)[0] in ("risk_score", "weighted_risk"):
        group, _, leaf = rest.partition(".")
        return f"overall.{group}", "", leaf
    if section in ("overall", "counts", "indices", "per_probe", "failure_mode_histogram"):
        return section, "", rest
    key, _, leaf = rest.rpartition(".")
    return section, key, leaf


def _check_path(name: str) -> None:
    section, key, leaf = _split(name)
    if section not in _SECTIONS and section not in _LEAVES:
        raise UsageError(
            f"gate metric '{name}' must start with one of {', '.join(_SECTIONS)}{did_you_mean(section, _SECTIONS)}"
        )
    if section == "failure_mode_histogram":
        if not leaf:
            raise UsageError(
                f"gate metric '{name}' needs a failure mode: failure_mode_histogram.MODE"
            )
        return
    leaves = _LEAVES[section]
    if leaf not in leaves or (section.startswith("by_") and not key):
        shape = f"{section}.NAME.METRIC" if section.startswith("by_") else f"{section}.METRIC"
        raise UsageError(
            f"gate metric '{name}' is not of the form {shape} with METRIC one of {', '.join(leaves)}"
            f"{did_you_mean(leaf, leaves)}"
        )


def _resolve(metrics: Mapping[str, Any], name: str, run: Mapping[str, Any] | None) -> Any:
    """The value a gate names, or ``None`` when this run does not have it."""
    if name == _UNANSWERED:
        probe_set = (run or {}).get("probe_set")
        return probe_set.get(_UNANSWERED) if isinstance(probe_set, Mapping) else None
    if "." not in name:
        section = next(sec for sec, names in _SHORT_NAMES.items() if name in names)
        return metrics.get(section, {}).get(name)
    section, key, leaf = _split(name)
    if section == "failure_mode_histogram":  # a mode that never occurred has a count of 0
        return metrics.get(section, {}).get(leaf, 0)
    node: Any = metrics
    for part in (*section.split("."), *([key] if key else []), leaf):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def evaluate_gates(
    gates: Sequence[str | Gate],
    metrics: Mapping[str, Any],
    run: Mapping[str, Any] | None = None,
) -> list[GateResult]:
    """Evaluate gates against ``aggregate_metrics``.

    ``run``: the report's ``run`` object, for ``unanswered`` (without it, that gate's value
    is undefined, so it trips).

    Raises:
        UsageError: A gate is malformed, names an unknown metric, or names a value that is
            not a number (a section rather than a metric).
    """
    results = []
    for raw in gates:
        gate = raw if isinstance(raw, Gate) else parse_gate(raw)
        value = _resolve(metrics, gate.name, run)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UsageError(f"gate metric '{gate.name}' is not a number")
        results.append(_judge(gate, value))
    return results


_COMPARE_COUNTS = ("regressions", "fixes", "new_failures", "removed", "became_error")
_COUNT_ALIASES = {name.partition(".")[2]: name for name in METRICS if name.startswith("counts.")}


def _compare_names() -> tuple[str, ...]:
    metrics = (*METRICS, *_COUNT_ALIASES)
    changes = tuple(f"{m}{suffix}" for m in metrics for suffix in ("_drop", "_rise"))
    return (*_COMPARE_COUNTS, "p_value", *metrics, *changes)


COMPARE_GATES = _compare_names()
"""The names a ``faultline compare`` gate may use."""


def parse_compare_gate(text: str) -> Gate:
    """Parse a ``faultline compare`` gate: ``NAME OP NUMBER`` with NAME in :data:`COMPARE_GATES`.

    Raises:
        UsageError: The text is not of that form, or names nothing a comparison has.
    """
    gate = _parse(text, "'regressions>0' or 'pass_rate_drop>0.02'")
    _check_compare_name(gate.name)
    _check_range(gate, text, _compare_range(gate.name))
    return gate


def _compare_range(name: str) -> tuple[float, float] | None:
    """The values a compare gate's number can take, when bounded.

    A rate or an index, and ``p_value``, are in [0, 1]; the ``_drop`` or ``_rise`` of one is a
    difference of two, in [-1, 1] (a fall of ten points is 0.1); counts have no bound.
    """
    if name == "p_value":
        return (0.0, 1.0)
    stem, suffix = name[:-5], name[-5:]
    changed = suffix in ("_drop", "_rise") and stem in METRICS
    spec = METRICS.get(stem if changed else name)
    if spec is None or spec[3] == "count":
        return None
    return (-1.0, 1.0) if changed else (0.0, 1.0)


def _check_compare_name(name: str) -> None:
    if name not in COMPARE_GATES:
        raise UsageError(
            f"unknown compare gate '{name}'{did_you_mean(name, COMPARE_GATES)}; known: "
            f"{', '.join(_COMPARE_COUNTS)}, p_value, or a metric ({', '.join(METRICS)}; "
            "counts also by their short names, e.g. errors) as its value in the new report, "
            "or with _drop (base - new) or _rise (new - base)"
        )


def _resolve_compare(result: Mapping[str, Any], name: str) -> Any:
    """The value a compare gate names, or ``None`` when it is undefined."""
    cases = result["cases"]
    if name == "new_failures":
        return cases["new_failures"]
    if name in _COMPARE_COUNTS:
        return len(cases[name])
    if name == "p_value":
        return result["significance"]["p_value"]
    stem, suffix = name[:-5], name[-5:]
    if suffix not in ("_drop", "_rise"):
        return result["metrics"][_COUNT_ALIASES.get(name, name)]["new"]
    delta = result["metrics"][_COUNT_ALIASES.get(stem, stem)]["delta"]
    return None if delta is None else -delta if suffix == "_drop" else delta


def evaluate_compare_gates(
    gates: Sequence[str | Gate], compare_result: Mapping[str, Any]
) -> list[GateResult]:
    """Evaluate ``faultline compare`` gates against a comparison (compare.json's object).

    ``regressions>0`` trips on any case that passed in the base run and fails in the new
    one; ``pass_rate<0.95`` on the new run's pass rate; ``severity_weighted_pass_rate_drop>0.02``
    when that rate fell by more than two points (by compare.json's ``delta``, rounded, so a
    fall of exactly two points does not trip it). An undefined value trips its gate.

    Raises:
        UsageError: A gate is malformed or names nothing a comparison has.
    """
    results = []
    for raw in gates:
        gate = raw if isinstance(raw, Gate) else parse_compare_gate(raw)
        _check_compare_name(gate.name)
        _check_range(gate, str(gate), _compare_range(gate.name))
        results.append(_judge(gate, _resolve_compare(compare_result, gate.name)))
    return results


def _judge(gate: Gate, value: Any) -> GateResult:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return GateResult(gate, None, True)
    return GateResult(gate, float(value), _OPS[gate.op](float(value), gate.threshold))
