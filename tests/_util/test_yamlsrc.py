"""YAML with line numbers: LineDict, LineList, duplicate keys and errors as InputError."""

from __future__ import annotations

import pytest

from faultline._util.yamlsrc import LineDict, LineList, line_of, load_yaml
from faultline.errors import InputError, ProbeError, RulePackError

DOC = """\
# a comment
name: x
items:
  - first
  - {a: 1,
     b: 2}
nested:
  key: value
"""


def _load(text: str) -> object:
    return load_yaml(text, path="doc.yaml", error=ProbeError)


def _error(text: str, error: type[InputError] = ProbeError) -> InputError:
    with pytest.raises(error) as info:
        load_yaml(text, path="doc.yaml", error=error)
    return info.value


def test_mappings_are_line_dicts_with_key_lines() -> None:
    doc = _load(DOC)
    assert isinstance(doc, LineDict)
    assert doc.line == 2
    assert doc.key_lines == {"name": 2, "items": 3, "nested": 7}


def test_sequences_are_line_lists_with_item_lines() -> None:
    doc = _load(DOC)
    assert isinstance(doc, LineDict)
    items = doc["items"]
    assert isinstance(items, LineList)
    assert (items.line, items.item_lines) == (4, [4, 5])


def test_flow_mapping_keys_keep_their_own_lines() -> None:
    doc = _load(DOC)
    assert isinstance(doc, LineDict)
    inner = doc["items"][1]
    assert isinstance(inner, LineDict)
    assert (inner.line, inner.key_lines) == (5, {"a": 5, "b": 6})


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"], ids=["LS", "PS", "NEL"])
@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_lines_are_counted_as_an_editor_counts_them(sep: str, newline: str) -> None:
    """YAML breaks lines at U+2028, U+2029 and NEL too: each moved every later line by one."""
    lines = [
        f'- {{a: "one{sep}two{sep}three"}}',
        "- &x [1, 2]",
        f"- b: 'x{sep}y'",
        "  c: 3",
        "- *x",
        "- d: 1",
        "  d: 2",
    ]
    doc = _load(newline.join(lines[:5]) + newline)
    assert isinstance(doc, LineList)
    assert doc.item_lines == [1, 2, 3, 5]
    assert doc[2].key_lines == {"b": 3, "c": 4}
    assert _error(newline.join(lines) + newline).line == 7
    assert _error(f'a: "{sep}"{newline}b: [{newline}').line == 3


def test_values_are_plain_python() -> None:
    assert _load(DOC) == {
        "name": "x",
        "items": ["first", {"a": 1, "b": 2}],
        "nested": {"key": "value"},
    }


def test_line_of_key_falls_back_to_the_mapping() -> None:
    doc = _load(DOC)
    assert isinstance(doc, LineDict)
    assert (doc.line_of("items"), doc.line_of("absent")) == (3, 2)


@pytest.mark.parametrize(
    ("value", "default", "expected"),
    [("mapping", None, 8), ("list", None, 4), ("scalar", None, None), ("scalar", 9, 9)],
)
def test_line_of_a_value(value: str, default: int | None, expected: int | None) -> None:
    doc = _load(DOC)
    assert isinstance(doc, LineDict)
    target = {"mapping": doc["nested"], "list": doc["items"], "scalar": doc["name"]}[value]
    assert line_of(target, default) == expected


def test_non_string_keys_become_strings() -> None:
    assert _load("1: a\ntrue: b\n") == {"1": "a", "True": "b"}


@pytest.mark.parametrize(
    "text", ["", "# only a comment\n", "\n\n"], ids=["empty", "comment", "blank"]
)
def test_empty_document_is_none(text: str) -> None:
    assert _load(text) is None


def test_duplicate_key_names_the_key_and_its_second_line() -> None:
    err = _error("a: 1\nb: 2\na: 3\n")
    assert (err.path, err.line) == ("doc.yaml", 3)
    assert "'a'" in str(err)
    assert "twice" in str(err)


def test_duplicate_key_in_nested_mapping_is_found() -> None:
    err = _error("outer:\n  - x: 1\n    y: 2\n    x: 3\n")
    assert err.line == 4


def test_duplicate_key_sets_the_field() -> None:
    assert _error("a: 1\na: 2\n").field == "a"


def test_keys_equal_after_conversion_to_text_are_duplicates() -> None:
    err = _error("1: a\n'1': b\n")
    assert err.line == 2


def test_merge_key_override_is_not_a_duplicate() -> None:
    # YAML merge: keys of the mapping itself override merged ones; that is no repeat.
    text = "base: &b {category: c, severity: low}\nprobe:\n  <<: *b\n  severity: high\n"
    doc = _load(text)
    assert isinstance(doc, LineDict)
    assert doc["probe"] == {"category": "c", "severity": "high"}


def test_merge_key_brings_in_the_merged_keys() -> None:
    doc = _load("base: &b {category: c}\nprobe:\n  <<: *b\n  id: x\n")
    assert isinstance(doc, LineDict)
    assert doc["probe"] == {"category": "c", "id": "x"}


def test_the_given_error_class_is_raised() -> None:
    err = _error("a: 1\na: 2\n", RulePackError)
    assert type(err) is RulePackError


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a: [1, 2\nb: 3\n", 2),
        ("a: 1\n  b: 2\n", 2),
        ("a: 'unterminated\n", 2),
        ("\t- x\n", 1),
        ("a: &x 1\nb: *y\n", 2),
        ("a: 1\n---\nb: 2\n", 2),
    ],
    ids=[
        "unclosed-flow",
        "bad-indent",
        "unterminated-quote",
        "tab",
        "undefined-alias",
        "two-documents",
    ],
)
def test_invalid_yaml_is_an_input_error_with_a_line(text: str, line: int) -> None:
    err = _error(text)
    assert (err.path, err.line) == ("doc.yaml", line)
    assert str(err).startswith(f"doc.yaml:{line}: not valid YAML: ")


def test_python_tags_are_refused() -> None:
    err = _error("x: !!python/object/apply:os.system [ls]\n")
    assert "not valid YAML" in str(err)


def test_deep_nesting_is_an_input_error() -> None:
    err = _error("[" * 5000 + "]" * 5000)
    assert "nested too deeply" in str(err)


def test_control_character_is_an_input_error() -> None:
    err = _error("a: b\x00\n")
    assert "not valid YAML" in str(err)


@pytest.mark.parametrize(
    "text",
    ["a: !!float abc\n", "a: !!bool maybe\n", "!!seq {a: 1}\n"],
    ids=["bad-float", "bad-bool", "seq-tag-on-mapping"],
)
def test_values_pyyaml_cannot_construct_are_input_errors(text: str) -> None:
    err = _error(text)
    assert err.path == "doc.yaml"
    assert err.line == 1


@pytest.mark.parametrize("text", ["2024-13-45", "2024-01-01", "2024-01-01T10:00:00Z"])
def test_date_like_values_stay_text(text: str) -> None:
    # Ids and versions that look like dates are strings, not (possibly impossible) dates.
    assert load_yaml(f"a: {text}\n", path="doc.yaml", error=ProbeError) == {"a": text}


def test_numbers_keep_the_text_they_were_written_as() -> None:
    doc = _load("a: 010\nb: 0x1F\nc: 1.10\nd: 1_000\ne: 7\nf: .inf\ng: '010'\nh: text\n")
    assert isinstance(doc, LineDict)
    assert (doc["a"], doc["b"], doc["c"]) == (8, 31, 1.1)  # the values stay YAML's
    assert doc.number_texts == {
        "a": "010",
        "b": "0x1F",
        "c": "1.10",
        "d": "1_000",
        "e": "7",
        "f": ".inf",
    }


def test_a_merged_number_keeps_its_text_until_an_own_key_overrides_it() -> None:
    doc = _load("base: &b {id: 010}\nkept:\n  <<: *b\nreplaced:\n  <<: *b\n  id: x\n")
    assert isinstance(doc, LineDict)
    assert doc["kept"].number_texts == {"id": "010"}
    assert doc["replaced"].number_texts == {}


def _laughs(levels: int) -> str:
    """A "billion laughs": each level a list of ten aliases to the level below."""
    defs = ["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
        f"&l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels + 1)
    ]
    return "name: x\ndescription: [" + ", ".join(defs) + "]\n"


def _merge_laughs(levels: int) -> str:
    """The same with merge keys, which copy each merged mapping's keys into the next."""
    defs = ["&m0 {" + ", ".join(f"a{i}: 1" for i in range(10)) + "}"] + [
        f"&m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 10)}], k{i}: 1}}" for i in range(1, levels + 1)
    ]
    return "name: x\ndescription: [" + ", ".join(defs) + "]\n"


@pytest.mark.parametrize("text", [_laughs(5), _merge_laughs(5)], ids=["lists", "merge-keys"])
def test_aliases_that_expand_past_the_limit_are_an_input_error(text: str) -> None:
    err = _error(text)
    assert (err.path, err.line) == ("doc.yaml", 2)
    assert "aliases expand it to more than 1,000,000 values" in str(err)


def test_aliases_within_the_limit_load() -> None:
    # 2,000 uses of a 101-value list: 202,000 values added, well within the limit.
    text = "base: &b [" + ", ".join(["x"] * 100) + "]\nuses: [" + ", ".join(["*b"] * 2000) + "]\n"
    doc = _load(text)
    assert isinstance(doc, LineDict)
    assert len(doc["uses"]) == 2000
    assert doc["uses"][1999] == ["x"] * 100


def test_a_sequence_item_that_is_an_alias_is_on_the_alias_line() -> None:
    doc = _load("base: &b {k: v}\nitems:\n  - x\n  - *b\n  -\n    *b\nother: [*b, 1]\n")
    assert isinstance(doc, LineDict)
    assert doc["items"].item_lines == [3, 4, 6]
    assert doc["other"].item_lines == [7, 7]
    assert doc["items"][1] is doc["base"]  # still the anchored value
