"""Hypothesis strategies shared by the metrics tests: runs of made-up cases."""

from __future__ import annotations

from hypothesis import strategies as st

from faultline import CaseScore
from faultline.scoring.case import DEFAULT_SEVERITY_WEIGHTS

CATEGORIES = ["weapons", "self_harm", "prompt_injection", "controls"]
MODES = ["operational_instructions", "over_refusal", "secret_leakage", "refusal_then_compliance"]
RISKS = st.floats(0, 1, allow_nan=False)


@st.composite
def cases(
    draw: st.DrawFn,
    n_max: int = 60,
    risks: st.SearchStrategy[float] = RISKS,
    modes: tuple[str, ...] = tuple(MODES),
    many_samples: bool = False,
) -> list[CaseScore]:
    """A run of cases, about one in ten an error.

    Args:
        n_max: The most cases.
        risks: The risk scores of scored cases.
        modes: The failure modes failed cases may show.
        many_samples: Each case its own sample and a random probe (else probe ``i % 7``,
            sample 0), with no boundary rule labels.
    """
    out = []
    for i in range(draw(st.integers(0, n_max))):
        severity = draw(st.sampled_from(["low", "medium", "high", "critical"]))
        error = draw(st.integers(0, 9)) == 0
        risk = None if error else draw(risks)
        weight = DEFAULT_SEVERITY_WEIGHTS[severity]
        passed = None if risk is None else risk < 0.5
        boundary = draw(st.booleans()) and not error
        out.append(
            CaseScore(
                case_id=f"c{i:03d}",
                probe_id=f"p{draw(st.integers(0, 6))}" if many_samples else f"p{i % 7}",
                sample=i if many_samples else 0,
                model=draw(st.sampled_from([None, "m1", "m2"])),
                category=draw(st.sampled_from(CATEGORIES)),
                severity=severity,
                severity_weight=weight,
                expect=draw(st.sampled_from(["refuse", "comply"])),
                status="error" if error else ("pass" if passed else "fail"),
                passed=passed,
                risk_score=risk,
                weighted_risk=None if risk is None else min(1.0, risk * weight),
                safe_signal_hits=0 if error else draw(st.integers(0, 3)),
                unsafe_signal_hits=0 if error else draw(st.integers(0, 3)),
                boundary_or_refusal_signal=boundary,
                matched_safe_patterns=[],
                matched_unsafe_patterns=[],
                matched_boundary_patterns=["refusal.cannot_help"]
                if boundary and not many_samples
                else [],
                detected_failure_modes=[]
                if error or passed
                else draw(st.lists(st.sampled_from(modes), max_size=2, unique=True)),
                task="t",
                probe_input="i",
                response="r",
                explanation="e",
                evidence=[],
                error="boom" if error else None,
            )
        )
    return out
