"""Responses in Parquet files: record batches in, validated :class:`Response` records out.

Types are checked once per column, from the Arrow schema; the values a column holds are
turned into Python objects a column at a time (``to_pylist``) and zipped into records. The
checks on single values (a null or blank ``probe_id``, a negative ``sample``, neither
``response`` nor ``error``) run on whole columns with Arrow compute and look for the row only
when one fails, so a valid batch costs little more than building its records.

Imported only when a Parquet file is read: pyarrow takes a while to load.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from faultline._util.files import open_for_reading
from faultline._util.text import describe_value, did_you_mean
from faultline.errors import ResponseError
from faultline.responses.loader import MAX_SAMPLE, MAX_TOKENS, USAGE_FIELDS, ResponseBatch
from faultline.responses.model import FIELDS, Response, Usage

__all__ = ["decode_batch", "iter_batches", "scan_batch"]

_EXPECTED = {
    "probe_id": "a string",
    "response": "a string",
    "sample": "a whole number",
    "model": "a string or null",
    "error": "a string or a struct",
    "finish_reason": "a string or null",
    "usage": "a struct {input_tokens, output_tokens} of whole numbers, or null",
    "reasoning": "a string or null",
}
_HASH_BLOCK = 1 << 20

# A problem found in a batch: (row index, rank among the problems of a row, field, reason);
# the reason is a format string with a {row} field.
_Problem = tuple[int, int, str, str]


def iter_batches(path: Path, rows: int, digest: Any) -> Iterator[tuple[int, Any, int] | int]:
    """Read a Parquet file in record batches of the columns a :class:`Response` has.

    Args:
        path: The file.
        rows: The most rows a batch holds.
        digest: A ``hashlib`` object to update with the file's bytes first, if any.

    Yields:
        ``(first_row, batch, nbytes)`` for each batch that has rows, ``first_row`` 1-based
        and ``nbytes`` the file's size shared out by rows; then, as a plain number, any bytes
        no batch accounts for (all of them, for a file without rows).

    Raises:
        ResponseError: The file cannot be read, is not Parquet, or has two columns of one
            field.
    """
    if digest is not None:
        _hash_file(path, digest)
    with open_for_reading(path, ResponseError, "a Parquet file") as handle:
        size = os.fstat(handle.fileno()).st_size
        try:
            file = pq.ParquetFile(handle)
            total = max(file.metadata.num_rows, 1)
            names = file.schema_arrow.names
            _reject_repeated_columns(names, path)
            # Without probe_id, every column is read, for the message to suggest one.
            columns = [n for n in names if n in FIELDS] if "probe_id" in names else None
            batches = file.iter_batches(batch_size=max(rows, 1), columns=columns)
        except (pa.ArrowException, OSError) as exc:
            raise ResponseError(f"is not a readable Parquet file ({exc})", path=path) from None
        seen = shared = 0
        while (batch := _next_batch(batches, path, seen)) is not None:
            if batch.num_rows == 0:
                continue
            share = min(size * (seen + batch.num_rows) // total, size) - shared
            yield seen + 1, batch, share
            seen, shared = seen + batch.num_rows, shared + share
        if shared < size:
            yield size - shared


def _reject_repeated_columns(names: list[str], path: Path) -> None:
    """Raise naming the field if two columns of the file carry the same field.

    Arrow keeps both; reading by name would take one of them without a word, so the verdicts
    would depend on the order of the columns.
    """
    repeated = next((n for n in FIELDS if names.count(n) > 1), None)
    if repeated is not None:
        raise ResponseError(
            f"is given by {names.count(repeated)} columns, expected each field once",
            path=path,
            field=repeated,
        )


def _next_batch(batches: Iterator[Any], path: Path, seen: int) -> Any:
    try:
        return next(batches, None)
    except (pa.ArrowException, OSError) as exc:
        raise ResponseError(
            f"cannot be read after row {seen} ({exc})", path=path, line=seen + 1
        ) from None


def _hash_file(path: Path, digest: Any) -> None:
    with open_for_reading(path, ResponseError, "a Parquet file") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)


def scan_batch(batch: Any) -> tuple[set[str | None], int] | None:
    """The models a batch names and its number of rows; ``None`` if its model column is bad."""
    if "model" not in batch.schema.names:
        return {None}, batch.num_rows
    column = batch.column("model")
    if not _is_text(column.type):
        return None if column.null_count < len(column) else ({None}, batch.num_rows)
    try:
        return set(pc.unique(column).to_pylist()), batch.num_rows
    except UnicodeDecodeError:  # bytes that are not UTF-8: the decoding pass names the row
        return None


def decode_batch(path: Path, batch: Any, first_row: int) -> ResponseBatch:
    """Validate a record batch and turn it into records.

    Args:
        path: The file, for messages.
        batch: A record batch from :func:`iter_batches`.
        first_row: The 1-based row of its first row in the file.

    Raises:
        ResponseError: A row is not a valid record: the first such row is named (as the line,
            and in the message) with the field.
    """
    n = batch.num_rows
    columns = _columns(batch, path, first_row)
    problems = _type_problems(columns, n)
    mistyped = {problem[2] for problem in problems}
    values: dict[str, list[Any]] = {}
    for name, column in columns.items():
        if name in mistyped:
            continue
        try:
            values[name] = _values(name, column)
        except UnicodeDecodeError:
            problems.append(_utf8_problem(name, column))
    problems += _value_problems(columns, values, n)
    if problems:
        row, _, field, reason = min(problems)
        raise ResponseError(
            reason.format(row=first_row + row),
            path=path,
            line=first_row + row,
            field=field,
        )
    ordered = [
        values[name] if name in values else itertools.repeat(0 if name == "sample" else None, n)
        for name in FIELDS
    ]
    responses = [
        Response(
            probe_id=p,
            response=r,
            sample=s,
            model=m,
            error=e,
            finish_reason=f,
            usage=u,
            reasoning=t,
        )
        for p, r, s, m, e, f, u, t in zip(*ordered, strict=False)
    ]
    return ResponseBatch(path, list(range(first_row, first_row + n)), responses)


def _columns(batch: Any, path: Path, first_row: int) -> dict[str, Any]:
    """The batch's columns a :class:`Response` has.

    Each name is once in the batch: :func:`iter_batches` refuses a file that repeats one.
    """
    names = batch.schema.names
    columns = {name: batch.column(i) for i, name in enumerate(names) if name in FIELDS}
    if "probe_id" not in columns:
        hint = next((h for name in names if (h := did_you_mean(name, ["probe_id"]))), "")
        raise ResponseError(
            f"is required but missing: row {first_row} has no probe_id column{hint}",
            path=path,
            line=first_row,
            field="probe_id",
        )
    return columns


def _is_text(kind: Any) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(
        pa.types.is_null(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_string_view(kind)
    )


def _is_whole(kind: Any) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_null(kind))


def _is_usage(kind: Any) -> bool:
    if pa.types.is_null(kind):
        return True
    if not pa.types.is_struct(kind):
        return False
    children = (kind.field(i) for i in range(kind.num_fields))
    return all(_is_whole(child.type) for child in children if child.name in USAGE_FIELDS)


def _is_error(kind: Any) -> bool:
    return _is_text(kind) or bool(pa.types.is_struct(kind) or pa.types.is_map(kind))


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "probe_id": _is_text,
    "response": _is_text,
    "sample": _is_whole,
    "model": _is_text,
    "error": _is_error,
    "finish_reason": _is_text,
    "usage": _is_usage,
    "reasoning": _is_text,
}


def _type_problems(columns: dict[str, Any], n: int) -> list[_Problem]:
    """The first value of each column whose Arrow type cannot hold its field.

    A column of another type that holds only nulls is replaced by a column of nulls.
    """
    problems: list[_Problem] = []
    for name, column in columns.items():
        if _TYPE_CHECKS[name](column.type):
            continue
        if column.null_count == n:
            columns[name] = pa.nulls(n)
            continue
        row = _first(pc.is_valid(column))
        value = _literal(describe_value(column[row].as_py()))
        reason = (
            f"got {value} in row {{row}} (a Parquet column of type {_literal(str(column.type))}), "
            f"expected {_literal(_EXPECTED[name])}"
        )
        problems.append((row, 0, name, reason))
    return problems


def _utf8_problem(name: str, column: Any) -> _Problem:
    """The first value of a text column (or of one a struct holds) that is not UTF-8.

    Arrow stores a string column's bytes as they were written, unchecked; Python cannot turn
    such bytes into a string. Bad input only: each value is turned into Python on its own.
    """
    row = next(i for i in range(len(column)) if not _decodes(column[i]))
    reason = "holds bytes that are not UTF-8 text in row {row}; write the column as UTF-8 strings"
    return row, 0, name, reason


def _decodes(value: Any) -> bool:
    try:
        value.as_py()
    except UnicodeDecodeError:
        return False
    return True


def _literal(text: str) -> str:
    """``text`` as a part of a format string."""
    return text.replace("{", "{{").replace("}", "}}")


def _value_problems(
    columns: dict[str, Any], values: dict[str, list[Any]], n: int
) -> list[_Problem]:
    """The first row breaking each rule on single values, in columns of the right types."""
    problems: list[_Problem] = []
    if "probe_id" in values and (problem := _id_problem(columns["probe_id"], values["probe_id"])):
        problems.append(problem)
    sample = columns.get("sample", pa.nulls(0))
    if "sample" in values and sample.null_count < n:
        bounds = pc.min_max(sample)
        if bounds["min"].as_py() < 0 or bounds["max"].as_py() > MAX_SAMPLE:
            row = next(  # bad input only: the column's own type may not hold both bounds
                i
                for i, v in enumerate(sample.to_pylist())
                if v is not None and not 0 <= v <= MAX_SAMPLE
            )
            reason = (
                f"got {sample[row].as_py()} in row {{row}}, expected a whole number "
                f"from 0 to {MAX_SAMPLE}"
            )
            problems.append((row, 2, "sample", reason))
    nulls = [pc.is_null(columns[name]) for name in ("response", "error") if name in columns]
    missing = functools.reduce(pc.and_, nulls) if nulls else None
    if missing is None or pc.any(missing).as_py():
        row = 0 if missing is None else _first(missing)
        reason = "is required unless 'error' is set (the target failed for this case); row {row} has neither"
        problems.append((row, 3, "response", reason))
    if "usage" in values and (problem := _usage_problem(columns["usage"])):
        problems.append(problem)
    return problems


def _usage_problem(column: Any) -> _Problem | None:
    """The first row with a token count below 0 or above :data:`MAX_TOKENS`, if any."""
    if not pa.types.is_struct(column.type):
        return None
    children = column.flatten()  # a null struct's counts are null, whatever its children hold
    problems: list[_Problem] = []
    for index, child in enumerate(children):
        key = column.type.field(index).name
        if key not in USAGE_FIELDS or child.null_count == len(child):
            continue
        bounds = pc.min_max(child)
        if bounds["min"].as_py() >= 0 and bounds["max"].as_py() <= MAX_TOKENS:
            continue
        row = next(  # bad input only
            i for i, v in enumerate(child.to_pylist()) if v is not None and not 0 <= v <= MAX_TOKENS
        )
        reason = (
            f"got {key} {child[row].as_py()} in row {{row}}, expected a whole number "
            f"from 0 to {MAX_TOKENS}"
        )
        problems.append((row, 4, "usage", reason))
    return min(problems, default=None)


def _id_problem(column: Any, ids: list[Any]) -> _Problem | None:
    if column.null_count:
        return _first(pc.is_null(column)), 0, "probe_id", "is null in row {row}, expected a string"
    if all(map(str.strip, ids)):
        return None
    row = next(i for i, pid in enumerate(ids) if not pid.strip())
    return row, 1, "probe_id", "is empty in row {row}, expected the id of a probe"


def _first(mask: Any) -> int:
    return int(pc.index(mask, True).as_py())


def _values(name: str, column: Any) -> list[Any]:
    """A column's values as Python objects, in the shape :class:`Response` holds them."""
    if name == "sample":
        if pa.types.is_null(column.type):
            return [0] * len(column)
        return list((pc.fill_null(column, 0) if column.null_count else column).to_pylist())
    if name == "usage":
        return _usages(column)
    if pa.types.is_dictionary(column.type):
        return _decoded(column)
    if name == "error":
        return _errors(column)
    return list(column.to_pylist())


def _errors(column: Any) -> list[Any]:
    """An ``error`` column's values: text, or a mapping as a JSON object gives it."""
    values = column.to_pylist()
    if pa.types.is_map(column.type):
        return [None if v is None else dict(v) for v in values]
    if pa.types.is_struct(column.type):
        return [_present(v) for v in values]
    return list(values)


def _present(value: Any) -> Any:
    """A struct's value without the keys its row leaves null, in the structs it holds too.

    A struct column has every key that any row has; a row's null is the key left out (as a
    null column is the field left out), so the error reads as its JSONL line would.
    """
    if not isinstance(value, dict):
        return value
    return {k: _present(v) for k, v in value.items() if v is not None}


def _decoded(column: Any) -> list[Any]:
    """A dictionary column's values: each distinct one a single object, shared by its rows."""
    try:
        distinct = column.dictionary.to_pylist()
    except UnicodeDecodeError:  # bad bytes in the dictionary: in a row, or in no row at all
        return list(column.cast(column.type.value_type).to_pylist())
    indices = column.indices.to_pylist()
    if column.indices.null_count:
        return [None if i is None else distinct[i] for i in indices]
    return list(map(distinct.__getitem__, indices))


def _usages(column: Any) -> list[Usage | None]:
    n = len(column)
    if pa.types.is_null(column.type):
        return [None] * n
    names = [column.type.field(i).name for i in range(column.type.num_fields)]
    counts = [
        column.field(key).to_pylist() if key in names else itertools.repeat(None, n)
        for key in USAGE_FIELDS
    ]
    valid = column.is_valid().to_pylist() if column.null_count else itertools.repeat(True, n)
    return [
        Usage(input_tokens=i, output_tokens=o) if ok else None
        for ok, i, o in zip(valid, *counts, strict=False)
    ]
