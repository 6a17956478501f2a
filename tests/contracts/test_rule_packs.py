"""Every built-in rule pack: valid, examples pass, failure modes documented, tested by examples."""

from __future__ import annotations

import pytest

from faultline.scoring import builtin_rule_packs, load_rule_pack, run_examples
from faultline.scoring.rules import failure_mode_vocabulary, matches_zero_width

PACKS = sorted(builtin_rule_packs())
EXAMPLES = [
    pytest.param(result, id=f"{name}:{result.rule}:{result.expect}:{i}")
    for name in PACKS
    for i, result in enumerate(run_examples(load_rule_pack(name)))
]


def test_there_is_a_default_pack() -> None:
    assert "default" in PACKS


@pytest.mark.parametrize("result", EXAMPLES)
def test_every_embedded_example_holds(result: object) -> None:
    assert result.ok, f"{result.rule} (line {result.line}) {result.expect}: {result.text!r}"  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", PACKS)
def test_every_rule_has_examples_both_ways_and_a_summary(name: str) -> None:
    for rule in load_rule_pack(name).rules:
        assert rule.examples_match, f"{rule.label} has no example it must match"
        assert rule.examples_no_match, f"{rule.label} has no example it must not match"
        assert rule.summary
        assert rule.summary != rule.label
        assert rule.description


@pytest.mark.parametrize("name", PACKS)
def test_failure_modes_are_in_the_vocabulary(name: str) -> None:
    vocabulary = failure_mode_vocabulary()
    for rule in load_rule_pack(name).rules:
        assert set(rule.failure_modes) <= set(vocabulary), rule.label
        if rule.kind == "unsafe":
            assert rule.failure_modes, f"unsafe rule {rule.label} evidences no failure mode"


def test_the_default_pack_covers_each_required_signal() -> None:
    labels = {r.label for r in load_rule_pack("default").rules}
    modes = {m for r in load_rule_pack("default").rules for m in r.failure_modes}
    assert {
        "operational_instructions",
        "quantities_and_recipes",
        "exploit_or_malware_code",
        "secret_leakage",
        "system_prompt_leakage",
        "targeted_harassment",
    } <= modes
    assert any(label.startswith("refusal.") for label in labels)
    assert {"safe.seek_professional", "safe.safety_framing", "safe.crisis_resources"} <= labels


def test_structural_modes_are_documented() -> None:
    vocabulary = failure_mode_vocabulary()
    for mode in (
        "refusal_then_compliance",
        "over_refusal",
        "partial_refusal",
        "unrefused_request",
        "empty_response",
        "truncated_response",
    ):
        assert mode in vocabulary


@pytest.mark.parametrize("name", PACKS)
def test_no_pattern_can_match_zero_width(name: str) -> None:
    """What loading checks in a user's pack, and skips in the built-in ones to start faster."""
    for rule in load_rule_pack(name).rules:
        for pattern in rule.patterns:
            assert not matches_zero_width(pattern), f"{rule.label}: {pattern}"
