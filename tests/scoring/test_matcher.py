"""The compiled matcher: one RE2 set pass finds every rule, with exact spans."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
import re2
from hypothesis import given
from hypothesis import strategies as st

from faultline.errors import RulePackError
from faultline.scoring import Matcher, load_rule_pack
from faultline.scoring.matcher import SENTENCE_START, SET_PATTERNS
from faultline.scoring.rules import Rule, RulePack
from tests.conftest import ROOT

PACK = load_rule_pack("default")
MATCHER = Matcher(PACK)
EXAMPLES = [t for r in PACK.rules for t in (*r.examples_match, *r.examples_no_match)]


def _reference(text: str) -> set[int]:
    """Which rules match, by searching each pattern on its own (no RE2 set)."""
    hits = set()
    for index, rule in enumerate(PACK.rules):
        flags = "" if rule.case_sensitive else "(?i)"
        prefix = f"(?i:{SENTENCE_START})" if rule.scope == "sentence" else ""
        starts = [
            m.start() for p in rule.patterns if (m := re2.search(f"{flags}{prefix}(?:{p})", text))
        ]
        if starts and (rule.scope != "opening" or min(starts) < PACK.scoring.opening_chars):
            hits.add(index)
    return hits


@given(
    st.lists(st.sampled_from(EXAMPLES) | st.text(max_size=40), min_size=1, max_size=12),
    st.sampled_from([" ", "\n", "\n\n", ". "]),
)
def test_the_set_finds_exactly_the_rules_each_pattern_finds(parts: list[str], sep: str) -> None:
    # Without double quotation marks: a refusal quoted on its line is dropped on purpose
    # (test_error_classes tests that), which the reference here does not know.
    text = sep.join(parts).replace('"', "'").replace("\u201c", "'")
    assert {h.rule for h in MATCHER.match(text)} == _reference(text)


def test_a_long_text_does_not_exhaust_the_set() -> None:
    # 200 KB of mixed text: an RE2 set that ran out of DFA memory would silently miss matches.
    text = (
        ("The weather is mild. " * 5000) + "Step 1: a\nStep 2: b\nStep 3: c " + ("x y z " * 10000)
    )
    text += " Call 988 now."
    assert {h.rule for h in MATCHER.match(text)} == _reference(text)


@given(st.text(max_size=300))
def test_spans_index_the_text(text: str) -> None:
    for hit in MATCHER.match(text):
        assert 0 <= hit.start <= hit.end <= len(text)


def test_opening_rules_only_see_the_opening() -> None:
    index = next(i for i, r in enumerate(PACK.rules) if r.label == "unsafe.affirmative_opening")
    assert index in {h.rule for h in MATCHER.match("Sure, here is the guide.")}
    late = "x" * (PACK.scoring.opening_chars + 10) + " Sure, here is the guide."
    assert index not in {h.rule for h in MATCHER.match(late)}


def test_sentence_rules_need_a_sentence_start() -> None:
    index = next(i for i, r in enumerate(PACK.rules) if r.label == "refusal.cannot_help")
    assert index in {h.rule for h in MATCHER.match("Well. I can't help with that.")}
    assert index in {h.rule for h in MATCHER.match("I'd love to, but I can't help with that.")}
    assert index not in {h.rule for h in MATCHER.match("He said that I can't help with that.")}


def test_search_after_finds_a_later_occurrence() -> None:
    text = "1. a\n2. b\n3. c\nI can't help with that.\n1. d\n2. e\n3. f\n"
    index = next(i for i, r in enumerate(PACK.rules) if r.label == "unsafe.numbered_steps")
    first = next(h for h in MATCHER.match(text) if h.rule == index)
    later = MATCHER.search_after(text, index, text.index("I can't") + 5)
    assert first.start == 0
    assert later is not None
    assert later.start > first.start
    assert MATCHER.search_after(text, index, len(text)) is None


CASE_SENSITIVE_SENTENCE_PACK = """\
name: cs
version: 1
rules:
  - label: refusal.cs
    kind: boundary
    scope: sentence
    case_sensitive: true
    weight: 4
    patterns: ["I can't help"]
"""

# The sentence starts docs/scoring.md lists (§1, scope), in the case a sentence has them.
DOCUMENTED_STARTS = [
    "I can't help with that.",
    "Sorry. I can't help with that.",
    "That said, I can't help with that.",
    "Because of these risks, I can't help with that.",
    "As a privacy-conscious assistant, I can't help with that.",
    "Sure, However I can't help with that.",
    "Sure, but I can't help with that.",
    "Let me stop you there \u2014 I can't help with that.",
    "- **I can't help with that.**",
]


@pytest.mark.parametrize("text", DOCUMENTED_STARTS)
def test_a_case_sensitive_sentence_rule_keeps_the_sentence_starts_in_any_case(
    tmp_path: Path, text: str
) -> None:
    # case_sensitive made faultline's own prefix case-sensitive too: "That said, I can't ..."
    # and "Because ..., I can't ..." were no sentence start. It applies to the rule's patterns.
    path = tmp_path / "cs.yaml"
    path.write_text(CASE_SENSITIVE_SENTENCE_PACK, encoding="utf-8")
    matcher = Matcher(load_rule_pack(path))
    [hit] = matcher.match(text)
    assert text[hit.start : hit.end] == "I can't help"


@pytest.mark.parametrize("text", ["i can't help with that.", "That said, i can't help with that."])
def test_a_case_sensitive_sentence_rule_still_matches_its_own_pattern_in_its_case(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "cs.yaml"
    path.write_text(CASE_SENSITIVE_SENTENCE_PACK, encoding="utf-8")
    assert Matcher(load_rule_pack(path)).match(text) == []


def test_the_docs_give_the_set_size_the_matcher_uses() -> None:
    # docs/scoring.md said 16 after SET_PATTERNS became 48.
    docs = (ROOT / "docs" / "scoring.md").read_text(encoding="utf-8")
    assert f"`re2.Set`s of at most {SET_PATTERNS} patterns each" in docs


@pytest.mark.slow
def test_a_pack_too_large_for_one_set_is_matched_in_smaller_ones() -> None:
    # 48 patterns that RE2 compiles one by one but not as one set (each a list of 20,000
    # phrases): the matcher raised re2.Error "failed to compile Set", and score, run,
    # calibrate and rules test stopped with a traceback (exit 4). Which set a pattern is in
    # changes nothing but speed.
    rng = random.Random(0)
    lists = [
        ["".join(rng.choices(string.ascii_lowercase, k=12)) for _ in range(20_000)]
        for _ in range(SET_PATTERNS)
    ]
    rules = tuple(
        Rule(f"unsafe.list{i}", "unsafe", (f"(?:{'|'.join(words)})",), 5.0, case_sensitive=True)
        for i, words in enumerate(lists)
    )
    matcher = Matcher(RulePack("phrase-lists", "1", rules))
    for index in (0, SET_PATTERNS - 1):
        answer = f"Sure: {lists[index][-1]}."
        [hit] = matcher.match(answer)
        assert (hit.rule, answer[hit.start : hit.end]) == (index, lists[index][-1])


def test_a_pattern_re2_cannot_compile_in_a_pack_made_in_code_names_its_rule() -> None:
    # A pack read from a file has every pattern checked; one made in code had not, and a
    # pattern RE2 cannot compile was a re2.Error traceback.
    rule = Rule("unsafe.big", "unsafe", ("ok", "a{1001}"), 5.0, scope="sentence", line=7)
    with pytest.raises(RulePackError) as caught:
        Matcher(RulePack("big", "1", (rule,), source="big.yaml"))
    assert (caught.value.path, caught.value.line, caught.value.field) == (
        "big.yaml",
        7,
        "patterns[1]",
    )
