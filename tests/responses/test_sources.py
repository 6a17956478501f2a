"""Reading responses from JSONL, JSONL.gz and Parquet files, a directory or a glob, in pieces."""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultline.errors import ResponseError
from faultline.responses import Response, iter_response_batches, load_responses
from faultline.responses.model import Usage
from faultline.responses.sources import (
    Piece,
    decode_piece,
    find_sources,
    iter_pieces,
    resolve_sources,
    scan_piece,
    source_bytes,
)

FIELDS = ("probe_id", "response", "sample", "model", "error", "finish_reason", "usage", "reasoning")
STRING = pa.string()
USAGE = pa.struct([("input_tokens", pa.int64()), ("output_tokens", pa.int64())])


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows)


def _schema(text: pa.DataType = STRING, error: pa.DataType = STRING) -> pa.Schema:
    return pa.schema(
        [
            ("probe_id", text),
            ("response", text),
            ("sample", pa.int64()),
            ("model", text),
            ("error", error),
            ("finish_reason", text),
            ("usage", USAGE),
            ("reasoning", text),
        ]
    )


def _parquet(
    path: Path,
    rows: list[dict[str, Any]],
    schema: pa.Schema | None = None,
    row_group_size: int | None = None,
) -> Path:
    if schema is None:
        table = pa.Table.from_pylist(rows)
    else:
        table = pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _located(paths: list[Path], **kwargs: Any) -> list[tuple[str, int, Response]]:
    out = []
    for piece in iter_pieces(paths, **kwargs):
        batch = decode_piece(piece)
        assert batch.path == piece.path
        out += [
            (piece.path.name, line, r) for line, r in zip(batch.lines, batch.responses, strict=True)
        ]
    return out


def _error(paths: list[Path], **kwargs: Any) -> ResponseError:
    with pytest.raises(ResponseError) as info:
        _located(paths, **kwargs)
    return info.value


ROWS = [
    {"probe_id": "a", "response": "x"},
    {"probe_id": "b", "response": "y", "sample": 1, "model": "m1"},
    {"probe_id": "c", "error": "timed out", "model": "m2"},
]


# --------------------------------------------------------------------------- same records


_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30)
_ID = _TEXT.filter(lambda s: s.strip() != "")
_OBJECT_ERROR = st.fixed_dictionaries({"type": _TEXT, "code": st.integers(-5, 600)})
_USAGE = st.fixed_dictionaries(
    {
        "input_tokens": st.one_of(st.none(), st.integers(0, 10**6)),
        "output_tokens": st.one_of(st.none(), st.integers(0, 10**6)),
    }
)


def _records(error: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    base = st.one_of(
        st.fixed_dictionaries({"probe_id": _ID, "response": _TEXT}, optional={"error": error}),
        st.fixed_dictionaries({"probe_id": _ID, "error": error}),
    )
    extra = st.fixed_dictionaries(
        {},
        optional={
            "sample": st.integers(0, 10**9),
            "model": st.one_of(st.none(), _TEXT),
            "finish_reason": st.one_of(st.none(), _TEXT),
            "usage": st.one_of(st.none(), _USAGE),
            "reasoning": st.one_of(st.none(), _TEXT),
        },
    )
    return st.tuples(base, extra).map(lambda pair: {**pair[0], **pair[1]})


_TEXT_TYPES = [pa.string(), pa.large_string(), pa.dictionary(pa.int32(), pa.string())]


@given(data=st.data(), object_errors=st.booleans(), text=st.sampled_from(_TEXT_TYPES))
def test_jsonl_gzip_and_parquet_give_the_same_records_and_lines(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    object_errors: bool,
    text: pa.DataType,
) -> None:
    row_group_size = data.draw(st.integers(1, 10), label="row_group_size")
    chunk_bytes = data.draw(st.sampled_from([1, 7, 64, 4096]), label="chunk_bytes")
    rows = data.draw(st.integers(1, 12), label="rows")
    records = data.draw(st.lists(_records(_OBJECT_ERROR if object_errors else _TEXT), max_size=25))
    folder = tmp_path_factory.mktemp("same")
    plain = _write(folder / "r.jsonl", _jsonl(records))
    packed = _write(folder / "r.jsonl.gz", gzip.compress(_jsonl(records)))
    error_type = pa.struct([("type", pa.string()), ("code", pa.int64())])
    schema = _schema(text, error_type if object_errors else pa.string())
    table = _parquet(folder / "r.parquet", records, schema, row_group_size)
    expected = [
        (n, Response(**{**r, "usage": Usage(**r["usage"]) if r.get("usage") else None}))
        for n, r in enumerate(records, start=1)
    ]
    for path in (plain, packed, table):
        digest = hashlib.sha256()
        pieces = list(iter_pieces([path], chunk_bytes=chunk_bytes, rows=rows, digest=digest))
        batches = [decode_piece(piece) for piece in pieces]
        located = [pair for b in batches for pair in zip(b.lines, b.responses, strict=True)]
        assert located == expected, path.name
        assert digest.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
        assert sum(p.nbytes for p in pieces) == (source_bytes([path]) if records else 0)
        assert all(p.table is None or p.table.num_rows <= rows for p in pieces)


@pytest.mark.parametrize("chunk_bytes", [1, 64, 4 << 20])
def test_a_long_answer_that_compresses_well_is_read_whole(tmp_path: Path, chunk_bytes: int) -> None:
    rows = [{"probe_id": "a", "response": "ab" * 200_000}, {"probe_id": "b", "response": "y"}]
    path = _write(tmp_path / "r.jsonl.gz", gzip.compress(_jsonl(rows)))
    assert [r.response for _, _, r in _located([path], chunk_bytes=chunk_bytes)] == [
        "ab" * 200_000,
        "y",
    ]


def test_gzip_of_several_members_with_zero_padding_is_read(tmp_path: Path) -> None:
    data = gzip.compress(_jsonl(ROWS[:2])) + b"\0" * 9 + gzip.compress(_jsonl(ROWS[2:]))
    path = _write(tmp_path / "r.jsonl.gz", data)
    assert [(line, r.probe_id) for _, line, r in _located([path], chunk_bytes=16)] == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]


def test_bom_and_blank_lines_in_gzip_keep_line_numbers(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf\n" + _jsonl(ROWS[:1]) + b"\n  \n" + _jsonl(ROWS[1:2])
    path = _write(tmp_path / "r.ndjson.gz", gzip.compress(data))
    assert [line for _, line, _ in _located([path], chunk_bytes=3)] == [2, 5]


def test_parquet_values_take_the_shapes_json_gives_them(tmp_path: Path) -> None:
    table = pa.table(
        {
            "probe_id": pa.array(["a", "b"], pa.string_view()),
            "sample": pa.array([None, 7], pa.uint8()),
            "error": pa.array([[("type", "timeout")], None], pa.map_(pa.string(), pa.string())),
            "response": pa.array([None, "y"]).dictionary_encode(),
            "latency_ms": [12, 13],
            "usage": pa.array([{"input_tokens": 3, "cached": 1}, None]),
        }
    )
    pq.write_table(table, tmp_path / "r.parquet")
    assert load_responses(tmp_path / "r.parquet") == [
        Response(probe_id="a", error={"type": "timeout"}, usage=Usage(input_tokens=3)),
        Response(probe_id="b", response="y", sample=7),
    ]


def test_an_error_struct_leaves_out_the_keys_its_row_has_no_value_for(tmp_path: Path) -> None:
    # A struct column has every key any row has: the row's null is the key left out, as a
    # null column is the field left out, so the record is the one the JSONL line gives.
    rows = [
        {"probe_id": "a", "error": {"message": "HTTP 500"}},
        {"probe_id": "b", "error": {"message": "HTTP 429", "status": 429}},
        {"probe_id": "c", "error": {"detail": {"code": "busy"}}},
        {"probe_id": "d", "error": {"detail": {"retry": 3}, "message": None}},
    ]
    jsonl = _write(tmp_path / "r.jsonl", _jsonl(rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "r.parquet")
    assert [r.error for r in load_responses(tmp_path / "r.parquet")] == [
        {"message": "HTTP 500"},
        {"message": "HTTP 429", "status": 429},
        {"detail": {"code": "busy"}},
        {"detail": {"retry": 3}},
    ]
    assert load_responses(tmp_path / "r.parquet")[:3] == load_responses(jsonl)[:3]


# --------------------------------------------------------------------------- specs


def _mixed_folder(root: Path) -> Path:
    (root / "b").mkdir(parents=True)
    _write(root / "b" / "2.jsonl.gz", gzip.compress(_jsonl([{"probe_id": "g", "response": "x"}])))
    rows = [{"probe_id": "p1", "response": "x"}, {"probe_id": "p2", "error": "e"}]
    _parquet(root / "a.parquet", rows, _schema())
    _write(root / "c.jsonl", _jsonl([{"probe_id": "j", "response": "x"}]))
    _write(root / "b" / "1.ndjson", _jsonl([{"probe_id": "n", "response": "x"}]))
    _write(root / "notes.txt", b"not responses")
    return root


def test_a_directory_gives_every_responses_file_in_it_sorted_by_relative_path(
    tmp_path: Path,
) -> None:
    root = _mixed_folder(tmp_path / "runs")
    paths = resolve_sources(root)
    assert [p.relative_to(root).as_posix() for p in paths] == [
        "a.parquet",
        "b/1.ndjson",
        "b/2.jsonl.gz",
        "c.jsonl",
    ]
    assert [(name, line, r.probe_id) for name, line, r in _located(paths)] == [
        ("a.parquet", 1, "p1"),
        ("a.parquet", 2, "p2"),
        ("1.ndjson", 1, "n"),
        ("2.jsonl.gz", 1, "g"),
        ("c.jsonl", 1, "j"),
    ]


def test_a_directory_reads_the_responses_in_its_linked_directories_once(tmp_path: Path) -> None:
    # Logs kept elsewhere and linked in are under the directory, as a glob finds them.
    archive = _mixed_folder(tmp_path / "archive")
    root = tmp_path / "logs"
    root.mkdir()
    _write(root / "today.jsonl", _jsonl(ROWS[:1]))
    (root / "archive").symlink_to(archive)
    (root / "archive-again").symlink_to(archive)  # the same directory twice: read once
    (root / "loop").symlink_to(root)  # a loop: not followed round again
    assert [p.relative_to(root).as_posix() for p in resolve_sources(root)] == [
        "archive/a.parquet",
        "archive/b/1.ndjson",
        "archive/b/2.jsonl.gz",
        "archive/c.jsonl",
        "today.jsonl",
    ]


def test_a_directory_leaves_out_hidden_files_and_directories_as_a_glob_does(
    tmp_path: Path,
) -> None:
    # A folder copied from a Mac holds "._a.parquet" resource forks beside the logs, and a
    # sync tool keeps its own copies in a hidden folder: neither is answers, and `logs/*`
    # in a shell or a glob here leaves both out.
    root = _mixed_folder(tmp_path / "runs")
    _write(root / "._a.parquet", b"\x00\x05\x16\x07 not parquet")
    (root / ".sync").mkdir()
    _write(root / ".sync" / "c.jsonl", _jsonl([{"probe_id": "j", "response": "x"}]))
    expected = ["a.parquet", "b/1.ndjson", "b/2.jsonl.gz", "c.jsonl"]
    assert [p.relative_to(root).as_posix() for p in resolve_sources(root)] == expected
    assert [p.relative_to(root).as_posix() for p in resolve_sources(f"{root}/**/c.jsonl")] == [
        "c.jsonl"
    ]
    assert [r.probe_id for r in load_responses(root)] == ["p1", "p2", "n", "g", "j"]
    # Named directly, a hidden file is read like any other.
    assert [p.name for p in resolve_sources(root / ".sync" / "c.jsonl")] == ["c.jsonl"]


def test_load_responses_reads_a_directory_a_glob_and_each_format(tmp_path: Path) -> None:
    root = _mixed_folder(tmp_path / "runs")
    ids = ["p1", "p2", "n", "g", "j"]
    assert [r.probe_id for r in load_responses(root)] == ids
    assert [r.probe_id for r in load_responses(str(root / "**" / "*.jsonl*"))] == ["g", "j"]
    assert [r.probe_id for r in load_responses(root / "a.parquet")] == ["p1", "p2"]
    batches = list(iter_response_batches(root / "b" / "2.jsonl.gz"))
    assert [(b.path.name, b.lines) for b in batches] == [("2.jsonl.gz", [1])]


def test_a_glob_gives_its_matches_sorted(tmp_path: Path) -> None:
    root = _mixed_folder(tmp_path / "runs")
    in_b = [root / "b" / "1.ndjson", root / "b" / "2.jsonl.gz"]
    assert resolve_sources(f"{root}/b/*") == in_b
    assert resolve_sources(f"{root}/*.p*") == [root / "a.parquet"]
    for name in ["z.jsonl", "10.jsonl", "2.jsonl", "1.jsonl.gz"]:
        _write(tmp_path / name, b"")
    assert [p.name for p in resolve_sources(f"{tmp_path}/*.jsonl*")] == [
        "1.jsonl.gz",
        "10.jsonl",
        "2.jsonl",
        "z.jsonl",
    ]


def test_a_directory_a_glob_matches_stands_for_its_responses_files(tmp_path: Path) -> None:
    root = _mixed_folder(tmp_path / "runs")
    assert resolve_sources(f"{root}/[bc]*") == [
        root / "b" / "1.ndjson",
        root / "b" / "2.jsonl.gz",
        root / "c.jsonl",
    ]


def test_a_glob_matching_another_kind_of_file_names_it_and_the_accepted_names(
    tmp_path: Path,
) -> None:
    root = _mixed_folder(tmp_path / "runs")
    with pytest.raises(ResponseError) as info:
        resolve_sources(str(root / "*"))
    assert info.value.path == str(root / "notes.txt")
    assert ".jsonl, .jsonl.gz, .ndjson, .ndjson.gz, .parquet" in str(info.value)


@pytest.mark.parametrize("spec", ["*.jsonl", "nothing/**/*.parquet"])
def test_a_glob_matching_nothing_names_the_spec(tmp_path: Path, spec: str) -> None:
    with pytest.raises(ResponseError) as info:
        resolve_sources(str(tmp_path / spec))
    assert info.value.path == str(tmp_path / spec)
    assert "matches no responses files" in str(info.value)


def _with_a_run_inside(tmp_path: Path) -> tuple[Path, Path]:
    """A responses folder with a run's output directory (report and cases.parquet) in it."""
    root = _mixed_folder(tmp_path / "runs")
    out = root / "week"
    out.mkdir()
    _write(out / "cases.parquet", b"PAR1")
    _write(out / "report.json", b"{}")
    return root, out


def test_a_directory_leaves_out_the_files_in_the_output_directory(tmp_path: Path) -> None:
    root, out = _with_a_run_inside(tmp_path)
    found = find_sources(root, exclude=out)
    assert [p.relative_to(root).as_posix() for p in found.files] == [
        "a.parquet",
        "b/1.ndjson",
        "b/2.jsonl.gz",
        "c.jsonl",
    ]
    assert found.skipped == [out / "cases.parquet"]
    assert root / "week" / "cases.parquet" in resolve_sources(root)  # not without exclude


@pytest.mark.parametrize("pattern", ["**", "**/*.parquet", "*"])
def test_a_glob_leaves_out_the_files_in_the_output_directory(tmp_path: Path, pattern: str) -> None:
    root, out = _with_a_run_inside(tmp_path)
    (root / "notes.txt").unlink()
    # "**" matches out/report.json too: a file there is left out before its name is checked.
    found = find_sources(f"{root}/{pattern}", exclude=out)
    assert found.files
    assert all(p.parent != out for p in found.files)
    assert found.skipped == [out / "cases.parquet"]


def test_the_output_directory_is_compared_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = _with_a_run_inside(tmp_path)
    (tmp_path / "link").symlink_to(root)  # the responses through a link, --out relative
    monkeypatch.chdir(root)
    found = find_sources(tmp_path / "link", exclude=Path("week"))
    assert [p.name for p in found.skipped] == ["cases.parquet"]
    assert len(found.files) == 4


def test_a_file_named_as_the_spec_is_read_even_in_the_output_directory(tmp_path: Path) -> None:
    _, out = _with_a_run_inside(tmp_path)
    assert resolve_sources(out / "cases.parquet", exclude=out) == [out / "cases.parquet"]


@pytest.mark.parametrize("spec", ["{root}", "{root}/week/*", "{root}/week"])
def test_responses_only_in_the_output_directory_are_an_error_naming_it(
    tmp_path: Path, spec: str
) -> None:
    root = tmp_path / "runs"
    (root / "week").mkdir(parents=True)
    _write(root / "week" / "cases.parquet", b"PAR1")
    with pytest.raises(ResponseError) as info:
        resolve_sources(spec.format(root=root), exclude=root / "week")
    assert info.value.path == spec.format(root=root)
    assert f"only inside {root / 'week'}, the output directory" in str(info.value)


def test_a_directory_without_responses_files_names_the_directory(tmp_path: Path) -> None:
    _write(tmp_path / "notes.txt", b"x")
    with pytest.raises(ResponseError) as info:
        resolve_sources(tmp_path)
    assert info.value.path == str(tmp_path)
    assert ".parquet" in str(info.value)


def test_a_single_file_of_another_name_is_read_as_jsonl(tmp_path: Path) -> None:
    path = _write(tmp_path / "answers.txt", _jsonl(ROWS))
    assert resolve_sources(path) == [path]
    assert [r.probe_id for r in load_responses(path)] == ["a", "b", "c"]


# --------------------------------------------------------------------------- errors


def test_a_corrupt_line_in_gzip_names_the_gzip_file_and_line(tmp_path: Path) -> None:
    data = _jsonl(ROWS) + b"\n" + b'{"probe_id": "d", ' + b"\n"
    path = _write(tmp_path / "r.jsonl.gz", gzip.compress(data))
    err = _error([path], chunk_bytes=8)
    assert (err.path, err.line) == (str(path), 5)
    assert "not valid JSON" in str(err)


def test_an_invalid_record_in_gzip_names_line_and_field(tmp_path: Path) -> None:
    data = _jsonl([*ROWS, {"probe_id": "d", "response": "x", "sample": -1}])
    err = _error([_write(tmp_path / "r.jsonl.gz", gzip.compress(data))])
    assert (err.line, err.field) == (4, "sample")


def test_a_truncated_gzip_file_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl.gz", gzip.compress(_jsonl(ROWS * 50))[:-30])
    err = _error([path])
    assert (err.path, "truncated" in str(err)) == (str(path), True)


@pytest.mark.parametrize(
    "data",
    [_jsonl(ROWS), b"\x1f\x8b\x08\x00garbage" * 4, gzip.compress(_jsonl(ROWS)) + b"trailing"],
    ids=["not-gzip", "corrupt", "trailing-garbage"],
)
def test_a_corrupt_gzip_file_names_the_file(tmp_path: Path, data: bytes) -> None:
    path = _write(tmp_path / "r.jsonl.gz", data)
    err = _error([path])
    assert (err.path, "not valid gzip" in str(err)) == (str(path), True)


def test_a_file_that_is_not_parquet_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.parquet", _jsonl(ROWS))
    err = _error([path])
    assert (err.path, "not a readable Parquet file" in str(err)) == (str(path), True)


@pytest.mark.parametrize(
    ("column", "values", "row", "words"),
    [
        (
            "sample",
            pa.array([None, None, 1.5, 2.0]),
            3,
            ["a number (1.5)", "double", "whole number"],
        ),
        ("response", pa.array([None, 5, 6, 7]), 2, ["a number (5)", "int64", "a string"]),
        ("model", pa.array([None, None, None, [1]]), 4, ["a list", "expected a string"]),
        ("usage", pa.array(["a", "b", "c", "d"]), 1, ["a string", "struct"]),
        ("usage", pa.array([None, {"input_tokens": "x"}, None, None]), 2, ["a mapping"]),
        ("probe_id", pa.array([b"a", b"b", b"c", b"d"]), 1, ["binary", "a string"]),
        ("reasoning", pa.array([None, None, 3, None]), 3, ["a number (3)", "a string or null"]),
    ],
    ids=[
        "sample-double",
        "response-int",
        "model-list",
        "usage-string",
        "usage-child",
        "id-binary",
        "reasoning-int",
    ],
)
def test_a_parquet_column_of_the_wrong_type_names_the_field_and_first_row(
    tmp_path: Path, column: str, values: pa.Array, row: int, words: list[str]
) -> None:
    table = pa.table({"probe_id": ["a", "b", "c", "d"], "response": ["x"] * 4, "error": ["e"] * 4})
    table = table.drop_columns([column]) if column in table.column_names else table
    path = tmp_path / "r.parquet"
    pq.write_table(table.append_column(column, values), path)
    err = _error([path], rows=3)
    assert (err.path, err.line, err.field) == (str(path), row, column)
    assert f"row {row}" in str(err)
    for word in words:
        assert word in str(err)


def _not_utf8(values: list[bytes | None], kind: pa.DataType = STRING) -> pa.Array:
    """A text column holding the bytes as they are: Arrow does not check them when written."""
    binary = pa.large_binary() if kind == pa.large_string() else pa.binary()
    return pa.array(values, binary).view(kind)


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("response", _not_utf8([b"x", b"y", b"caf\xe9", b"z"])),
        ("model", _not_utf8([b"m", b"m", b"m\xff", b"m"])),
        ("probe_id", _not_utf8([b"a", b"b", b"\xc3", b"d"], pa.large_string())),
        ("reasoning", _not_utf8([None, None, b"\xff", None]).dictionary_encode()),
        (
            "error",
            pa.StructArray.from_arrays(
                [_not_utf8([None, None, b"time\xffout", None])], ["message"]
            ),
        ),
    ],
    ids=["response", "model", "id-large", "reasoning-dictionary", "error-struct"],
)
def test_parquet_text_that_is_not_utf8_names_the_row_and_field(
    tmp_path: Path, column: str, values: pa.Array
) -> None:
    table = pa.table({"probe_id": ["a", "b", "c", "d"], "response": ["x"] * 4})
    table = table.drop_columns([column]) if column in table.column_names else table
    path = tmp_path / "r.parquet"
    pq.write_table(table.append_column(column, values), path)
    (piece,) = iter_pieces([path])
    assert scan_piece(piece) is None if column == "model" else scan_piece(piece) is not None
    err = _error([path])
    assert (err.path, err.line, err.field) == (str(path), 3, column)
    assert "row 3" in str(err)
    assert "not UTF-8" in str(err)


def test_a_column_of_another_type_holding_only_nulls_is_read_as_nulls(tmp_path: Path) -> None:
    table = pa.table(
        {"probe_id": ["a"], "response": ["x"], "sample": pa.array([None], pa.float64())}
    )
    pq.write_table(table, tmp_path / "r.parquet")
    assert load_responses(tmp_path / "r.parquet") == [Response(probe_id="a", response="x")]


@pytest.mark.parametrize(
    ("rows", "bad", "field", "words"),
    [
        ({"probe_id": None, "response": "x"}, 6, "probe_id", ["is null in row 6"]),
        ({"probe_id": " ", "response": "x"}, 6, "probe_id", ["is empty in row 6"]),
        (
            {"probe_id": "z", "response": "x", "sample": -2},
            6,
            "sample",
            ["got -2 in row 6", "from 0 to 9223372036854775807"],
        ),
        ({"probe_id": "z"}, 6, "response", ["required unless 'error'", "row 6"]),
    ],
    ids=["null-id", "blank-id", "negative-sample", "no-answer"],
)
def test_a_bad_parquet_value_names_the_row_and_field(
    tmp_path: Path, rows: dict[str, Any], bad: int, field: str, words: list[str]
) -> None:
    records = [{"probe_id": f"p{i}", "response": "x", "sample": i} for i in range(8)]
    records[bad - 1] = rows
    path = _parquet(tmp_path / "r.parquet", records, _schema(), row_group_size=3)
    err = _error([path], rows=4)
    assert (err.path, err.line, err.field) == (str(path), bad, field)
    assert str(err).startswith(f"{path}:{bad}: field '{field}': ")
    for word in words:
        assert word in str(err)


@pytest.mark.parametrize(
    ("kind", "counts", "words"),
    [
        (pa.uint64(), [1, None, 2**64 - 1], ["input_tokens 18446744073709551615 in row 3"]),
        (pa.int64(), [1, -5, 2], ["input_tokens -5 in row 2"]),
    ],
    ids=["uint64-above-int64", "negative"],
)
def test_a_parquet_token_count_out_of_range_names_the_row_and_usage(
    tmp_path: Path, kind: pa.DataType, counts: list[int | None], words: list[str]
) -> None:
    usage = pa.StructArray.from_arrays(
        [pa.array(counts, kind), pa.array([7, 7, 7], kind)], ["input_tokens", "output_tokens"]
    )
    table = pa.table({"probe_id": ["a", "b", "c"], "response": ["x"] * 3, "usage": usage})
    pq.write_table(table, tmp_path / "r.parquet")
    err = _error([tmp_path / "r.parquet"])
    assert (err.line, err.field) == (int(words[0][-1]), "usage")
    for word in [*words, "from 0 to 9223372036854775807"]:
        assert word in str(err)


def test_a_null_usage_is_not_checked_whatever_its_counts_hold(tmp_path: Path) -> None:
    usage = pa.StructArray.from_arrays(
        [pa.array([-5, 1]), pa.array([1, 1])],
        ["input_tokens", "output_tokens"],
        mask=pa.array([True, False]),
    )
    table = pa.table({"probe_id": ["a", "b"], "response": ["x", "y"], "usage": usage})
    pq.write_table(table, tmp_path / "r.parquet")
    loaded = load_responses(tmp_path / "r.parquet")
    assert [r.usage for r in loaded] == [None, Usage(input_tokens=1, output_tokens=1)]


def test_the_first_bad_parquet_row_is_named_whatever_is_wrong_with_it(tmp_path: Path) -> None:
    table = pa.table(
        {
            "probe_id": ["a", "b", None, "d"],
            "response": pa.array([None, None, None, 4]),
            "sample": [0, -1, 0, 0],
            "error": ["e", "e", "e", None],
        }
    )
    pq.write_table(table, tmp_path / "r.parquet")
    err = _error([tmp_path / "r.parquet"])
    assert (err.line, err.field) == (2, "sample")


def test_a_parquet_file_without_probe_id_names_the_column(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "r.parquet", [{"probeid": "a", "response": "x"}])
    err = _error([path])
    assert (err.line, err.field) == (1, "probe_id")
    assert "did you mean 'probe_id'?" in str(err)


def test_errors_of_a_piece_pickle_and_name_the_same_place(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "r.parquet", [{"probe_id": None, "response": "x"}], _schema())
    (piece,) = iter_pieces([path])
    with pytest.raises(ResponseError) as info:
        decode_piece(pickle.loads(pickle.dumps(piece)))
    again = pickle.loads(pickle.dumps(info.value))
    assert (again.path, again.line, again.field) == (str(path), 1, "probe_id")


def test_pieces_before_a_bad_file_are_given_before_its_error(tmp_path: Path) -> None:
    good = _write(tmp_path / "a.jsonl", _jsonl(ROWS) + b"\n\n\n")
    bad = _write(tmp_path / "b.jsonl.gz", b"not gzip at all")
    pieces = iter_pieces([good, bad], chunk_bytes=8)
    assert [decode_piece(next(pieces)).lines for _ in range(3)] == [[1], [2], [3]]
    with pytest.raises(ResponseError, match="not valid gzip"):
        next(pieces)


# --------------------------------------------------------------------------- digest, progress, scan


def test_the_digest_of_one_plain_file_is_its_sha256(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbf" + _jsonl(ROWS) + b"\n \n"
    path = _write(tmp_path / "r.jsonl", data)
    digest = hashlib.sha256()
    list(iter_pieces([path], chunk_bytes=5, digest=digest))
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()


def test_the_digest_of_several_files_covers_their_bytes_in_order(tmp_path: Path) -> None:
    paths = resolve_sources(_mixed_folder(tmp_path / "runs"))
    digest = hashlib.sha256()
    pieces = list(iter_pieces(paths, chunk_bytes=4, rows=1, digest=digest))
    assert digest.hexdigest() == hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()
    assert sum(p.nbytes for p in pieces) == source_bytes(paths)


def test_bytes_of_files_without_records_count_toward_a_piece(tmp_path: Path) -> None:
    paths = [
        _write(tmp_path / "a.jsonl", b"\n\n"),
        _write(tmp_path / "b.jsonl", _jsonl(ROWS) + b" " * 100),
        _parquet(tmp_path / "c.parquet", [], _schema()),
        _write(tmp_path / "d.jsonl.gz", gzip.compress(b"\n" * 1000)),
    ]
    pieces = list(iter_pieces(paths, chunk_bytes=16))
    assert {p.path.name for p in pieces} == {"b.jsonl"}
    assert sum(p.nbytes for p in pieces) == source_bytes(paths)


def test_scan_gives_the_models_and_count_of_each_kind_of_piece(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    _write(root / "r.jsonl.gz", gzip.compress(_jsonl(ROWS)))
    _parquet(root / "r.parquet", ROWS, _schema(pa.dictionary(pa.int8(), pa.string())))
    scans = [scan_piece(p) for p in iter_pieces(resolve_sources(root))]
    assert scans == [({None, "m1", "m2"}, 3), ({None, "m1", "m2"}, 3)]


def test_scan_gives_none_for_a_piece_that_does_not_decode(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", b'{"probe_id": "a", "model": 3}\n')
    assert scan_piece(next(iter_pieces([path]))) is None
    pq.write_table(pa.table({"probe_id": ["a"], "model": [3]}), tmp_path / "r.parquet")
    assert scan_piece(next(iter_pieces([tmp_path / "r.parquet"]))) is None


def test_a_parquet_piece_survives_pickling(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "r.parquet", ROWS, _schema())
    (piece,) = iter_pieces([path])
    copy = pickle.loads(pickle.dumps(piece))
    assert isinstance(copy, Piece)
    assert (copy.path, copy.first_line, copy.data, copy.nbytes) == (path, 1, None, piece.nbytes)
    assert decode_piece(copy) == decode_piece(piece)
