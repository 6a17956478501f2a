"""Run the examples embedded in a rule pack.

Each rule must match its ``match`` texts and must not match its ``no_match`` texts, through
the same compiled matcher used for scoring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from faultline.scoring.matcher import Matcher
from faultline.scoring.rules import RulePack

__all__ = ["ExampleResult", "run_examples"]


@dataclass(frozen=True)
class ExampleResult:
    """The outcome of one embedded example.

    Attributes:
        rule: The rule's label.
        expect: ``match`` or ``no_match``.
        text: The example text.
        ok: Whether the rule behaved as the example says.
        line: The example's line in its pack file (the rule's, for a rule made in code).
    """

    rule: str
    expect: Literal["match", "no_match"]
    text: str
    ok: bool
    line: int


def run_examples(pack: RulePack, matcher: Matcher | None = None) -> list[ExampleResult]:
    """Check every embedded example of every rule.

    Args:
        pack: The rule pack.
        matcher: A compiled matcher for ``pack``, to reuse one already built.

    Returns:
        One result per example, in pack order.
    """
    matcher = matcher or Matcher(pack)
    results = []
    for index, rule in enumerate(pack.rules):
        cases: list[tuple[Literal["match", "no_match"], str]] = [
            *(("match", t) for t in rule.examples_match),
            *(("no_match", t) for t in rule.examples_no_match),
        ]
        lines = rule.example_lines or (rule.line,) * len(cases)
        for (expect, text), line in zip(cases, lines, strict=True):
            hit = any(h.rule == index for h in matcher.match(text))
            ok = hit == (expect == "match")
            results.append(ExampleResult(rule.label, expect, text, ok, line))
    return results
