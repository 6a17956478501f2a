"""Write and read report.json: UTF-8, no NaN, full float precision, one case per line.

The header, metrics and geometry are indented for people and diffs; each case is one
compact line, so a report of a million cases streams to disk without being built in memory
twice, and a changed case shows as a changed line.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from faultline._util.files import atomic_writer
from faultline.errors import InputError
from faultline.report.model import CaseLines, Report

__all__ = ["encode_report", "read_report", "write_report_json"]

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


def read_report(path: str | Path) -> dict[str, Any]:
    """Read a report.json (or the report.json in a run directory) as plain data.

    Raises:
        InputError: The file is missing or is not a faultline report.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    try:
        data = msgspec.json.decode(p.read_bytes())
    except FileNotFoundError:
        raise InputError("no such file", path=p) from None
    except msgspec.DecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", path=p) from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise InputError("not a faultline report.json (no schema_version)", path=p)
    if "cases" not in data and "cases_file" not in data:
        raise InputError("not a faultline report.json (no cases or cases_file)", path=p)
    return data
