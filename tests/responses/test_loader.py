"""Reading responses files: records, defaults, line numbers, chunking, and bad input."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from faultline.errors import InputError, ResponseError
from faultline.responses import Response, iter_response_batches, load_responses
from faultline.responses.loader import decode_chunk, iter_chunks
from faultline.responses.model import Usage
from tests.conftest import write_jsonl

CHUNK_SIZES = [1, 2, 3, 7, 64, 4096]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _line(record: Any) -> bytes:
    return json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"


def _located(path: Path, chunk_bytes: int | None = None) -> list[tuple[int, Response]]:
    batches = (
        iter_response_batches(path)
        if chunk_bytes is None
        else iter_response_batches(path, chunk_bytes=chunk_bytes)
    )
    return [pair for b in batches for pair in zip(b.lines, b.responses, strict=True)]


def _load_error(path: Path) -> ResponseError:
    with pytest.raises(ResponseError) as info:
        load_responses(path)
    return info.value


# --------------------------------------------------------------------------- good records


def test_loads_every_record_in_file_order(
    tmp_path: Path, small_responses: list[dict[str, Any]]
) -> None:
    records = load_responses(write_jsonl(tmp_path / "r.jsonl", small_responses))
    assert [r.probe_id for r in records] == [r["probe_id"] for r in small_responses]
    assert records[0] == Response(probe_id="inj-1", response=small_responses[0]["response"])


def test_accepts_a_str_path(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"probe_id": "a", "response": "x"}])
    assert load_responses(str(path)) == [Response(probe_id="a", response="x")]


def test_optional_fields_take_their_defaults(tmp_path: Path) -> None:
    (record,) = load_responses(
        write_jsonl(tmp_path / "r.jsonl", [{"probe_id": "a", "response": "x"}])
    )
    assert (record.sample, record.model, record.error, record.finish_reason) == (
        0,
        None,
        None,
        None,
    )


def test_every_field_is_read(tmp_path: Path) -> None:
    row = {
        "probe_id": "a",
        "response": "text",
        "sample": 3,
        "model": "m-1",
        "finish_reason": "length",
        "reasoning": "The user asks for text. Fine.",
    }
    (record,) = load_responses(write_jsonl(tmp_path / "r.jsonl", [row]))
    assert record == Response(**row)
    assert record.truncated


@pytest.mark.parametrize(
    "error",
    ["read timed out", {"type": "timeout", "message": "read timed out", "retries": 3}],
    ids=["string", "object"],
)
def test_error_replaces_the_response(tmp_path: Path, error: Any) -> None:
    (record,) = load_responses(
        write_jsonl(tmp_path / "r.jsonl", [{"probe_id": "a", "error": error}])
    )
    assert (record.response, record.error) == (None, error)


def test_response_and_error_may_both_be_set(tmp_path: Path) -> None:
    row = {"probe_id": "a", "response": "partial", "error": "cut off"}
    (record,) = load_responses(write_jsonl(tmp_path / "r.jsonl", [row]))
    assert (record.response, record.error) == ("partial", "cut off")


def test_empty_response_text_is_a_response(tmp_path: Path) -> None:
    (record,) = load_responses(
        write_jsonl(tmp_path / "r.jsonl", [{"probe_id": "a", "response": ""}])
    )
    assert record.response == ""


def test_unknown_fields_are_ignored(tmp_path: Path) -> None:
    row = {"probe_id": "a", "response": "x", "latency_ms": 12, "meta": {"tokens": 5}}
    assert load_responses(write_jsonl(tmp_path / "r.jsonl", [row])) == [
        Response(probe_id="a", response="x")
    ]


def test_usage_is_read_and_a_bad_usage_names_the_field(tmp_path: Path) -> None:
    row = {"probe_id": "a", "response": "x", "usage": {"input_tokens": 5, "output_tokens": 2}}
    [response] = load_responses(write_jsonl(tmp_path / "r.jsonl", [row]))
    assert response.usage == Usage(input_tokens=5, output_tokens=2)
    bad = {"probe_id": "a", "response": "x", "usage": {"input_tokens": "five"}}
    with pytest.raises(ResponseError, match=r"r.jsonl:1: field 'usage'"):
        load_responses(write_jsonl(tmp_path / "r.jsonl", [bad]))


def test_blank_lines_are_skipped_and_later_lines_keep_their_numbers(tmp_path: Path) -> None:
    data = (
        b"\n"
        + _line({"probe_id": "a", "response": "x"})
        + b"\n  \t\n"
        + _line({"probe_id": "b", "response": "y"})
    )
    path = _write(tmp_path / "r.jsonl", data)
    assert [(line, r.probe_id) for line, r in _located(path)] == [(2, "a"), (5, "b")]


def test_error_after_blank_lines_names_the_right_line(tmp_path: Path) -> None:
    data = _line({"probe_id": "a", "response": "x"}) + b"\n\n" + _line({"probe_id": "b"})
    err = _load_error(_write(tmp_path / "r.jsonl", data))
    assert (err.line, err.field) == (4, "response")


@pytest.mark.parametrize(
    ("lines", "line", "field"),
    [
        # The decoder kept the last value without a word: the second answer was scored.
        (
            [b'{"probe_id": "a", "response": "I can\'t.", "response": "Sure: step 1"}'],
            1,
            "response",
        ),
        (
            [
                b'{"probe_id": "a", "response": "x"}',
                b'{"probe_id": "b", "probe_id": "c", "response": "y"}',
            ],
            2,
            "probe_id",
        ),
        # An error given, then taken back: the case was scored as an answer.
        ([b'{"probe_id": "a", "error": "timeout", "error": null, "response": "ok"}'], 1, "error"),
        # Any field, when the piece is read line by line (here for the bad line after it).
        (
            [
                b'{"probe_id": "b", "response": "y", "sample": 1, "sample": 2}',
                b'{"probe_id": "c", "response": 5}',
            ],
            1,
            "sample",
        ),
    ],
)
def test_a_field_given_twice_names_its_line(
    tmp_path: Path, lines: list[bytes], line: int, field: str
) -> None:
    err = _load_error(_write(tmp_path / "r.jsonl", b"\n".join(lines) + b"\n"))
    assert (err.line, err.field) == (line, field)
    assert "given more than once" in str(err)


def test_a_field_name_as_a_value_is_not_a_repeated_field(tmp_path: Path) -> None:
    data = _line({"probe_id": "response", "response": 'the word "response"', "model": "response"})
    assert load_responses(_write(tmp_path / "r.jsonl", data))[0].model == "response"


def test_utf8_bom_is_dropped(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", b"\xef\xbb\xbf" + _line({"probe_id": "a", "response": "x"}))
    assert load_responses(path) == [Response(probe_id="a", response="x")]


def test_crlf_line_endings_are_read(tmp_path: Path) -> None:
    data = b'{"probe_id": "a", "response": "x"}\r\n\r\n{"probe_id": "b", "response": "y"}\r\n'
    path = _write(tmp_path / "r.jsonl", data)
    assert [(line, r.probe_id, r.response) for line, r in _located(path)] == [
        (1, "a", "x"),
        (3, "b", "y"),
    ]


def test_crlf_error_names_the_right_line(tmp_path: Path) -> None:
    data = b'{"probe_id": "a", "response": "x"}\r\n\r\n{"probe_id": "b", "sample": -2, "response": "y"}\r\n'
    err = _load_error(_write(tmp_path / "r.jsonl", data))
    assert (err.line, err.field) == (3, "sample")


def test_last_line_without_newline_is_read(tmp_path: Path) -> None:
    data = _line({"probe_id": "a", "response": "x"}) + b'{"probe_id": "b", "response": "y"}'
    path = _write(tmp_path / "r.jsonl", data)
    assert [(line, r.probe_id) for line, r in _located(path)] == [(1, "a"), (2, "b")]


def test_unicode_text_is_kept(tmp_path: Path) -> None:
    text = "Ça va? 日本語 🙂 line\u2028sep"
    path = _write(tmp_path / "r.jsonl", _line({"probe_id": "a", "response": text}))
    assert load_responses(path)[0].response == text


@pytest.mark.parametrize("data", [b"", b"\n\n  \n"], ids=["empty", "blank"])
def test_file_without_records_gives_no_records(tmp_path: Path, data: bytes) -> None:
    assert load_responses(_write(tmp_path / "r.jsonl", data)) == []


# --------------------------------------------------------------------------- bad records

# (name, line 2 of the file, field, words the message must hold)
BAD_LINES = [
    ("probe_id missing", {"response": "x"}, "probe_id", ["required"]),
    (
        "probe_id misspelt",
        {"probeid": "a", "response": "x"},
        "probe_id",
        ["did you mean 'probe_id'?"],
    ),
    (
        "probe_id number",
        {"probe_id": 7, "response": "x"},
        "probe_id",
        ["a number (7)", "expected a string"],
    ),
    ("probe_id blank", {"probe_id": "  ", "response": "x"}, "probe_id", ["empty"]),
    ("response missing", {"probe_id": "a"}, "response", ["required unless 'error'"]),
    (
        "response and error null",
        {"probe_id": "a", "response": None, "error": None},
        "response",
        ["required"],
    ),
    (
        "response number",
        {"probe_id": "a", "response": 5},
        "response",
        ["a number (5)", "expected a string"],
    ),
    (
        "sample negative",
        {"probe_id": "a", "response": "x", "sample": -1},
        "sample",
        ["-1", "from 0 to 9223372036854775807"],
    ),
    (
        "sample fraction",
        {"probe_id": "a", "response": "x", "sample": 1.5},
        "sample",
        ["1.5", "whole number"],
    ),
    (
        "sample string",
        {"probe_id": "a", "response": "x", "sample": "1"},
        "sample",
        ["a string", "whole number"],
    ),
    (
        "sample boolean",
        {"probe_id": "a", "response": "x", "sample": True},
        "sample",
        ["boolean", "whole number"],
    ),
    (
        "model number",
        {"probe_id": "a", "response": "x", "model": 4},
        "model",
        ["a number (4)", "a string"],
    ),
    ("error list", {"probe_id": "a", "error": ["x"]}, "error", ["a list", "a string or an object"]),
    (
        "error number",
        {"probe_id": "a", "error": 500},
        "error",
        ["a number (500)", "a string or an object"],
    ),
    (
        "finish_reason number",
        {"probe_id": "a", "response": "x", "finish_reason": 3},
        "finish_reason",
        ["a number (3)", "a string"],
    ),
    (
        "reasoning object",
        {"probe_id": "a", "response": "x", "reasoning": {"text": "hm"}},
        "reasoning",
        ["a mapping", "a string or null"],
    ),
    (
        "usage above 2^63-1",
        {"probe_id": "a", "response": "x", "usage": {"input_tokens": 2**64 - 1}},
        "usage",
        ["input_tokens 18446744073709551615", "from 0 to 9223372036854775807"],
    ),
    (
        "usage negative",
        {"probe_id": "a", "response": "x", "usage": {"input_tokens": 3, "output_tokens": -5}},
        "usage",
        ["output_tokens -5", "from 0 to 9223372036854775807"],
    ),
]


@pytest.mark.parametrize(
    ("record", "field", "words"), [c[1:] for c in BAD_LINES], ids=[c[0] for c in BAD_LINES]
)
def test_bad_record_names_file_line_and_field(
    tmp_path: Path, record: dict[str, Any], field: str, words: list[str]
) -> None:
    rows = [{"probe_id": "ok", "response": "x"}, record, {"probe_id": "ok2", "response": "y"}]
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    err = _load_error(path)
    assert (err.path, err.line, err.field) == (str(path), 2, field)
    assert str(err).startswith(f"{path}:2: field '{field}': ")
    for word in words:
        assert word in str(err)


# Numbers no float can hold: the line is a JSON object, the field is what is wrong.
OUT_OF_RANGE = [
    (
        b'{"probe_id": "b", "response": "x", "sample": 1e400}',
        "sample",
        ["got a number (1e400)", "expected a whole number from 0 to 9223372036854775807"],
    ),
    (
        b'{"probe_id": "b", "response": -1e400}',
        "response",
        ["got a number (-1e400)", "expected a string"],
    ),
    (
        b'{"probe_id": "b", "response": "x", "model": 1E+999}',
        "model",
        ["got a number (1E+999)", "expected a string or null"],
    ),
    (
        b'{"probe_id": "b", "response": "x", "usage": {"input_tokens": 1e400, "output_tokens": 1}}',
        "usage",
        ["input_tokens is a number (1e400)", "whole numbers"],
    ),
    (
        b'{"probe_id": "b", "error": {"message": "x", "detail": [1, 2e308]}}',
        "error",
        ["a number out of range (2e308)", "expected a string or an object"],
    ),
]


@pytest.mark.parametrize(("raw", "field", "words"), OUT_OF_RANGE)
def test_a_number_out_of_range_names_its_field(
    tmp_path: Path, raw: bytes, field: str, words: list[str]
) -> None:
    data = _line({"probe_id": "a", "response": "x"}) + raw + b"\n"
    err = _load_error(_write(tmp_path / "r.jsonl", data))
    assert (err.line, err.field) == (2, field)
    assert "expected a JSON object" not in str(err)
    for word in words:
        assert word in str(err)


def test_a_number_out_of_range_in_a_field_faultline_does_not_read_is_ignored(
    tmp_path: Path,
) -> None:
    data = b'{"probe_id": "a", "response": "x", "latency": 1e400}\n'
    (record,) = load_responses(_write(tmp_path / "r.jsonl", data))
    assert record.probe_id == "a"


@pytest.mark.parametrize(
    "deep",
    [
        {"probe_id": "b", "response": "y", "model": "DEEP"},
        {"probe_id": "b", "response": "y", "error": "DEEP"},  # a wrong type, read again
    ],
    ids=["valid", "a-wrong-type"],
)
def test_a_record_nested_too_deeply_names_its_line(tmp_path: Path, deep: dict[str, Any]) -> None:
    raw = json.dumps(deep).replace('"DEEP"', "[" * 5000 + "]" * 5000).encode()
    data = _line({"probe_id": "a", "response": "x"}) + b"\n" + raw + b"\n"
    err = _load_error(_write(tmp_path / "r.jsonl", data))
    assert err.line == 3
    assert "nested too deeply" in str(err)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"probe_id": "b", ', ["not valid JSON"]),
        (b"{'probe_id': 'b'}", ["not valid JSON"]),
        (b"[1, 2]", ["a list", "expected a JSON object"]),
        (b'"just text"', ["a string", "expected a JSON object"]),
        (b"null", ["null", "expected a JSON object"]),
    ],
    ids=["truncated", "single-quotes", "array", "string", "null"],
)
def test_line_that_is_not_an_object_names_its_line(
    tmp_path: Path, raw: bytes, words: list[str]
) -> None:
    data = (
        _line({"probe_id": "a", "response": "x"})
        + b"\n"
        + raw
        + b"\n"
        + _line({"probe_id": "c", "response": "z"})
    )
    err = _load_error(_write(tmp_path / "r.jsonl", data))
    assert err.line == 3
    for word in words:
        assert word in str(err)


def test_two_objects_on_one_line_are_an_error_on_that_line(tmp_path: Path) -> None:
    data = b'{"probe_id": "a", "response": "x"} {"probe_id": "b", "response": "y"}\n'
    err = _load_error(_write(tmp_path / "r.jsonl", data))
    assert err.line == 1


def test_non_utf8_bytes_name_the_line(tmp_path: Path) -> None:
    data = _line({"probe_id": "a", "response": "x"}) + b'{"probe_id": "b", "response": "caf\xe9"}\n'
    err = _load_error(_write(tmp_path / "r.jsonl", data))
    assert (err.line, "UTF-8" in str(err)) == (2, True)


@pytest.mark.parametrize("chunk_bytes", CHUNK_SIZES)
def test_first_bad_line_is_reported_whatever_the_chunk_size(
    tmp_path: Path, chunk_bytes: int
) -> None:
    rows = [{"probe_id": f"p{i}", "response": "x" * i} for i in range(20)]
    rows[13] = {"probe_id": "p13", "response": "x", "sample": "one"}
    rows[17] = {"probe_id": "p17"}
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    with pytest.raises(ResponseError) as info:
        list(iter_response_batches(path, chunk_bytes=chunk_bytes))
    assert (info.value.line, info.value.field) == (14, "sample")


def test_missing_file_is_a_response_error(tmp_path: Path) -> None:
    err = _load_error(tmp_path / "nope.jsonl")
    assert err.path == str(tmp_path / "nope.jsonl")
    assert "no such file" in str(err)


def test_directory_is_a_response_error(tmp_path: Path) -> None:
    err = _load_error(tmp_path)
    assert "directory" in str(err)


# --------------------------------------------------------------------------- chunking

MIXED = (
    b"\n"
    + _line({"probe_id": "a", "response": "first"})
    + b"   \n"
    + b'{"probe_id": "b", "response": "crlf line", "sample": 1}\r\n'
    + _line({"probe_id": "c", "error": {"type": "timeout"}, "model": "m"})
    + b"\n\n"
    + _line({"probe_id": "d", "response": "日本語 and emoji 🙂 " * 5, "finish_reason": "stop"})
    + _line({"probe_id": "e", "response": "x" * 300, "extra": [1, 2, 3]})
    + b'{"probe_id": "f", "response": "no newline at the end"}'
)


@pytest.mark.parametrize("chunk_bytes", CHUNK_SIZES)
def test_batches_of_any_size_give_the_same_records_and_lines(
    tmp_path: Path, chunk_bytes: int
) -> None:
    path = _write(tmp_path / "r.jsonl", MIXED)
    assert _located(path, chunk_bytes) == _located(path)
    assert [r for _, r in _located(path, chunk_bytes)] == load_responses(path)


def test_mixed_file_lines_are_the_file_lines(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", MIXED)
    assert [line for line, _ in _located(path)] == [2, 4, 5, 8, 9, 10]


@pytest.mark.parametrize("chunk_bytes", CHUNK_SIZES)
def test_bom_is_dropped_whatever_the_chunk_size(tmp_path: Path, chunk_bytes: int) -> None:
    path = _write(tmp_path / "r.jsonl", b"\xef\xbb\xbf" + MIXED)
    assert _located(path, chunk_bytes) == _located(_write(tmp_path / "plain.jsonl", MIXED))


@pytest.mark.parametrize("chunk_bytes", CHUNK_SIZES)
def test_chunks_hold_whole_lines_at_their_line_numbers(tmp_path: Path, chunk_bytes: int) -> None:
    path = _write(tmp_path / "r.jsonl", MIXED)
    file_lines = MIXED.split(b"\n")
    seen = []
    for first_line, chunk in iter_chunks(path, chunk_bytes):
        lines = chunk.removesuffix(b"\n").split(b"\n")
        assert lines == file_lines[first_line - 1 : first_line - 1 + len(lines)]
        seen += [line for line in lines if line.strip()]
    assert seen == [line for line in file_lines if line.strip()]


@pytest.mark.parametrize("chunk_bytes", [1, 64, 1 << 20])
def test_iter_chunks_digest_covers_every_byte(tmp_path: Path, chunk_bytes: int) -> None:
    data = b"\xef\xbb\xbf" + MIXED
    path = _write(tmp_path / "r.jsonl", data)
    digest = hashlib.sha256()
    list(iter_chunks(path, chunk_bytes, digest))
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()


def test_decode_chunk_numbers_lines_from_first_line(tmp_path: Path) -> None:
    chunk = (
        _line({"probe_id": "a", "response": "x"})
        + b"\n"
        + _line({"probe_id": "b", "response": "y"})
    )
    batch = decode_chunk(tmp_path / "r.jsonl", chunk, 41)
    assert (batch.lines, [r.probe_id for r in batch.responses]) == ([41, 43], ["a", "b"])


def test_decode_chunk_error_names_the_line_in_the_file(tmp_path: Path) -> None:
    chunk = _line({"probe_id": "a", "response": "x"}) + _line(
        {"probe_id": "b", "sample": -3, "response": "y"}
    )
    with pytest.raises(ResponseError) as info:
        decode_chunk(tmp_path / "r.jsonl", chunk, 100)
    assert (info.value.path, info.value.line, info.value.field) == (
        str(tmp_path / "r.jsonl"),
        101,
        "sample",
    )


# --------------------------------------------------------------------------- properties


@given(data=st.binary(max_size=400))
@example(data=b'{"probe_id": "a", "response": "caf\xe9"}\n')
@example(data=b'{"probe_id": "a", "response": "x"}{"probe_id": "b", "response": "y"}\n')
@example(data=b'{"probe_id": "a", "response": "x"}\r{"probe_id": "b", "response": "y"}\r')
def test_arbitrary_bytes_load_or_raise_input_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "r.jsonl"
    path.write_bytes(data)
    with contextlib.suppress(InputError):
        load_responses(path)


_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40)
_ID = _TEXT.filter(lambda s: s.strip() != "")
_JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), _TEXT)
_RECORD = st.one_of(
    st.fixed_dictionaries(
        {"probe_id": _ID, "response": _TEXT},
        optional={"error": st.one_of(_TEXT, st.dictionaries(_TEXT, _JSON_SCALAR, max_size=3))},
    ),
    st.fixed_dictionaries(
        {
            "probe_id": _ID,
            "error": st.one_of(_TEXT, st.dictionaries(_TEXT, _JSON_SCALAR, max_size=3)),
        }
    ),
).flatmap(
    lambda base: st.fixed_dictionaries(
        {},
        optional={
            "sample": st.integers(0, 10**9),
            "model": st.one_of(st.none(), _TEXT),
            "finish_reason": st.one_of(st.none(), _TEXT),
            "reasoning": st.one_of(st.none(), _TEXT),
        },
    ).map(lambda extra: {**base, **extra})
)


@given(
    rows=st.lists(_RECORD, max_size=8),
    ascii_only=st.booleans(),
    chunk_bytes=st.sampled_from([1, 7, 64, 4096]),
)
def test_valid_records_round_trip_through_jsonl(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[dict[str, Any]],
    ascii_only: bool,
    chunk_bytes: int,
) -> None:
    path = tmp_path_factory.mktemp("roundtrip") / "r.jsonl"
    path.write_bytes(
        b"".join(json.dumps(r, ensure_ascii=ascii_only).encode() + b"\n" for r in rows)
    )
    expected = [Response(**r) for r in rows]
    assert load_responses(path) == expected
    assert _located(path, chunk_bytes) == list(zip(range(1, len(rows) + 1), expected, strict=True))


def test_an_object_over_two_lines_is_not_hidden_by_two_objects_on_one_line(tmp_path: Path) -> None:
    # The record counts agree (3 objects, 3 lines), so only a check of each line catches it.
    path = tmp_path / "r.jsonl"
    path.write_text(
        '{"probe_id": "a",\n"response": "x"}\n{"probe_id": "b", "response": "y"} {"probe_id": "c", "response": "z"}\n'
    )
    with pytest.raises(ResponseError) as info:
        load_responses(path)
    assert info.value.line == 1
