"""Loading and validating rule packs (not the scoring they drive)."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest
import re2
from hypothesis import given
from hypothesis import strategies as st

from faultline.errors import InputError, RulePackError, UsageError
from faultline.scoring.canaries import CANARY_LABEL
from faultline.scoring.cases import LEARNED_HARM, LEARNED_REFUSAL
from faultline.scoring.rules import (
    KINDS,
    RESERVED_LABELS,
    SCOPES,
    Rule,
    RulePack,
    ScoringModel,
    load_rule_pack,
)

# Every optional section present, so each bad-input test below changes one thing only.
PACK = """\
name: mini
version: "1.0"
description: A pack for tests.
defines:
  cant: "(?:can't|cannot)"
scoring:
  refuse_prior: -0.5
rules:
  - label: refusal.cant
    kind: boundary
    scope: sentence
    weight: 2
    summary: a refusal
    patterns:
      - "I {{cant}} help"
    failure_modes: []
    examples:
      match: ["I can't help with that."]
      no_match: ["I can help."]
  - label: unsafe.steps
    kind: unsafe
    weight: 3.5
    patterns: ["step \\\\d+"]
    failure_modes: [operational_instructions]
    examples:
      match: ["Step 1: mix"]
"""

MINIMAL = """\
name: minimal
version: "1"
rules:
  - label: refusal.cant
    kind: boundary
    weight: 1
    patterns: ["I can't"]
"""


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _load_error(path: Path) -> RulePackError:
    with pytest.raises(RulePackError) as info:
        load_rule_pack(path)
    return info.value


def _assert_located(err: RulePackError, path: Path, line: int, field: str) -> None:
    assert (err.path, err.line, err.field) == (str(path), line, field)
    assert str(err).startswith(f"{path}:{line}: field '{field}': ")


# --------------------------------------------------------------------------- good packs


def test_builtin_default_pack_loads() -> None:
    pack = load_rule_pack("default")
    assert pack.name == "default"
    assert pack.version
    assert len(pack.rules) > 0
    assert {r.kind for r in pack.rules} == set(KINDS)
    assert len(pack.by_label) == len(pack.rules)


def test_default_is_the_default_argument() -> None:
    assert load_rule_pack().sha256 == load_rule_pack("default").sha256


def test_custom_pack_loads_every_field(tmp_path: Path) -> None:
    pack = load_rule_pack(_write(tmp_path / "mini.yaml", PACK))
    assert (pack.name, pack.version, pack.description) == ("mini", "1.0", "A pack for tests.")
    assert pack.source == str(tmp_path / "mini.yaml")
    assert pack.scoring == ScoringModel(refuse_prior=-0.5)
    assert pack.rules[0] == Rule(
        label="refusal.cant",
        kind="boundary",
        patterns=("I (?:can't|cannot) help",),
        weight=2.0,
        scope="sentence",
        summary="a refusal",
        examples_match=("I can't help with that.",),
        examples_no_match=("I can help.",),
    )
    assert pack.rules[1].failure_modes == ("operational_instructions",)
    assert pack.rules[1].scope == "anywhere"


def test_rule_lines_are_recorded(tmp_path: Path) -> None:
    pack = load_rule_pack(_write(tmp_path / "mini.yaml", PACK))
    assert [r.line for r in pack.rules] == [9, 20]


def test_minimal_pack_without_defines_or_examples_loads(tmp_path: Path) -> None:
    pack = load_rule_pack(_write(tmp_path / "minimal.yaml", MINIMAL))
    assert [r.label for r in pack.rules] == ["refusal.cant"]
    assert pack.scoring == ScoringModel()


def test_scoring_defaults_are_the_documented_ones() -> None:
    # A pack that leaves a parameter out gets the default docs/scoring.md gives it.
    docs = (Path(__file__).parents[2] / "docs" / "scoring.md").read_text(encoding="utf-8")
    documented = {
        m["name"]: float(m["value"].replace("\u2212", "-"))
        for m in re.finditer(r"^\| `(?P<name>\w+)` \| (?P<value>[\u2212\d.]+) \|", docs, re.M)
    }
    defaults = {f.name: float(getattr(ScoringModel(), f.name)) for f in fields(ScoringModel)}
    assert documented == defaults


def test_pack_without_refusal_then_compliance_min_scores_as_one_with_the_default(
    tmp_path: Path,
) -> None:
    explicit = MINIMAL.replace("rules:", "scoring: {refusal_then_compliance_min: 2.5}\nrules:")
    left_out = load_rule_pack(_write(tmp_path / "a.yaml", MINIMAL)).scoring
    assert left_out == load_rule_pack(_write(tmp_path / "b.yaml", explicit)).scoring


def test_a_line_separator_in_a_description_does_not_move_later_lines(tmp_path: Path) -> None:
    """Two U+2028 in the description put the bad kind on line 23 instead of 21."""
    text = PACK.replace("A pack for tests.", '"A pack\u2028for\u2028tests."').replace(
        "kind: unsafe", "kind: unsaf"
    )
    path = tmp_path / "pack.yaml"
    path.write_text(text, encoding="utf-8")
    _assert_located(_load_error(path), path, 21, "kind")


def test_a_define_may_use_one_written_after_it(tmp_path: Path) -> None:
    """``defines: {a: "{{b}}", b: ...}`` was refused: '{{b}}', which is not in defines."""
    text = PACK.replace(
        'cant: "(?:can\'t|cannot)"', 'cant: "{{not}}"\n  not: "(?:can\'t|{{c}}not)"\n  c: "can"'
    )
    pack = load_rule_pack(_write(tmp_path / "pack.yaml", text))
    assert pack.rules[0].patterns == ("I (?:can't|cannot) help",)


def test_pack_without_defines_loads(tmp_path: Path) -> None:
    text = PACK.replace('defines:\n  cant: "(?:can\'t|cannot)"\n', "").replace("{{cant}}", "can't")
    assert load_rule_pack(_write(tmp_path / "p.yaml", text)).name == "mini"


def test_rule_without_examples_loads(tmp_path: Path) -> None:
    text = PACK.replace('    examples:\n      match: ["Step 1: mix"]\n', "")
    assert load_rule_pack(_write(tmp_path / "p.yaml", text)).rules[1].examples_match == ()


def test_single_pattern_string_is_a_list_of_one(tmp_path: Path) -> None:
    text = PACK.replace('patterns: ["step \\\\d+"]', 'patterns: "step \\\\d+"')
    assert load_rule_pack(_write(tmp_path / "p.yaml", text)).rules[1].patterns == ("step \\d+",)


@pytest.mark.parametrize("scope", SCOPES)
def test_every_scope_is_accepted(tmp_path: Path, scope: str) -> None:
    text = PACK.replace("scope: sentence", f"scope: {scope}")
    assert load_rule_pack(_write(tmp_path / "p.yaml", text)).rules[0].scope == scope


@pytest.mark.parametrize("weight", ["20", "0.01", "7"])
def test_weights_in_range_are_accepted(tmp_path: Path, weight: str) -> None:
    text = PACK.replace("weight: 2\n", f"weight: {weight}\n")
    assert load_rule_pack(_write(tmp_path / "p.yaml", text)).rules[0].weight == float(weight)


# --------------------------------------------------------------------------- sha256


def test_sha256_is_stable_across_loads(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.yaml", PACK)
    assert load_rule_pack(path).sha256 == load_rule_pack(path).sha256
    assert load_rule_pack("default").sha256 == load_rule_pack("default").sha256


def test_sha256_ignores_comments_and_file_location(tmp_path: Path) -> None:
    a = load_rule_pack(_write(tmp_path / "a.yaml", PACK))
    (tmp_path / "sub").mkdir()
    b = load_rule_pack(_write(tmp_path / "sub" / "b.yaml", "# a comment\n" + PACK))
    assert a.sha256 == b.sha256


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("weight: 2\n", "weight: 2.5\n"),
        ("refuse_prior: -0.5", "refuse_prior: -0.6"),
        ("I {{cant}} help", "I {{cant}} assist"),
        ('version: "1.0"', 'version: "1.1"'),
    ],
    ids=["weight", "scoring", "pattern", "version"],
)
def test_sha256_changes_with_the_pack(tmp_path: Path, old: str, new: str) -> None:
    assert old in PACK
    a = load_rule_pack(_write(tmp_path / "a.yaml", PACK))
    b = load_rule_pack(_write(tmp_path / "b.yaml", PACK.replace(old, new)))
    assert a.sha256 != b.sha256


def test_applies_to_and_unless_are_read(tmp_path: Path) -> None:
    text = PACK.replace(
        "scope: sentence", "scope: sentence\n    applies_to: refuse\n    unless: [unsafe.steps]"
    )
    pack = load_rule_pack(_write(tmp_path / "p.yaml", text))
    cant, steps = pack.rules
    assert (cant.applies_to, cant.unless) == ("refuse", ("unsafe.steps",))
    assert (steps.applies_to, steps.unless) == ("any", ())
    assert pack.sha256 != load_rule_pack(_write(tmp_path / "q.yaml", PACK)).sha256


def test_number_like_name_and_version_are_kept_as_written(tmp_path: Path) -> None:
    # YAML reads 1.10 as the number 1.1 and 010 as 8; the pack keeps the text in the file.
    text = PACK.replace("name: mini", "name: 010").replace('version: "1.0"', "version: 1.10")
    pack = load_rule_pack(_write(tmp_path / "p.yaml", text))
    assert (pack.name, pack.version) == ("010", "1.10")


def test_a_kind_that_is_a_large_list_is_described_not_printed(tmp_path: Path) -> None:
    big = "[" + ", ".join(["lol"] * 20_000) + "]"
    text = PACK.replace('match: ["I can\'t help with that."]', f"match: &big {big}").replace(
        "kind: unsafe", "kind: *big"
    )
    err = _load_error(_write(tmp_path / "p.yaml", text))
    assert err.field == "kind"
    assert len(str(err)) < 300


def test_a_billion_laughs_pack_is_a_rule_pack_error(tmp_path: Path) -> None:
    defs = ["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
        f"&l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 6)
    ]
    text = PACK.replace("description: A pack for tests.", f"description: [{', '.join(defs)}]")
    err = _load_error(_write(tmp_path / "p.yaml", text))
    assert err.line == 3
    assert "aliases expand it" in str(err)


def test_rule_pack_is_a_rule_pack(tmp_path: Path) -> None:
    assert isinstance(load_rule_pack(_write(tmp_path / "p.yaml", PACK)), RulePack)


# --------------------------------------------------------------------------- bad packs

# (name, old text, new text, line, field, words the message must hold)
BAD = [
    ("missing name", "name: mini\n", "", 1, "name", ["required"]),
    ("missing version", 'version: "1.0"\n', "", 1, "version", ["required"]),
    ("empty version", 'version: "1.0"', 'version: ""', 2, "version", ["required"]),
    (
        "unknown pack field",
        "description:",
        "descripton:",
        3,
        "descripton",
        ["did you mean 'description'?"],
    ),
    (
        "missing label",
        "  - label: refusal.cant\n    kind: boundary",
        "  - kind: boundary",
        9,
        "label",
        ["required"],
    ),
    ("missing patterns", '    patterns: ["step \\\\d+"]\n', "", 20, "patterns", ["required"]),
    (
        "unknown rule field",
        "    weight: 3.5",
        "    wieght: 3.5",
        22,
        "wieght",
        ["did you mean 'weight'?"],
    ),
    (
        "bad kind",
        "kind: boundary",
        "kind: refusal",
        10,
        "kind",
        ["'refusal'", "safe, unsafe, boundary"],
    ),
    (
        "bad applies_to",
        "scope: sentence",
        "scope: sentence\n    applies_to: harmful",
        12,
        "applies_to",
        ["'harmful'", "any, refuse, comply"],
    ),
    (
        "unless names no rule",
        "scope: sentence",
        "scope: sentence\n    unless: [unsafe.step]",
        12,
        "unless",
        ["'unsafe.step'", "did you mean 'unsafe.steps'?"],
    ),
    (
        "unless names itself",
        "scope: sentence",
        "scope: sentence\n    unless: [refusal.cant]",
        12,
        "unless",
        ["cannot cancel itself"],
    ),
    (
        "bad scope",
        "scope: sentence",
        "scope: paragraph",
        11,
        "scope",
        ["'paragraph'", "anywhere, sentence, opening"],
    ),
    ("name a list", "name: mini", "name: [a, b]", 1, "name", ["a list", "expected a string"]),
    ("version a mapping", 'version: "1.0"', "version: {a: 1}", 2, "version", ["a mapping"]),
    (
        "description a list",
        "description: A pack for tests.",
        "description: [a]",
        3,
        "description",
        ["a list"],
    ),
    ("summary a list", "summary: a refusal", "summary: [a]", 13, "summary", ["a list", "a string"]),
    (
        "rule description a mapping",
        "summary: a refusal",
        "description: {a: 1}",
        13,
        "description",
        ["a mapping", "a string"],
    ),
    ("kind a list", "kind: boundary", "kind: [boundary]", 10, "kind", ["a list", "safe, unsafe"]),
    ("zero weight", "weight: 2\n", "weight: 0\n", 12, "weight", ["(0)", "above 0 and at most 20"]),
    ("negative weight", "weight: 2\n", "weight: -1\n", 12, "weight", ["(-1)", "above 0"]),
    ("weight above 20", "weight: 2\n", "weight: 20.5\n", 12, "weight", ["(20.5)", "at most 20"]),
    ("weight a string", "weight: 2\n", "weight: heavy\n", 12, "weight", ["'heavy'", "a number"]),
    ("weight a boolean", "weight: 2\n", "weight: true\n", 12, "weight", ["boolean", "a number"]),
    ("weight nan", "weight: 2\n", "weight: .nan\n", 12, "weight", ["a number"]),
    ("weight inf", "weight: 2\n", "weight: .inf\n", 12, "weight", ["a number"]),
    (
        "bad label",
        "label: refusal.cant",
        "label: Refusal Cant",
        9,
        "label",
        ["'Refusal Cant'", "lower-case"],
    ),
    (
        "scorer's label probe.canary",
        "label: refusal.cant",
        "label: probe.canary",
        9,
        "label",
        ["'probe.canary'", "the label of evidence the scorer adds itself"],
    ),
    (
        "scorer's label learned.refusal",
        "label: refusal.cant",
        "label: learned.refusal",
        9,
        "label",
        ["'learned.refusal'", "the label of evidence the scorer adds itself"],
    ),
    (
        "scorer's label learned.harm",
        "label: refusal.cant",
        "label: learned.harm",
        9,
        "label",
        ["'learned.harm'", "the label of evidence the scorer adds itself"],
    ),
    (
        "case_sensitive not bool",
        "scope: sentence",
        "scope: sentence\n    case_sensitive: maybe",
        12,
        "case_sensitive",
        ["true or false"],
    ),
    (
        "lookahead",
        "I {{cant}} help",
        "(?=x)help",
        15,
        "patterns[0]",
        ["RE2 cannot compile", "(?=x)help"],
    ),
    ("lookbehind", "I {{cant}} help", "(?<!x)help", 15, "patterns[0]", ["RE2 cannot compile"]),
    ("backreference", "I {{cant}} help", "(a)\\\\1", 15, "patterns[0]", ["RE2 cannot compile"]),
    ("unbalanced", "I {{cant}} help", "(help", 15, "patterns[0]", ["RE2 cannot compile"]),
    (
        "matches empty text",
        "I {{cant}} help",
        "a*",
        15,
        "patterns[0]",
        ["'a*'", "matches empty text"],
    ),
    (
        "zero-width pattern",
        "I {{cant}} help",
        "\\\\b",
        15,
        "patterns[0]",
        ["'\\b'", "can match empty text next to a character"],
    ),
    # A pattern that can match whitespace alone fired on every multi-line answer and quoted
    # nothing: evidence '' and an explanation with an empty quotation.
    (
        "matches only whitespace",
        "I {{cant}} help",
        "\\\\n\\\\s*",
        15,
        "patterns[0]",
        ["'\\n\\s*'", "can match only whitespace", "quote nothing"],
    ),
    (
        "matches whitespace as one alternative",
        "I {{cant}} help",
        "(?:step \\\\d+|\\\\n{3})",
        15,
        "patterns[0]",
        ["can match only whitespace"],
    ),
    # RE2's \b and \w are ASCII-only: the rule loaded and never matched a Cyrillic word.
    (
        "\\b beside a non-ASCII letter",
        "I {{cant}} help",
        "\\\\bпароль\\\\b",
        15,
        "patterns[0]",
        ["'\\bпароль\\b'", "puts \\b next to a non-ASCII letter", "only ASCII"],
    ),
    (
        "\\w beside a non-ASCII letter",
        "I {{cant}} help",
        "caf\\\\w\\\\wé",
        15,
        "patterns[0]",
        ["puts \\w next to a non-ASCII letter"],
    ),
    (
        "backreference shown as written",
        "I {{cant}} help",
        "(a)\\\\1",
        15,
        "patterns[0]",
        ["'(a)\\1'"],
    ),
    (
        "unknown failure mode",
        "failure_modes: [operational_instructions]",
        "failure_modes: [operational_instruction]",
        24,
        "failure_modes[0]",
        ["'operational_instruction'", "did you mean 'operational_instructions'?"],
    ),
    (
        "unknown failure mode in a block list",
        "failure_modes: [operational_instructions]",
        "failure_modes:\n      - system_prompt_leakage\n      - leakage_of_secrets",
        26,
        "failure_modes[1]",
        ["'leakage_of_secrets'", "failure_modes.yaml"],
    ),
    ("empty pattern list", '["step \\\\d+"]', "[]", 23, "patterns", ["non-empty list"]),
    ("pattern a number", '["step \\\\d+"]', "[5]", 23, "patterns", ["pattern strings"]),
    (
        "undefined define",
        "I {{cant}} help",
        "I {{wont}} help",
        15,
        "patterns[0]",
        ["'{{wont}}'", "not in defines"],
    ),
    (
        "misspelt define",
        "I {{cant}} help",
        "I {{cnat}} help",
        15,
        "patterns[0]",
        ["did you mean 'cant'?"],
    ),
    (  # before, it was RE2's literal text "{{can-t}}": the rule never fired, without a word
        "pattern using a name no define can have",
        "I {{cant}} help",
        "I {{can-t}} help",
        15,
        "patterns[0]",
        ["'{{can-t}}'", "letters, digits and _"],
    ),
    (
        "pattern using empty braces",
        "I {{cant}} help",
        "I {{ }} help",
        15,
        "patterns[0]",
        ["'{{ }}'", "letters, digits and _"],
    ),
    (  # before, accepted: no pattern can use it, and {{can-t}} was literal text
        "define named with a hyphen",
        'cant: "(?:can\'t|cannot)"',
        'can-t: "(?:can\'t|cannot)"',
        5,
        "defines.can-t",
        ["letters, digits and _"],
    ),
    (
        "define using a name no define can have",
        'cant: "(?:can\'t|cannot)"',
        'cant: "{{can-not}}"',
        5,
        "defines.cant",
        ["'{{can-not}}'", "letters, digits and _"],
    ),
    (  # before, a cycle was reported as "'{{b}}', which is not in defines"
        "defines in a cycle",
        'cant: "(?:can\'t|cannot)"',
        'cant: "{{b}}"\n  b: "x{{c}}"\n  c: "{{cant}}"',
        5,
        "defines.cant",
        ["defines a cycle, '{{cant}}' -> '{{b}}' -> '{{c}}' -> '{{cant}}'"],
    ),
    (
        "define using itself",
        'cant: "(?:can\'t|cannot)"',
        'cant: "x{{cant}}"',
        5,
        "defines.cant",
        ["defines a cycle, '{{cant}}' -> '{{cant}}'"],
    ),
    (
        "define using an undefined one written after it",
        'cant: "(?:can\'t|cannot)"',
        'cant: "{{b}}"\n  b: "{{wont}}"',
        6,
        "defines.b",
        ["'{{wont}}'", "not in defines"],
    ),
    (
        "define not a string",
        'cant: "(?:can\'t|cannot)"',
        "cant: 5",
        5,
        "defines.cant",
        ["a number (5)", "pattern string"],
    ),
    (
        "defines a list",
        'defines:\n  cant: "(?:can\'t|cannot)"',
        "defines: [x]",
        4,
        "defines",
        ["a list", "mapping"],
    ),
    (
        "duplicate label",
        "label: unsafe.steps",
        "label: refusal.cant",
        20,
        "label",
        ["'refusal.cant'", "line 9"],
    ),
    (
        "failure_modes not a list",
        "failure_modes: []",
        "failure_modes: leak",
        16,
        "failure_modes",
        ["list of strings"],
    ),
    (
        "examples a list",
        '    examples:\n      match: ["Step 1: mix"]',
        '    examples: ["Step 1: mix"]',
        25,
        "examples",
        ["match"],
    ),
    (
        "examples unknown key",
        '      match: ["Step 1: mix"]',
        '      matches: ["Step 1: mix"]',
        25,
        "examples",
        ["no_match"],
    ),
    (
        "examples.match not a list",
        'match: ["Step 1: mix"]',
        "match: 5",
        26,
        "examples.match",
        ["list of strings"],
    ),
    (  # before: "field 'examples.match': got a list, expected a list of strings"
        "examples.match item a YAML boolean",
        'match: ["Step 1: mix"]',
        'match: ["Step 1: mix", No]',
        26,
        "examples.match[1]",
        ["got a boolean (false), expected a string", "quote it"],
    ),
    (
        "examples.no_match item on a line of its own",
        '      match: ["Step 1: mix"]',
        '      match: ["Step 1: mix"]\n      no_match:\n        - "Step one"\n        - 42',
        29,
        "examples.no_match[1]",
        ["got a number (42), expected a string", "quote it"],
    ),
    (
        "failure_modes item empty",
        "failure_modes: [operational_instructions]",
        "failure_modes:\n      -",
        25,
        "failure_modes[0]",
        ["got null, expected a string"],
    ),
    (
        "scoring a list",
        "scoring:\n  refuse_prior: -0.5",
        "scoring: [1]",
        6,
        "scoring",
        ["a list", "mapping"],
    ),
    (
        "scoring value a string",
        "refuse_prior: -0.5",
        "refuse_prior: high",
        7,
        "scoring.refuse_prior",
        ["'high'", "a number"],
    ),
    (
        "scoring value a boolean",
        "refuse_prior: -0.5",
        "refuse_prior: true",
        7,
        "scoring.refuse_prior",
        ["boolean"],
    ),
    (
        "scoring value nan",
        "refuse_prior: -0.5",
        "refuse_prior: .nan",
        7,
        "scoring.refuse_prior",
        ["a number"],
    ),
    (
        "scoring value inf",
        "refuse_prior: -0.5",
        "refuse_prior: .inf",
        7,
        "scoring.refuse_prior",
        ["a number"],
    ),
    (
        "opening_chars zero",
        "refuse_prior: -0.5",
        "opening_chars: 0",
        7,
        "scoring.opening_chars",
        ["whole number of 1 or more"],
    ),
    (
        "opening_chars fraction",
        "refuse_prior: -0.5",
        "opening_chars: 2.5",
        7,
        "scoring.opening_chars",
        ["whole number"],
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "words"), [c[1:] for c in BAD], ids=[c[0] for c in BAD]
)
def test_bad_pack_names_file_line_and_field(  # noqa: PLR0917 - one parameter per table column
    tmp_path: Path, old: str, new: str, line: int, field: str, words: list[str]
) -> None:
    assert old in PACK
    path = _write(tmp_path / "pack.yaml", PACK.replace(old, new, 1))
    err = _load_error(path)
    _assert_located(err, path, line, field)
    for word in words:
        assert word in str(err)


@pytest.mark.parametrize(
    "pattern", [r"\b", r"a|\b", r"(?:foo)?\b", r"x*\b", r"\b|\n", r"\b(?:-)?", r"(?m)^\b"]
)
def test_a_pattern_that_can_match_empty_text_within_a_response_is_refused(
    tmp_path: Path, pattern: str
) -> None:
    text = MINIMAL.replace('patterns: ["I can\'t"]', f"patterns: ['{pattern}']")
    err = _load_error(_write(tmp_path / "p.yaml", text))
    assert (err.line, err.field) == (7, "patterns[0]")
    assert f"'{pattern}' can match empty text" in str(err)


# [^a]+ was here: it can match whitespace alone ("a\na"), quoting nothing; now refused.
@pytest.mark.parametrize(
    "pattern", [r"\bfoo\b", r"\b\B", r"[^a\s]+", r"\S+", r"^foo", r"foo$", r"\Bing\b"]
)
def test_a_pattern_whose_matches_are_never_empty_loads(tmp_path: Path, pattern: str) -> None:
    text = MINIMAL.replace('patterns: ["I can\'t"]', f"patterns: ['{pattern}']")
    assert load_rule_pack(_write(tmp_path / "p.yaml", text)).rules[0].patterns == (pattern,)


_ATOMS = [r"\b", r"\B", "a", "b*", "^", "$", "(?m)^", "(?m)$", " ", r"\n?", "|", "(?:a|)"]


@given(
    atoms=st.lists(st.sampled_from(_ATOMS), min_size=1, max_size=4),
    texts=st.lists(st.text(alphabet="ab \n", min_size=1, max_size=6), max_size=5),
)
def test_a_pattern_that_loads_never_matches_empty_text(
    tmp_path_factory: pytest.TempPathFactory, atoms: list[str], texts: list[str]
) -> None:
    pattern = "".join(atoms)
    text = MINIMAL.replace('patterns: ["I can\'t"]', f"patterns: ['{pattern}']")
    path = _write(tmp_path_factory.mktemp("zw") / "p.yaml", text)
    try:
        load_rule_pack(path)
    except RulePackError:
        return
    compiled = re2.compile(pattern)
    for response in texts:
        assert all(m.end() > m.start() for m in compiled.finditer(response)), (pattern, response)


def test_a_huge_pattern_is_cut_in_the_message(tmp_path: Path) -> None:
    pattern = "(" + "a" * 5000  # RE2's reason repeats the whole pattern
    text = MINIMAL.replace('patterns: ["I can\'t"]', f"patterns: ['{pattern}']")
    err = _load_error(_write(tmp_path / "p.yaml", text))
    assert err.field == "patterns[0]"
    assert "RE2 cannot compile '(aaaa" in str(err)
    assert "…" in str(err)
    assert len(str(err)) < 400


def test_missing_rules_names_the_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.yaml", 'name: x\nversion: "1"\n')
    err = _load_error(path)
    assert (err.line, err.field) == (1, "rules")


def test_empty_rules_names_the_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.yaml", 'name: x\nversion: "1"\ndefines: {a: b}\nrules: []\n')
    err = _load_error(path)
    _assert_located(err, path, 4, "rules")


def test_unknown_scoring_key_suggests_the_right_one(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.yaml", PACK.replace("refuse_prior: -0.5", "refuse_prio: -0.5"))
    err = _load_error(path)
    assert err.line == 7
    assert err.field is not None
    assert err.field.endswith("refuse_prio")
    assert "did you mean 'refuse_prior'?" in str(err)


def test_rule_that_is_not_a_mapping_names_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.yaml", PACK + "  - just a string\n")
    err = _load_error(path)
    assert err.line == 27
    assert "expected a rule mapping" in str(err)


def test_pack_that_is_not_a_mapping_is_rejected(tmp_path: Path) -> None:
    err = _load_error(_write(tmp_path / "p.yaml", "- a\n- b\n"))
    assert err.line == 1
    assert "expected a mapping with name, version and rules" in str(err)


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.yaml", PACK.replace("kind: unsafe", "kind: [unsafe"))
    err = _load_error(path)
    assert err.line is not None
    assert "not valid YAML" in str(err)


def test_duplicate_key_names_the_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "p.yaml",
        PACK.replace("    kind: unsafe\n", "    kind: unsafe\n    kind: safe\n"),
    )
    err = _load_error(path)
    assert err.line == 22
    assert "'kind'" in str(err)


def test_non_utf8_pack_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(PACK.encode().replace(b"A pack for tests.", b"caf\xe9"))
    err = _load_error(path)
    assert (err.line, "UTF-8" in str(err)) == (3, True)


def test_unknown_builtin_name_is_a_usage_error_with_suggestion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="did you mean 'default'"):
        load_rule_pack("defualt")


def test_missing_file_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"missing\.yaml"):
        load_rule_pack("missing.yaml")


def test_rule_pack_error_is_an_input_error_with_exit_code_2(tmp_path: Path) -> None:
    err = _load_error(_write(tmp_path / "p.yaml", "[]"))
    assert isinstance(err, InputError)
    assert err.exit_code == 2


def test_the_reserved_labels_are_those_the_scorer_gives_evidence() -> None:
    # Before, a pack rule could be labelled probe.canary: an `unless: [probe.canary]` was then
    # cancelled by a probe's canary instead of the pack's rule, and evidence of either kind
    # read the same; a rule labelled learned.refusal was listed twice when the head agreed.
    assert set(RESERVED_LABELS) == {CANARY_LABEL, LEARNED_HARM, LEARNED_REFUSAL}
