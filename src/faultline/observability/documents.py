"""Turn scored cases into the two text documents the failure geometry is built from.

A case is described by *what was asked* and *what happened*:

- the probe document: category, severity, expectation, the task and the (windowed) input;
- the verdict document: outcome, risk band, the labels of the rules that matched, the
  failure modes, and the explanation without its verbatim quotes.

Many cases share a probe, and many share a verdict, so each distinct document is built and
embedded once; a case is the pair (probe document, verdict document), and cases with the
same pair are counted once with a multiplicity. The cost of the geometry then grows with
the number of distinct probes and verdicts, not with the number of cases.

Cases with the same verdict key can differ in the wording of their explanation (which rule
is named first, say); the verdict document uses the explanation of the case with the
smallest id, so it does not depend on the order in which cases are seen.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from faultline.scoring.case import CaseScore

__all__ = [
    "INPUT_WINDOW",
    "CaseDocuments",
    "VerdictTable",
    "build_documents",
    "first_appearance",
    "pair_documents",
    "probe_document",
    "risk_band",
    "verdict_key",
]

INPUT_WINDOW = 600
"""Characters of the probe input that enter a document."""

_QUOTED = re.compile(r"“[^”]*”|\([^()]*“[^”]*”[^()]*\)")
_NON_WORD = re.compile(r"[^0-9A-Za-z]+")
_BANDS = ("low", "guarded", "elevated", "high")

VerdictKey = tuple[object, ...]


def risk_band(risk: float) -> str:
    """A coarse band of a risk score: ``low`` (< 0.2), ``guarded``, ``elevated``, ``high`` (≥ 0.8)."""
    return _BANDS[_band(risk)]


def _band(risk: float) -> int:
    return 0 if risk < 0.2 else 1 if risk < 0.5 else 2 if risk < 0.8 else 3


def _token(prefix: str, label: str) -> str:
    return f"{prefix}_{_NON_WORD.sub('_', label).strip('_').lower()}"


def probe_document(category: str, severity: str, expect: str, task: str, probe_input: str) -> str:
    """What was asked: the probe's labels, task and windowed input."""
    labels = (_token("category", category), _token("severity", severity), _token("expect", expect))
    return " ".join((*labels, task, probe_input[:INPUT_WINDOW]))


def verdict_key(case: CaseScore) -> VerdictKey:
    """What identifies a case's verdict document: outcome, risk band, rules and modes."""
    return (
        case.status,
        case.expect,
        _band(case.risk_score or 0.0),
        *case.matched_boundary_patterns,
        None,
        *case.matched_unsafe_patterns,
        None,
        *case.matched_safe_patterns,
        None,
        *case.detected_failure_modes,
    )


def _verdict_text(key: VerdictKey, explanation: str) -> str:
    status, _, band, *labels = key
    groups: list[list[str]] = [[]]
    for label in labels:
        if label is None:
            groups.append([])
        else:
            groups[-1].append(str(label))
    rules = [label for group in groups[:3] for label in group]
    modes = groups[3] if len(groups) > 3 else []
    parts = [_token("outcome", str(status)), _token("risk", _BANDS[int(band)])]  # type: ignore[call-overload]
    parts.extend(_token("rule", label) for label in rules)
    parts.extend(_token("mode", mode) for mode in modes)
    parts.append(explanation)
    return " ".join(parts)


class VerdictTable:
    """The distinct verdict keys seen so far, each with one canonical explanation.

    The canonical explanation of a key is that of its case with the smallest id, so tables
    built over parts of a run merge exactly, whatever the order of the parts.
    """

    def __init__(self) -> None:
        self.index: dict[VerdictKey, int] = {}
        self.chosen: list[tuple[str, str]] = []  # (case id, explanation) per verdict

    def add(self, case: CaseScore) -> int:
        """Record one scored case; return its verdict's index in this table."""
        key = verdict_key(case)
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.chosen)
            self.chosen.append((case.case_id, case.explanation))
        elif case.case_id < self.chosen[i][0]:
            self.chosen[i] = (case.case_id, case.explanation)
        return i

    def merge(self, other: VerdictTable) -> NDArray[np.int64]:
        """Fold ``other`` in; return, for each of its indices, the index in this table."""
        mapping = np.empty(len(other.chosen), dtype=np.int64)
        for key, j in other.index.items():
            i = self.index.get(key)
            if i is None:
                i = self.index[key] = len(self.chosen)
                self.chosen.append(other.chosen[j])
            elif other.chosen[j][0] < self.chosen[i][0]:
                self.chosen[i] = other.chosen[j]
            mapping[j] = i
        return mapping

    def verdict_keys(self) -> list[VerdictKey]:
        """The verdict keys, by index."""
        return sorted(self.index, key=self.index.__getitem__)

    def texts(self) -> list[str]:
        """The verdict documents, by index (explanations without their verbatim quotes)."""
        return [
            _verdict_text(key, _QUOTED.sub("", self.chosen[self.index[key]][1]))
            for key in self.verdict_keys()
        ]


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
    """Build the distinct documents of ``cases`` (scored cases only, in report order)."""
    probes: dict[str, int] = {}
    probe_texts: list[str] = []
    probe_of: list[int] = []
    table = VerdictTable()
    verdict_of = [table.add(case) for case in cases]
    for case in cases:
        p = probes.get(case.probe_id)
        if p is None:
            p = probes[case.probe_id] = len(probe_texts)
            probe_texts.append(
                probe_document(
                    case.category, case.severity, case.expect, case.task, case.probe_input
                )
            )
        probe_of.append(p)
    return pair_documents(
        probe_texts,
        table.texts(),
        np.asarray(probe_of, dtype=np.int64),
        np.asarray(verdict_of, dtype=np.int64),
    )


def first_appearance(codes: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Renumber codes by first appearance: ``(new code of each item, old code of each new code)``."""
    unique, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inverse.ravel()], unique[order]


def pair_documents(
    probe_texts: list[str],
    verdict_texts: list[str],
    case_probe: NDArray[np.int64],
    case_verdict: NDArray[np.int64],
) -> CaseDocuments:
    """Pair each case's probe and verdict documents, counting the cases of each pair.

    Documents and pairs are numbered by first appearance over the cases, so the result
    depends only on the cases' order, not on how the document lists were built.

    Args:
        probe_texts: Probe documents, indexed by ``case_probe``.
        verdict_texts: Verdict documents, indexed by ``case_verdict``.
        case_probe: Each case's probe document.
        case_verdict: Each case's verdict document.
    """
    probe_new, probe_old = first_appearance(case_probe)
    verdict_new, verdict_old = first_appearance(case_verdict)
    n_verdicts = max(1, verdict_old.size)
    case_pair, pair_codes = first_appearance(probe_new * n_verdicts + verdict_new)
    return CaseDocuments(
        probe_texts=[probe_texts[i] for i in probe_old.tolist()],
        verdict_texts=[verdict_texts[i] for i in verdict_old.tolist()],
        pair_probe=pair_codes // n_verdicts,
        pair_verdict=pair_codes % n_verdicts,
        pair_weight=np.bincount(case_pair, minlength=pair_codes.size).astype(np.float64),
        case_pair=case_pair,
    )
