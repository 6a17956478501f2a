"""Read a calibration.json for ``faultline score --calibration``: each rule's precision.

The report then carries, in ``run.calibration``, which file it came from, which scorer was
calibrated, and the measured precision of every rule, so a reader of a failed case can see
how often the rules that decided it are right. The file is checked field by field (it may
come from anywhere): a wrong type, or a value no calibration holds (a precision or an interval
outside [0, 1], a negative count, ``fired`` other than its two parts' sum, a precision or an
interval other than its counts give, a rule listed twice), is an error naming the field, never
a crash or a wrong figure later.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import msgspec

from faultline._util.files import TOO_DEEP, json_error_line, read_text_and_bytes, sha256_bytes
from faultline.calibration.measures import wilson_interval
from faultline.calibration.summary import AGREEING, SCHEMA_VERSION
from faultline.errors import CalibrationError

__all__ = ["load_calibration"]


class _Rule(msgspec.Struct, frozen=True):
    kind: Literal["boundary", "unsafe", "safe"]
    label: str
    fired: int
    fired_when_positive: int
    fired_when_negative: int
    precision: float | None
    precision_ci95: tuple[float, float] | None = None


class _Group(msgspec.Struct, frozen=True):
    by: str
    name: str | None  # None: the rows without a source (or model)
    rows: int


class _Identity(msgspec.Struct, frozen=True):
    name: str | None = None
    version: str | None = None
    sha256: str | None = None


class _Scorer(msgspec.Struct, frozen=True):
    rules: _Identity | None = None
    learned: _Identity | None = None


class _Config(msgspec.Struct, frozen=True):
    pass_threshold: float | None = None


class _Calibration(msgspec.Struct, frozen=True):
    schema_version: str
    rules: list[_Rule]
    groups: list[_Group] = []
    scorer: _Scorer | None = None
    config: _Config | None = None


_FIELD = re.compile(r"at `\$\.([^`]+)`")
_MISSING = re.compile(r"missing required field `([^`]+)`")


def load_calibration(path: str | Path) -> dict[str, Any]:
    """The ``run.calibration`` object for a report, from a calibration.json.

    Raises:
        CalibrationError: The file is missing, not JSON, or not a calibration summary.
    """
    text, data = read_text_and_bytes(Path(path), CalibrationError)
    try:
        doc = msgspec.json.decode(text, type=_Calibration)
    except msgspec.ValidationError as exc:
        message = str(exc)
        found = _FIELD.search(message)
        field = found.group(1) if found else None
        missing = _MISSING.search(message)
        if missing:
            field = f"{field}.{missing.group(1)}" if field else missing.group(1)
        raise CalibrationError(
            f"{_FIELD.sub('', message).strip(' -')}; expected a calibration.json written by "
            "'faultline calibrate'",
            path=path,
            field=field,
        ) from None
    except msgspec.DecodeError as exc:
        line = json_error_line(exc, text.encode("utf-8"))
        raise CalibrationError(f"not valid JSON ({exc})", path=path, line=line) from None
    except RecursionError:
        raise CalibrationError(TOO_DEEP, path=path) from None
    if doc.schema_version != SCHEMA_VERSION:
        raise CalibrationError(
            f"got {doc.schema_version!r}, expected {SCHEMA_VERSION!r} (a calibration.json "
            "written by 'faultline calibrate')",
            path=path,
            field="schema_version",
        )
    problem = _problem(doc)
    if problem is not None:
        field, reason = problem
        raise CalibrationError(reason, path=path, field=field)
    headline = next((g for g in doc.groups if g.by == "all"), None)
    return {
        "file": Path(path).name,
        "sha256": sha256_bytes(data),  # of the file's bytes, as sha256sum gives it
        "scorer": None if doc.scorer is None else msgspec.to_builtins(doc.scorer),
        "rows": None if headline is None else headline.rows,
        "rules": [msgspec.to_builtins(r) for r in doc.rules],
        "pass_threshold": None if doc.config is None else doc.config.pass_threshold,
    }


def _problem(doc: _Calibration) -> tuple[str, str] | None:
    """The first value that no calibration can hold, as ``(field, reason)``, or ``None``."""
    seen: dict[tuple[str, str], int] = {}
    for i, rule in enumerate(doc.rules):
        problem = _rule_problem(rule, f"rules[{i}]")
        if problem is not None:
            return problem
        first = seen.setdefault((rule.kind, rule.label), i)
        if first != i:
            return (
                f"rules[{i}].label",
                f"{rule.kind} rule {rule.label!r} is already rules[{first}], expected each rule once",
            )
    for i, group in enumerate(doc.groups):
        if group.rows < 0:
            return f"groups[{i}].rows", f"got {group.rows}, expected a count of 0 or more"
    return None


def _rule_problem(rule: _Rule, where: str) -> tuple[str, str] | None:
    for key in ("fired", "fired_when_positive", "fired_when_negative"):
        if getattr(rule, key) < 0:
            return f"{where}.{key}", f"got {getattr(rule, key)}, expected a count of 0 or more"
    parts = rule.fired_when_positive + rule.fired_when_negative
    if rule.fired != parts:
        return (
            f"{where}.fired",
            f"got {rule.fired}, expected fired_when_positive + fired_when_negative ({parts})",
        )
    if rule.precision is not None and not 0 <= rule.precision <= 1:
        return f"{where}.precision", f"got {rule.precision!r}, expected a fraction in [0, 1]"
    if rule.precision_ci95 is not None:
        low, high = rule.precision_ci95
        if not 0 <= low <= high <= 1:
            return (
                f"{where}.precision_ci95",
                f"got [{low!r}, {high!r}], expected [low, high] with 0 <= low <= high <= 1",
            )
    return _consistency_problem(rule, where)


_ROUNDING = 0.0005 + 1e-9
"""How far a precision or an end of its interval may be from what its counts give: rounded to
three places, as shown."""


def _consistency_problem(rule: _Rule, where: str) -> tuple[str, str] | None:
    """A precision that its own counts or interval contradict, as ``(field, reason)``."""
    agreeing = AGREEING[rule.kind]
    if rule.fired == 0:
        for key in ("precision", "precision_ci95"):
            value = getattr(rule, key)
            if value is not None:
                return (
                    f"{where}.{key}",
                    f"got {list(value) if isinstance(value, tuple) else value!r} for a rule that "
                    "never fired (fired is 0), "
                    "expected null: a precision of no firings is undefined",
                )
        return None
    expected = getattr(rule, agreeing) / rule.fired
    counts = f"{agreeing} / fired = {getattr(rule, agreeing)}/{rule.fired}"
    shown = f"{counts} = {expected:.3f}"
    if rule.precision is None or abs(rule.precision - expected) > _ROUNDING:
        return f"{where}.precision", f"got {rule.precision!r}, expected {shown}"
    if rule.precision_ci95 is not None:
        low, high = rule.precision_ci95
        if not low - _ROUNDING <= rule.precision <= high + _ROUNDING:
            return (
                f"{where}.precision_ci95",
                f"got [{low!r}, {high!r}], which does not hold the precision "
                f"{rule.precision!r}; expected an interval around it",
            )
        wilson = wilson_interval(getattr(rule, agreeing), rule.fired)
        if wilson is not None and not (
            abs(low - wilson[0]) <= _ROUNDING and abs(high - wilson[1]) <= _ROUNDING
        ):
            return (
                f"{where}.precision_ci95",
                f"got [{low!r}, {high!r}], expected the 95% Wilson interval of {counts}, "
                f"[{wilson[0]:.3f}, {wilson[1]:.3f}]",
            )
    return None
