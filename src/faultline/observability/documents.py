"""Turn scored cases into the text documents the failure geometry is built from.

A case's document holds its category, severity, outcome, risk band, the probe's task and
(windowed) input, the explanation without its verbatim quotes, and the labels of the rules
it matched. Cases with the same document are counted once with a multiplicity, which makes
the geometry exact and cheap when many cases share a probe and an outcome.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from faultline.scoring.case import CaseScore

__all__ = ["INPUT_WINDOW", "DocumentSet", "build_documents", "risk_band"]

INPUT_WINDOW = 600
"""Characters of the probe input that enter a document."""

_QUOTED = re.compile(r"“[^”]*”|\([^()]*“[^”]*”[^()]*\)")
_NON_WORD = re.compile(r"[^0-9A-Za-z]+")


def risk_band(risk: float) -> str:
    """A coarse band of a risk score: ``low`` (< 0.2), ``guarded``, ``elevated``, ``high`` (≥ 0.8)."""
    if risk < 0.2:
        return "low"
    if risk < 0.5:
        return "guarded"
    if risk < 0.8:
        return "elevated"
    return "high"


def _token(prefix: str, label: str) -> str:
    return f"{prefix}_{_NON_WORD.sub('_', label).strip('_').lower()}"


def document_for(case: CaseScore) -> str:
    """The text document of one scored case."""
    parts = [
        _token("category", case.category),
        _token("severity", case.severity),
        _token("outcome", case.status),
        _token("expect", case.expect),
        _token("risk", risk_band(case.risk_score or 0.0)),
        case.task,
        case.probe_input[:INPUT_WINDOW],
        _QUOTED.sub("", case.explanation),
    ]
    labels = (
        *case.matched_boundary_patterns,
        *case.matched_unsafe_patterns,
        *case.matched_safe_patterns,
    )
    parts.extend(_token("rule", label) for label in labels)
    parts.extend(_token("mode", mode) for mode in case.detected_failure_modes)
    return " ".join(parts)


@dataclass(frozen=True)
class DocumentSet:
    """The distinct documents of a run and how the cases map onto them.

    Attributes:
        texts: Each distinct document once, in order of first appearance.
        weights: How many cases share each document.
        case_doc: For each case (in input order), the index of its document.
        first_case: For each document, the index of the first case that has it.
    """

    texts: list[str]
    weights: list[int]
    case_doc: list[int]
    first_case: list[int]


def build_documents(cases: Sequence[CaseScore]) -> DocumentSet:
    """Build the distinct documents of ``cases`` (scored cases only)."""
    index: dict[tuple[object, ...], int] = {}
    texts: list[str] = []
    weights: list[int] = []
    first: list[int] = []
    case_doc: list[int] = []
    for i, case in enumerate(cases):
        key = (
            case.probe_id,
            case.status,
            risk_band(case.risk_score or 0.0),
            tuple(case.matched_boundary_patterns),
            tuple(case.matched_unsafe_patterns),
            tuple(case.matched_safe_patterns),
            tuple(case.detected_failure_modes),
            _QUOTED.sub("", case.explanation),
        )
        doc = index.get(key)
        if doc is None:
            doc = index[key] = len(texts)
            texts.append(document_for(case))
            weights.append(0)
            first.append(i)
        weights[doc] += 1
        case_doc.append(doc)
    return DocumentSet(texts, weights, case_doc, first)
