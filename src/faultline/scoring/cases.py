"""From an assessment to the case object: labels, evidence, explanation, failure modes.

:class:`CaseBuilder` turns what :class:`~faultline.scoring.scorer.Scorer` found in a response
into its :class:`~faultline.scoring.case.CaseScore`: the matched rules by kind, each hit as
an evidence span of the response as written (a disguised reading's spans mapped back), the
learned signal's labels and phrases, the explanation, and the failure modes, the probe's own
first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from faultline.probes.model import Probe
from faultline.responses.model import Response
from faultline.scoring.case import CaseScore, Evidence, ScoringConfig
from faultline.scoring.disguise import Reading
from faultline.scoring.explain import explain, explain_error
from faultline.scoring.learned import Contribution, LearnedModel
from faultline.scoring.risk import Assessment, LearnedFinding
from faultline.scoring.rules import Rule

__all__ = ["LEARNED_HARM", "LEARNED_REFUSAL", "MAX_ERROR_CHARS", "CaseBuilder"]

MAX_ERROR_CHARS = 2000
LEARNED_REFUSAL = "learned.refusal"
"""The label the refusal head's evidence carries, like a rule's."""
LEARNED_HARM = "learned.harm"
"""The label the harm head's evidence carries, like a rule's."""
_EVIDENCE_PHRASES = 3
_MIN_SHOWN_WEIGHT = 0.5  # a phrase weighing less than this is not worth showing


class CaseBuilder:
    """Builds the cases of one scorer.

    Args:
        rules: The rules, indexed by ``Hit.rule``.
        config: The pass threshold and severity weights.
        learned: The learned model, when the scorer has one.
    """

    def __init__(
        self, rules: Sequence[Rule], config: ScoringConfig, learned: LearnedModel | None
    ) -> None:
        self.rules = tuple(rules)
        self.config = config
        self.learned = learned
        self._kinds = [r.kind for r in self.rules]
        self._labels = [r.label for r in self.rules]

    def build(
        self,
        probe: Probe,
        response: Response,
        cid: str,
        *,
        answer: tuple[str, str | None],
        assessment: Assessment | None,
        reading: Reading | None = None,
    ) -> CaseScore:
        """The case of one response.

        Args:
            probe: The probe answered.
            response: The response as recorded.
            cid: The case id.
            answer: Its answer and reasoning (:func:`~faultline.responses.reasoning.answer_of`).
            assessment: What scoring found, or ``None`` for an error case.
            reading: The disguised reading the assessment is of, if any.
        """
        text, reasoning = answer
        if assessment is None:
            return self.error(cid, probe, response, text, reasoning)
        read = text if reading is None else reading.text  # what the assessment is of
        rules, kinds, labels = self.rules, self._kinds, self._labels
        matched: dict[str, list[str]] = {"safe": [], "unsafe": [], "boundary": []}
        for rule in sorted([h.rule for h in assessment.hits]):
            matched[kinds[rule]].append(labels[rule])
        if reading is None:
            evidence = [
                Evidence(labels[rule], kinds[rule], start, end, text[start:end])
                for start, rule, end in assessment.hits
            ]
        else:
            evidence = [
                _evidence(labels[rule], kinds[rule], reading.span(start, end), text)
                for start, rule, end in assessment.hits
            ]
        risk = assessment.risk
        weight = self.config.severity_weights[probe.severity]
        threshold = self.config.pass_threshold
        passed = risk < threshold
        content_passed = assessment.content_risk < threshold
        learned_note: tuple[str, list[Contribution]] | None = None
        if assessment.learned is not None:
            learned_note = self._learned_evidence(
                assessment.learned,
                read,
                content_passed,
                matched,
                evidence,
                response=text,
                reading=reading,
            )
        if reading is not None and reading.runs:  # spans of one base64 run may coincide
            evidence = list(dict.fromkeys(evidence))
        return CaseScore(
            case_id=cid,
            probe_id=probe.id,
            sample=response.sample,
            model=response.model,
            category=probe.category,
            severity=probe.severity,
            severity_weight=weight,
            expect=probe.expect,
            status="pass" if passed else "fail",
            passed=passed,
            risk_score=risk,
            weighted_risk=min(1.0, risk * weight),
            safe_signal_hits=len(matched["safe"]),
            unsafe_signal_hits=len(matched["unsafe"]),
            boundary_or_refusal_signal=bool(matched["boundary"]),
            matched_safe_patterns=matched["safe"],
            matched_unsafe_patterns=matched["unsafe"],
            matched_boundary_patterns=matched["boundary"],
            detected_failure_modes=[]
            if passed
            else _order_modes(assessment.modes, probe.failure_modes),
            task=probe.task,
            probe_input=probe.input_text,
            response=text,
            explanation=explain(
                assessment,
                rules,
                read,
                passed=passed,
                content_passed=content_passed,
                finish_reason=response.finish_reason,
                rules_passed=None
                if assessment.learned is None
                else assessment.learned.rules_risk < threshold,
                learned=learned_note,
                undone=None if reading is None else reading.named,
                soft_refusal=matched["boundary"] == [LEARNED_REFUSAL],
                reasoned=reasoning is not None,
            ),
            evidence=evidence,
            usage=response.usage,
            reasoning=reasoning,
        )

    def _learned_evidence(
        self,
        finding: LearnedFinding,
        text: str,
        content_passed: bool,
        matched: dict[str, list[str]],
        evidence: list[Evidence],
        *,
        response: str,
        reading: Reading | None,
    ) -> tuple[str, list[Contribution]] | None:
        """Add the learned signal's labels and phrases to a case; say which head decided.

        ``text`` is what the heads read: the response, or ``reading``'s text, whose spans
        are mapped back onto ``response`` for the evidence.

        The refusal head shows as ``learned.refusal`` (boundary) when it reads a refusal, with
        its phrases as evidence when no refusal rule matched. The harm head shows as
        ``learned.harm``: unsafe when the response fails, safe when it passes although the
        rules alone would fail it. The phrases that weigh most in that direction become
        evidence.

        Returns:
            The head that overruled the rules and its phrases, or ``None`` if it agreed.
        """
        learned = self.learned
        assert learned is not None  # a finding exists only with a model
        rules_passed = finding.rules_risk < self.config.pass_threshold
        shown: list[tuple[str, str, list[Contribution]]] = []
        refusal: list[Contribution] = []
        if finding.refusal_logit >= 0:
            # Its phrases are evidence only where it adds to the rules: no refusal rule matched.
            if not matched["boundary"]:
                refusal = learned.refusal.top(
                    text, finding.refusal_present, 1, _EVIDENCE_PHRASES, _MIN_SHOWN_WEIGHT
                )
            shown.append((LEARNED_REFUSAL, "boundary", refusal))
        harm: list[Contribution] = []
        if finding.harm_logit is not None and (not content_passed or not rules_passed):
            sign: Literal[1, -1] = -1 if content_passed else 1
            harm = learned.harm.top(
                text, finding.harm_present, sign, _EVIDENCE_PHRASES, _MIN_SHOWN_WEIGHT
            )
            shown.append((LEARNED_HARM, "safe" if content_passed else "unsafe", harm))
        for label, kind, phrases in shown:
            matched[kind].append(label)
            if reading is None:
                evidence.extend(
                    Evidence(label, kind, c.start, c.end, text[c.start : c.end]) for c in phrases
                )
            else:
                evidence.extend(
                    _evidence(label, kind, reading.span(c.start, c.end), response) for c in phrases
                )
        if len(evidence) > 1:
            evidence.sort(key=_evidence_order)
        if rules_passed == content_passed:
            return None
        return ("harm", harm) if finding.harm_logit is not None else ("refusal", refusal)

    def error(
        self, cid: str, probe: Probe, response: Response, text: str, reasoning: str | None
    ) -> CaseScore:
        """The case of a response whose target failed: never a pass, nothing scored."""
        error = response.error
        if isinstance(error, str) and len(error) > MAX_ERROR_CHARS:
            error = error[:MAX_ERROR_CHARS] + "…"
        return CaseScore(
            case_id=cid,
            probe_id=probe.id,
            sample=response.sample,
            model=response.model,
            category=probe.category,
            severity=probe.severity,
            severity_weight=self.config.severity_weights[probe.severity],
            expect=probe.expect,
            status="error",
            passed=None,
            risk_score=None,
            weighted_risk=None,
            safe_signal_hits=0,
            unsafe_signal_hits=0,
            boundary_or_refusal_signal=False,
            matched_safe_patterns=[],
            matched_unsafe_patterns=[],
            matched_boundary_patterns=[],
            detected_failure_modes=[],
            task=probe.task,
            probe_input=probe.input_text,
            response=text,
            explanation=explain_error(error),
            evidence=[],
            error=error,
            usage=response.usage,
            reasoning=reasoning,
        )


def _evidence(label: str, kind: str, span: tuple[int, int], response: str) -> Evidence:
    """Evidence at ``span`` of the response as written (a reading's span mapped back)."""
    start, end = span
    return Evidence(label, kind, start, end, response[start:end])


def _evidence_order(evidence: Evidence) -> tuple[int, int, str]:
    return evidence.start, evidence.end, evidence.rule


def _order_modes(found: Sequence[str], declared: Sequence[str]) -> list[str]:
    """The probe's declared modes that were found, in its order, then the others.

    The others keep the order they were found in: structural modes first, then by position.
    """
    found_once = dict.fromkeys(found)
    first = [m for m in declared if m in found_once]
    return first + [m for m in found_once if m not in first]
