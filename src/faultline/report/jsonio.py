"""Write and read report.json: UTF-8, no NaN, full float precision, one case per line.

The header, metrics and geometry are indented for people and diffs; each case is one
compact line, so a report of a million cases streams to disk without being built in memory
twice, and a changed case shows as a changed line.
"""

from __future__ import annotations

import math
import mmap
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import msgspec

from faultline._util.files import (
    TOO_DEEP,
    atomic_writer,
    json_error_line,
    json_error_offset,
    sha256_file,
)
from faultline.errors import InputError
from faultline.report.model import REPORT_FILE, CaseLines, Report
from faultline.report.shape import ReportShape

_SHAPE = msgspec.json.Decoder(ReportShape)
CASES_FIELD = {"1": "cases", "2": "cases_file"}
"""The field that holds a report's cases, by schema version: a report without it has none."""
_REQUIRED = {"1": (CASES_FIELD["1"],), "2": (CASES_FIELD["2"], "worst_cases")}

__all__ = [
    "CASES_FIELD",
    "READABLE_VERSIONS",
    "cases_file_path",
    "check_required",
    "decode_report_file",
    "encode_report",
    "read_report",
    "report_json_path",
    "write_report_json",
]

_ENCODER = msgspec.json.Encoder()
_CASES_PER_CHUNK = 4096


def _pretty(value: Any, indent: int) -> bytes:
    _check_finite(value)
    text = msgspec.json.format(_ENCODER.encode(value), indent=2)
    pad = b" " * indent
    return text.replace(b"\n", b"\n" + pad)


def _check_finite(value: Any) -> None:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("report holds a NaN or infinite number")
    elif isinstance(value, dict):
        for v in value.values():
            _check_finite(v)
    elif isinstance(value, list | tuple):
        for v in value:
            _check_finite(v)


def _chunks(report: Report) -> Iterator[bytes]:
    yield b"{\n"
    for key, value in report.header.items():
        yield b'  "' + key.encode() + b'": ' + _pretty(value, 2) + b",\n"
    if report.cases_file is not None:
        yield b'  "cases_file": ' + _pretty(report.cases_file.describe(), 2) + b",\n"
        worst = report.cases_file.worst
        yield b'  "worst_cases": [' + (
            b"\n    " + b",\n    ".join(_ENCODER.encode(c) for c in worst) + b"\n  ],\n"
            if worst
            else b"],\n"
        )
        yield b'  "aggregate_metrics": ' + _pretty(report.aggregate_metrics, 2) + b",\n"
        yield b'  "observability": ' + _pretty(report.observability, 2) + b"\n}\n"
        return
    yield b'  "cases": ['
    cases = report.cases
    separator = b",\n    "
    for start in range(0, len(cases), _CASES_PER_CHUNK):
        stop = start + _CASES_PER_CHUNK
        if isinstance(cases, CaseLines):
            part = b"".join(cases.parts(start, stop, separator))
        else:
            part = separator.join([_ENCODER.encode(c) for c in cases[start:stop]])
        yield (b"\n    " if start == 0 else separator) + part
    yield b"\n  ],\n" if cases else b"],\n"
    yield b'  "aggregate_metrics": ' + _pretty(report.aggregate_metrics, 2) + b",\n"
    yield b'  "observability": ' + _pretty(report.observability, 2) + b"\n}\n"


def encode_report(report: Report) -> bytes:
    """The bytes of report.json."""
    return b"".join(_chunks(report))


def write_report_json(report: Report, path: Path) -> None:
    """Write report.json atomically: readers see the old file or the complete new one."""
    with atomic_writer(path) as handle:
        _write_chunks(report, handle)


def _write_chunks(report: Report, handle: BinaryIO) -> None:
    for chunk in _chunks(report):
        handle.write(chunk)


READABLE_VERSIONS = ("1", "2")
"""The report.json schema versions this faultline reads."""

T = TypeVar("T")


def decode_report_file(path: str | Path, decoder: msgspec.json.Decoder[T]) -> tuple[T, Path]:
    """Decode a report.json (or the report.json in a run directory) with a typed decoder.

    The decoder's type says which fields must be there and what they hold; the file is read
    through a memory map (its pages are the file's, not a copy), and only the fields the type
    names are decoded. Used by every reader of a report, so each rejects a damaged file the
    same way.

    Returns:
        The decoded value and the report.json's path.

    Raises:
        InputError: The file is missing, unreadable, not JSON, of an unknown schema_version,
            or not of that shape, naming the file and the field.
    """
    p = report_json_path(path)
    try:
        value = _decode_mapped(p, decoder)
    except FileNotFoundError:
        raise InputError(
            "no such file (expected a report.json or a run directory)", path=p
        ) from None
    except OSError as exc:
        raise InputError(f"cannot be read ({exc.strerror or exc})", path=p) from exc
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at `$")
        field = where.rstrip("`").lstrip(".") or None
        raise InputError(f"not a faultline report.json: {message}", path=p, field=field) from None
    except msgspec.DecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", path=p, line=_error_line(p, exc)) from None
    except RecursionError:
        raise InputError(TOO_DEEP, path=p) from None
    version = getattr(value, "schema_version", None)
    if version not in READABLE_VERSIONS:
        raise InputError(
            f"schema_version {version!r} is not one this faultline reads ('1', '2')",
            path=p,
            field="schema_version",
        )
    return value, p


def report_json_path(given: str | Path) -> Path:
    """The report.json ``given`` names: the file itself, or the one in a run directory."""
    p = Path(given)
    return p / REPORT_FILE if p.is_dir() else p


def _error_line(path: Path, exc: msgspec.DecodeError) -> int | None:
    """The line of ``path`` where its JSON broke, read again up to there (``None``: unknown)."""
    offset = json_error_offset(exc)
    if offset is None:
        return None
    try:
        with path.open("rb") as handle:
            return json_error_line(exc, handle.read(offset))
    except OSError:
        return None


def _decode_mapped(path: Path, decoder: msgspec.json.Decoder[T]) -> T:
    with path.open("rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            raise msgspec.DecodeError("the file is empty")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return decoder.decode(data)


def cases_file_path(report_path: Path, cases_file: Mapping[str, Any]) -> Path:
    """The cases.parquet a schema 2 report names, checked to be the one report.json describes.

    ``cases_file.path`` must be a plain file name: the file is beside report.json, and a path
    anywhere else is refused before that file is opened.

    Its SHA-256 must be ``cases_file.sha256``: a cases table of another run (copied over, or
    left by an earlier run) would pair this run's metrics with another run's cases; and it
    must hold ``cases_file.rows`` rows. Its rows are checked as they are read
    (:func:`faultline.report.parquet.iter_case_rows`).

    Raises:
        InputError: The file is missing, unreadable, or not the one report.json describes.
    """
    name = cases_file.get("path")
    if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\:"):
        raise InputError(
            f"got {name!r}, expected the name of a file beside {report_path.name} "
            "(such as 'cases.parquet'), not a path to somewhere else",
            path=report_path,
            field="cases_file.path",
        )
    path = report_path.parent / name
    try:
        digest = sha256_file(path)
    except FileNotFoundError:
        raise InputError(
            f"no such file; {report_path.name} keeps its cases in it (cases_file), "
            "so it must be beside it",
            path=path,
        ) from None
    except OSError as exc:
        raise InputError(f"cannot be read ({exc.strerror or exc})", path=path) from None
    expected = cases_file.get("sha256")
    if digest != expected:
        raise InputError(
            f"is not the cases table {report_path} describes: its sha256 is {digest}, "
            f"cases_file.sha256 says {expected}; it belongs to another run or was changed. "
            "Keep each run's report.json and cases.parquet together",
            path=path,
        )
    from faultline.report.parquet import check_row_count

    check_row_count(path, cases_file.get("rows"))
    return path


def read_report(path: str | Path) -> dict[str, Any]:
    """Read a report.json (or the report.json in a run directory) as plain data.

    The file is first checked against the report's contract (docs/report-format.md): the
    fields the views read must be there, with the types the contract gives them.

    Raises:
        InputError: The file is missing or is not a faultline report, naming the field.
    """
    shape, p = decode_report_file(path, _SHAPE)
    check_required(shape, p, _REQUIRED[shape.schema_version])
    _check_references(shape, p)
    try:
        data: dict[str, Any] = msgspec.json.decode(p.read_bytes())
    except RecursionError:  # the shape skips fields it does not read; this reads them all
        raise InputError(TOO_DEEP, path=p) from None
    return data


def check_required(report: Any, path: Path, fields: Iterable[str]) -> None:
    """Each of ``fields`` is in a decoded report (its decoder's type leaves it ``UNSET`` if not).

    Fields a decoder cannot require by itself, as they depend on the schema version: a
    schema 1 report holds ``cases``, a schema 2 one ``cases_file``. Every reader of a report
    refuses one without them in the same words.

    Raises:
        InputError: A field is missing, naming the file and the field.
    """
    for field in fields:
        if getattr(report, field, msgspec.UNSET) is msgspec.UNSET:
            raise InputError(
                f"not a faultline report.json: no {field} (schema {report.schema_version})",
                path=path,
                field=field,
            )


def _check_references(shape: ReportShape, path: Path) -> None:
    """Fields that name another part of the report: each must name one that is there."""
    m = shape.aggregate_metrics
    for i, ranked in enumerate(m.category_ranking):
        if ranked.category not in m.by_category:
            raise InputError(
                f"not a faultline report.json: category {ranked.category!r} is ranked but "
                "aggregate_metrics.by_category has no entry for it",
                path=path,
                field=f"aggregate_metrics.category_ranking[{i}].category",
            )
