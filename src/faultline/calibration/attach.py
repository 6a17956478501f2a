"""Read a calibration.json for ``faultline score --calibration``: each rule's precision.

The report then carries, in ``run.calibration``, which file it came from, which scorer was
calibrated, and the measured precision of every rule, so a reader of a failed case can see
how often the rules that decided it are right.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from faultline._util.files import read_text_file, sha256_bytes
from faultline.calibration.summary import SCHEMA_VERSION
from faultline.errors import CalibrationError

__all__ = ["load_calibration"]

_RULE_KEYS = ("kind", "label", "fired", "fired_when_positive", "fired_when_negative", "precision")


def load_calibration(path: str | Path) -> dict[str, Any]:
    """The ``run.calibration`` object for a report, from a calibration.json.

    Raises:
        CalibrationError: The file is missing, not JSON, or not a calibration summary.
    """
    text = read_text_file(Path(path), CalibrationError)
    try:
        doc = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise CalibrationError(f"not valid JSON ({exc})", path=path) from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        raise CalibrationError(
            f"expected a calibration.json (schema_version {SCHEMA_VERSION!r}) written by "
            "'faultline calibrate'",
            path=path,
            field="schema_version",
        )
    rules = doc.get("rules")
    if not isinstance(rules, list):
        raise CalibrationError("expected a list of rules", path=path, field="rules")
    kept = []
    for i, rule in enumerate(rules):
        missing = [k for k in _RULE_KEYS if not isinstance(rule, dict) or k not in rule]
        if missing:
            raise CalibrationError(f"missing {', '.join(missing)}", path=path, field=f"rules[{i}]")
        kept.append({k: rule[k] for k in (*_RULE_KEYS, "precision_ci95") if k in rule})
    headline = next((g for g in doc.get("groups", []) if g.get("by") == "all"), None)
    return {
        "file": Path(path).name,
        "sha256": sha256_bytes(text.encode("utf-8")),
        "scorer": doc.get("scorer"),
        "rows": None if headline is None else headline.get("rows"),
        "rules": kept,
    }
