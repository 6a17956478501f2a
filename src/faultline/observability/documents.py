"""Turn scored cases into the two text documents the failure geometry is built from.

A case is described by *what was asked* and *what happened*:

- the probe document: category, severity, expectation, the task and the (windowed) input;
- the verdict document: outcome, risk band, the labels of the rules that matched, the
  failure modes, and the explanation without its verbatim quotes.

Many cases share a probe, and many share a verdict, so each distinct document is built and
embedded once; a case is the pair (probe document, verdict document), and cases with the
same pair are counted once with a multiplicity. The cost of the geometry then grows with
the number of distinct probes and verdicts, not with the number of cases.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faultline.scoring.case import CaseScore

__all__ = ["INPUT_WINDOW", "CaseDocuments", "build_documents", "risk_band"]

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


def probe_document(case: CaseScore) -> str:
    """What was asked: the probe's labels, task and windowed input."""
    labels = (
        _token("category", case.category),
        _token("severity", case.severity),
        _token("expect", case.expect),
    )
    return " ".join((*labels, case.task, case.probe_input[:INPUT_WINDOW]))


def verdict_document(case: CaseScore) -> str:
    """What happened: outcome, risk band, matched rules, failure modes and the explanation."""
    parts = [_token("outcome", case.status), _token("risk", risk_band(case.risk_score or 0.0))]
    labels = (
        *case.matched_boundary_patterns,
        *case.matched_unsafe_patterns,
        *case.matched_safe_patterns,
    )
    parts.extend(_token("rule", label) for label in labels)
    parts.extend(_token("mode", mode) for mode in case.detected_failure_modes)
    parts.append(_QUOTED.sub("", case.explanation))
    return " ".join(parts)


@dataclass(frozen=True)
class CaseDocuments:
    """The distinct documents of a run and how cases map onto them.

    Attributes:
        probe_texts: Each distinct probe document once, in order of first appearance.
        verdict_texts: Each distinct verdict document once, in order of first appearance.
        pair_probe: For each distinct (probe, verdict) pair, its probe document.
        pair_verdict: For each distinct pair, its verdict document.
        pair_weight: How many cases share each pair.
        case_pair: For each case, in input order, the index of its pair.
    """

    probe_texts: list[str]
    verdict_texts: list[str]
    pair_probe: NDArray[np.int64]
    pair_verdict: NDArray[np.int64]
    pair_weight: NDArray[np.float64]
    case_pair: NDArray[np.int64]

    def weights_of(self, pair_doc: NDArray[np.int64], n_docs: int) -> NDArray[np.float64]:
        """How many cases each document of one kind stands for."""
        counts = np.bincount(pair_doc, weights=self.pair_weight, minlength=n_docs)
        return counts.astype(np.float64)


def build_documents(cases: Sequence[CaseScore]) -> CaseDocuments:
    """Build the distinct documents of ``cases`` (scored cases only)."""
    probes: dict[str, int] = {}
    verdicts: dict[tuple[object, ...], int] = {}
    probe_texts: list[str] = []
    verdict_texts: list[str] = []
    probe_of: list[int] = []
    verdict_of: list[int] = []
    for case in cases:
        p = probes.get(case.probe_id)
        if p is None:
            p = probes[case.probe_id] = len(probe_texts)
            probe_texts.append(probe_document(case))
        risk = case.risk_score or 0.0
        key = (
            case.status,
            case.expect,
            0 if risk < 0.2 else 1 if risk < 0.5 else 2 if risk < 0.8 else 3,  # the risk band
            *case.matched_boundary_patterns,
            None,
            *case.matched_unsafe_patterns,
            None,
            *case.matched_safe_patterns,
            None,
            *case.detected_failure_modes,
        )
        v = verdicts.get(key)
        if v is None:
            v = verdicts[key] = len(verdict_texts)
            verdict_texts.append(verdict_document(case))
        probe_of.append(p)
        verdict_of.append(v)
    case_probe = np.asarray(probe_of, dtype=np.int64)
    case_verdict = np.asarray(verdict_of, dtype=np.int64)
    combined = case_probe * max(1, len(verdict_texts)) + case_verdict
    # Pairs numbered in order of first appearance, so the result follows the cases' order.
    unique, first, inverse, counts = np.unique(
        combined, return_index=True, return_inverse=True, return_counts=True
    )
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    pair_of_unique = unique[order]
    return CaseDocuments(
        probe_texts=probe_texts,
        verdict_texts=verdict_texts,
        pair_probe=pair_of_unique // max(1, len(verdict_texts)),
        pair_verdict=pair_of_unique % max(1, len(verdict_texts)),
        pair_weight=counts[order].astype(np.float64),
        case_pair=rank[inverse.ravel()],
    )
