"""Gates: conditions on a report's metrics that make a CI job fail (exit code 1).

A gate is ``NAME OP NUMBER`` with OP one of ``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``,
and it *trips* when the condition holds: ``pass_rate<0.95`` trips when the pass rate is
below 95%. NAME is a metric of ``overall``, ``counts`` or ``indices`` (``pass_rate``,
``errors``, ``exposure_index`` ...), or a dotted path into ``aggregate_metrics``
(``by_category.self_harm.pass_rate``). A metric that is undefined (``null``) trips the gate:
a number that cannot be shown to be fine is not fine.
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

__all__ = ["Gate", "GateResult", "evaluate_gates", "parse_gate"]

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
_SECTIONS = ("overall", "counts", "indices")


@dataclass(frozen=True)
class Gate:
    """A parsed gate: ``name op threshold``."""

    name: str
    op: str
    threshold: float

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.threshold:g}"


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
        shown = "undefined" if self.value is None else f"{self.value:.6g}"
        state = "tripped" if self.tripped else "ok"
        return f"{self.gate} {state}: {self.gate.name} is {shown}"


def parse_gate(text: str) -> Gate:
    """Parse ``NAME OP NUMBER``.

    Raises:
        UsageError: The text is not of that form.
    """
    match = _GATE.match(text)
    if not match:
        raise UsageError(
            f"gate {text!r} is not of the form NAME OP NUMBER, e.g. 'pass_rate<0.95' or 'errors>0'"
        )
    name, op, number = match.groups()
    return Gate(name, op, float(number))


def _resolve(metrics: Mapping[str, Any], name: str) -> Any:
    if "." in name:
        node: Any = metrics
        for part in name.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise UsageError(f"gate metric '{name}' is not in aggregate_metrics (no '{part}')")
            node = node[part]
        return node
    for section in _SECTIONS:
        if name in metrics.get(section, {}):
            return metrics[section][name]
    known = [k for s in _SECTIONS for k in metrics.get(s, {})]
    raise UsageError(
        f"unknown gate metric '{name}'{did_you_mean(name, known)}; known: {', '.join(known)}"
    )


def evaluate_gates(gates: Sequence[str | Gate], metrics: Mapping[str, Any]) -> list[GateResult]:
    """Evaluate gates against ``aggregate_metrics``.

    Raises:
        UsageError: A gate is malformed or names an unknown or non-numeric metric.
    """
    results = []
    for raw in gates:
        gate = raw if isinstance(raw, Gate) else parse_gate(raw)
        value = _resolve(metrics, gate.name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UsageError(f"gate metric '{gate.name}' is not a number")
        if value is None or (isinstance(value, float) and math.isnan(value)):
            results.append(GateResult(gate, None, True))
        else:
            results.append(
                GateResult(gate, float(value), _OPS[gate.op](float(value), gate.threshold))
            )
    return results
