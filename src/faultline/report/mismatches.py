"""Warnings when a run's parts were made for other parts: a learned model, a calibration.

A learned model is tied to the rule pack it was trained with (its features are the rules'),
and a calibration measured one rule pack and one learned model. The run records all of them
(``run.rules``, ``run.learned`` with the pack it was trained with, ``run.calibration.scorer``),
so :func:`scorer_mismatches` finds a mismatch from the report alone: report.md shows it, and
the CLI prints the same warnings on stderr. Each is a warning, never an error: the figures
may still be close, and the user may mean it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Mismatch", "plain_named", "scorer_mismatches"]

Named = Callable[[Mapping[str, Any] | None], str]
"""How a rule pack or learned model is named in a warning (escaped for its medium)."""


@dataclass(frozen=True)
class Mismatch:
    """One warning.

    Attributes:
        about: ``learned`` (the learned model and the rules in use) or ``calibration`` (the
            calibration and the scorer in use): where report.md shows it.
        text: The warning, one sentence without the leading "Warning: ".
    """

    about: Literal["learned", "calibration"]
    text: str


def plain_named(part: Mapping[str, Any] | None) -> str:
    """``name version (sha256 abc…)`` as plain text, or ``not recorded``."""
    if not part or part.get("name") is None:
        return "not recorded"
    version = f" {part['version']}" if part.get("version") else ""
    sha = str(part.get("sha256") or "")[:12]
    return f"{part['name']}{version}" + (f" (sha256 {sha})" if sha else "")


def scorer_mismatches(run: Mapping[str, Any], named: Named = plain_named) -> list[Mismatch]:
    """The warnings for a report's ``run`` (or a calibration's ``scorer``: the same keys).

    - the learned model was trained with another rule pack than ``run.rules`` (when the run
      records its rules);
    - the calibration measured another rule pack than ``run.rules``;
    - the calibration measured another learned model than ``run.learned`` (by sha256, or by
      name and version when the calibration records no sha256, as ``--train``'s does), or
      none (``--rules-only``) where the run used one. A run with the rules alone reads only
      the rules' precision, which does not depend on the learned signal: no warning.
    - the calibration was made at another pass threshold than ``run.config`` (when both
      are recorded) and the run used a learned model: ``learned.harm`` fires as safe or
      unsafe by the threshold, the rules' matches do not.

    Args:
        run: ``rules``, ``learned`` (with its ``rules``), ``config`` and ``calibration``, if
            any.
        named: How a pack or model is named in the text.
    """
    found: list[Mismatch] = []
    rules = _part(run.get("rules"))
    learned = run.get("learned")
    trained_with = _part(learned.get("rules")) if isinstance(learned, Mapping) else None
    recorded = rules is not None and rules.get("sha256") is not None
    if isinstance(learned, Mapping) and trained_with and recorded and _differ(trained_with, rules):
        found.append(
            Mismatch(
                "learned",
                f"the learned signal {named(learned)} was trained with rules "
                f"{named(trained_with)}, but this run used {named(rules)}; its verdicts may "
                "not hold (retrain it on these rules: docs/calibration.md)",
            )
        )
    calibration = run.get("calibration")
    scorer = _part(calibration.get("scorer")) if isinstance(calibration, Mapping) else None
    if scorer is None:
        return found
    calibrated_rules = _part(scorer.get("rules"))
    if (calibrated_rules or {}).get("sha256") != (rules or {}).get("sha256"):
        found.append(
            Mismatch(
                "calibration",
                f"calibrated with rules {named(calibrated_rules)}, but this run used "
                f"{named(rules)}; the figures may not hold",
            )
        )
    calibrated = _part(scorer.get("learned"))
    if "learned" in scorer and calibrated is None and isinstance(learned, Mapping):
        found.append(
            Mismatch(
                "calibration",
                f"calibrated with the rules alone, but this run used learned signal "
                f"{named(learned)}; learned.refusal and learned.harm have no measured precision",
            )
        )
    threshold = (_part(run.get("config")) or {}).get("pass_threshold")
    calibrated_at = (_part(calibration) or {}).get("pass_threshold")
    recorded_both = threshold is not None and calibrated_at is not None
    if isinstance(learned, Mapping) and recorded_both and threshold != calibrated_at:
        found.append(
            Mismatch(
                "calibration",
                f"calibrated at pass threshold {calibrated_at}, but this run used {threshold}; "
                "the precision of learned.harm may not hold (it fires as safe or unsafe by the "
                "threshold)",
            )
        )
    if calibrated and isinstance(learned, Mapping) and _differ(calibrated, learned):
        found.append(
            Mismatch(
                "calibration",
                f"calibrated with learned signal {named(calibrated)}, but this run used "
                f"{named(learned)}; the precision of learned.refusal and learned.harm may "
                "not hold",
            )
        )
    return found


def _part(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _differ(made_for: Mapping[str, Any], in_use: Mapping[str, Any] | None) -> bool:
    """Whether two packs or models differ: by sha256, or by name and version without one."""
    if in_use is None:
        return True
    if made_for.get("sha256") and in_use.get("sha256"):
        return bool(made_for["sha256"] != in_use["sha256"])
    return (made_for.get("name"), made_for.get("version")) != (
        in_use.get("name"),
        in_use.get("version"),
    )
