"""Reading a benchmark file: the options, the CSV / JSONL rows and their header checks.

:func:`import_probes` checks ``mapping`` and ``defaults`` against the :class:`Format`, reads
the file's rows (matching columns ignoring case), builds each row with the format's builder
and checks that ids are unique. Every error names the file, the line and the field.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from faultline._util.files import jsonl_objects, read_text_file
from faultline._util.text import describe_value, did_you_mean, one_of
from faultline.errors import ProbeError, UsageError
from faultline.probes.importers.formats import (
    FORMATS,
    Format,
    _Context,
    _finish,
    _generic,
    _Row,
    known_category,
)
from faultline.probes.importers.tables import GENERAL_CATEGORY
from faultline.probes.model import EXPECTS, SEVERITIES, Expect, Severity

__all__ = ["CELL_LIMIT", "import_probes", "parse_map_options"]

CELL_LIMIT = 16 * 1024 * 1024
"""The most characters a CSV cell may hold (16 Mi; Python's csv module stops at 131,072)."""


def parse_map_options(pairs: Iterable[str]) -> dict[str, str]:
    """Parse ``--map FIELD=COLUMN`` values into ``{FIELD: COLUMN}``.

    Raises:
        UsageError: A value is not ``FIELD=COLUMN``, or names a field twice.
    """
    mapping: dict[str, str] = {}
    for pair in pairs:
        key, sep, column = (part.strip() for part in pair.partition("="))
        if not sep or not key or not column:
            raise UsageError(f"--map {pair!r} is not FIELD=COLUMN, e.g. --map input=prompt")
        if key in mapping:
            raise UsageError(f"--map names '{key}' twice; give each field one column")
        mapping[key] = column
    return mapping


def import_probes(
    path: str | Path,
    fmt: str,
    *,
    mapping: Mapping[str, str] | None = None,
    defaults: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Read a benchmark file and return its rows as probe records.

    Args:
        path: A CSV (``.tsv``: tab-separated) or JSONL file; UTF-8, with or without a BOM.
        fmt: A name of :data:`FORMATS`.
        mapping: ``{field: column}``. For ``csv`` / ``jsonl``, the fields of
            :data:`GENERIC_FIELDS` (``input`` defaults to a column named ``input``; ``expect``
            may be ``COLUMN:VALUE=refuse,VALUE=comply``). For a named format, its own
            columns, to read a file whose columns are named differently.
        defaults: For rows that do not say: ``category`` (for a named format, the fallback
            instead of :data:`GENERAL_CATEGORY`), ``severity`` and ``expect`` (``csv`` /
            ``jsonl``; ``expect`` also for ``jbb``, where ``comply`` marks the benign
            behaviours, as a file name containing "benign" does).

    Returns:
        One dict per data row, in file order, with the fields of a probe.

    Raises:
        ProbeError: The file is missing or unreadable, lacks a column, or a row is bad; the
            message names the file, the line and the field.
        UsageError: An unknown format, ``mapping`` field or ``defaults`` value.
    """
    path = Path(path)
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}{did_you_mean(fmt, FORMATS)}; {one_of(FORMATS)}")
    form = FORMATS[fmt]
    mapping = _check_mapping(form, mapping or {})
    values: dict[str, Expect] = {e: e for e in EXPECTS}
    if ":" in mapping.get("expect", ""):
        mapping["expect"], values = _expect_spec(mapping["expect"])
    ctx = _context(form, path, defaults or {}, values)
    probes: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for row in _rows(path, form, mapping):
        probe = _finish(form.build(row, ctx), fmt, row.number)
        if probe["id"] in seen:
            reason = f"gives id '{probe['id']}', already given at line {seen[probe['id']]}"
            raise row.error(form.id_column, reason)
        seen[probe["id"]] = row.line
        probes.append(probe)
    if not probes:
        raise ProbeError("holds no data rows", path=path)
    return probes


def _check_mapping(form: Format, mapping: Mapping[str, str]) -> dict[str, str]:
    """``mapping`` keyed by the format's own spelling of each column."""
    known = {c.lower(): c for c in form.required + form.optional}
    checked: dict[str, str] = {}
    for key, column in mapping.items():
        if key.lower() not in known:
            raise UsageError(
                f"--map {key}={column}: '{key}' is not a field of --format {form.name}"
                f"{did_you_mean(key, known.values())} (fields: {', '.join(known.values())})"
            )
        checked[known[key.lower()]] = column
    return checked


def _context(
    form: Format, path: Path, defaults: Mapping[str, str], values: Mapping[str, Expect]
) -> _Context:
    for key, value in defaults.items():
        if key not in form.defaults:
            takes = ", ".join(f"--{d}" for d in sorted(form.defaults))
            raise UsageError(f"--{key} does not apply to --format {form.name} (it takes {takes})")
        choices = {"severity": SEVERITIES, "expect": EXPECTS}.get(key)
        if not value.strip():
            raise UsageError(f"--{key} is empty; give a value or leave the option out")
        if choices and value not in choices:
            raise UsageError(f"--{key} {value!r}: expected {one_of(choices)}")
    expect = defaults.get("expect")
    if expect is None and form.name == "jbb" and "benign" in path.name.lower():
        expect = "comply"
    category = defaults.get("category", "").strip() or None
    if category is not None:  # a known category is read in any case, as in a category column
        category = known_category(category)
    return _Context(
        form.name,
        category or GENERAL_CATEGORY,
        category,
        cast("Expect | None", expect),
        cast("Severity | None", defaults.get("severity")),
        values,
    )


def _expect_spec(spec: str) -> tuple[str, dict[str, Expect]]:
    column, _, pairs = spec.partition(":")
    table: dict[str, Expect] = {}
    for pair in pairs.split(","):
        value, _, expect = (part.strip() for part in pair.partition("="))
        if expect not in EXPECTS or not value:
            raise UsageError(
                f"--map expect={spec}: {pair!r} is not VALUE=refuse or VALUE=comply "
                "(e.g. --map expect=label:unsafe=refuse,safe=comply)"
            )
        key = value.lower()  # values are compared ignoring case
        if table.get(key, expect) != expect:
            raise UsageError(
                f"--map expect={spec}: {value!r} is mapped to both {table[key]} and {expect} "
                "(values are compared ignoring case); give each value one expectation"
            )
        table[key] = expect
    return column.strip(), table


def _rows(path: Path, form: Format, mapping: Mapping[str, str]) -> Iterator[_Row]:
    jsonl = form.reader == "jsonl" or (
        form.reader == "auto" and path.suffix.lower() in (".jsonl", ".ndjson")
    )
    text = read_text_file(path, ProbeError)
    records: Iterable[tuple[int, list[str], dict[str, str]]]
    if jsonl:
        records = list(_jsonl_records(text, path))
        _check_mapped_keys(mapping, records, path)
        if not records:
            raise ProbeError(
                "holds no data rows: no JSON object, only blank lines; expected one object "
                "per line",
                path=path,
            )
    else:
        records = _csv_records(text, path)
    columns: dict[str, str] | None = None
    for number, (line, found, cells) in enumerate(records, start=1):
        # A CSV header is checked once; a JSONL object may leave out optional keys.
        if columns is None or jsonl:
            columns = _columns(form, mapping, found, path, line if jsonl else 1, strict=not jsonl)
        for actual in columns.values():  # only a key that is read must hold text or a number
            if isinstance(cell := cells.get(actual), _NotText):
                reason = f"got {cell}, expected text or a number"
                raise ProbeError(reason, path=path, line=line, field=actual)
        yield _Row({k: cells.get(v, "") for k, v in columns.items()}, line, number, columns, path)


def _check_mapped_keys(
    mapping: Mapping[str, str], records: Sequence[tuple[int, list[str], dict[str, str]]], path: Path
) -> None:
    """Each key ``--map`` names is in at least one JSONL object (an object may leave a key out)."""
    found = list(dict.fromkeys(key for _, keys, _ in records for key in keys))
    for name, key in mapping.items():
        if key not in found:
            lower = [k for k in found if k.lower() == key.lower()]
            hint = f"; did you mean '{lower[0]}'?" if lower else did_you_mean(key, found)
            raise ProbeError(
                f"no object has the key '{key}' (named by --map {name}={key}); keys found: "
                f"{', '.join(found) or 'none'}{hint}",
                path=path,
                line=records[0][0] if records else None,
                field=key,
            )


def _columns(
    form: Format,
    mapping: Mapping[str, str],
    found: Sequence[str],
    path: Path,
    line: int,
    *,
    strict: bool,
) -> dict[str, str]:
    """Canonical column -> the file's column, for each column present or mapped."""
    lower = {c.strip().lower(): c for c in found}
    listed = ", ".join(found) or "none"
    columns: dict[str, str] = {}
    for name in form.required + form.optional:
        actual = mapping.get(name, lower.get(name.lower()))
        if actual is not None and actual not in found:
            # A column named by --map is matched ignoring case too, as the built-in names are.
            actual = lower.get(actual.strip().lower(), actual)
        if strict and actual is not None and actual not in found:
            raise ProbeError(
                f"has no column '{actual}' (named by --map {name}={actual}); columns found: "
                f"{listed}{did_you_mean(actual, found)}",
                path=path,
                line=line,
                field=actual,
            )
        if actual is not None:
            columns[name] = actual
    for name in form.required:
        if name not in columns:
            hint = f"; name one with --map {name}=COLUMN" if form.build is _generic else ""
            raise ProbeError(
                f"missing column '{name}' ({form.title}); columns found: {listed}{hint}",
                path=path,
                line=line,
                field=name,
            )
    return columns


def _csv_records(text: str, path: Path) -> Iterator[tuple[int, list[str], dict[str, str]]]:
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    if csv.field_size_limit() < CELL_LIMIT:  # Python's default is 131,072 characters
        csv.field_size_limit(CELL_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    header: list[str] | None = None
    header_line = rows = end = 0
    try:
        for cells in reader:
            start, end = end + 1, reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if header is None:
                header, header_line = _header(cells, path, start), start
            elif len(cells) > len(header):
                raise ProbeError(
                    f"has {len(cells)} cells but the header has {len(header)} columns; "
                    "quote cells that hold the delimiter",
                    path=path,
                    line=start,
                )
            else:
                rows += 1
                yield start, header, dict(zip(header, cells, strict=False))
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):
            field = _column(header, _long_cell(text, end, delimiter))
            raise ProbeError(
                f"not valid CSV: a cell holds more than {CELL_LIMIT:,} characters, the most "
                "faultline reads in one cell; expected a shorter cell (or a quote left open, "
                "which runs the cell on over the lines after it)",
                path=path,
                line=end + 1,
                field=field,
            ) from None
        if "unexpected end of data" not in str(exc):
            raise ProbeError(f"not valid CSV: {exc}", path=path, line=reader.line_num) from None
        field = _column(header, _unclosed_cell(text, end, delimiter))
        raise ProbeError(
            "not valid CSV: a quote opened in this record is never closed, so the record runs "
            'to the end of the file; close it, or double a quote meant as text ("")',
            path=path,
            line=end + 1,
            field=field,
        ) from None
    if not rows:
        if header is None:
            reason = (
                "holds no data rows: the file is empty; expected a header, then one row per probe"
            )
        else:
            reason = (
                f"holds no data rows: only the header ({', '.join(header)}); expected one row "
                "per probe below it"
            )
        raise ProbeError(reason, path=path, line=header_line or None)


def _column(header: list[str] | None, cell: int | None) -> str | None:
    """The header's name of the cell at index ``cell``, if there is one."""
    return header[cell] if header and cell is not None and cell < len(header) else None


def _after_lines(text: str, lines_before: int) -> io.StringIO:
    """The CSV text from the record after its first ``lines_before`` lines."""
    rest = io.StringIO(text, newline="")
    for _ in range(lines_before):
        rest.readline()
    return rest


def _long_cell(text: str, lines_before: int, delimiter: str) -> int | None:
    """The index of the first cell over :data:`CELL_LIMIT`, in the record after ``lines_before``."""
    rest = _after_lines(text, lines_before)
    limit = csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # read it whole, this once
    try:
        cells = next(csv.reader(rest, delimiter=delimiter), [])
    except csv.Error:
        return None
    finally:
        csv.field_size_limit(limit)
    return next((i for i, cell in enumerate(cells) if len(cell) > CELL_LIMIT), None)


def _unclosed_cell(text: str, lines_before: int, delimiter: str) -> int | None:
    """The index of the cell whose quote is never closed, in the record after ``lines_before``."""
    cell, quoted, at_start, record = 0, False, True, _after_lines(text, lines_before).read()
    i = 0
    while i < len(record):
        char = record[i]
        if quoted and char == '"':
            if record[i + 1 : i + 2] != '"':
                quoted = False
            i += 1  # a doubled quote is one quote of text
        elif not quoted and char == '"' and at_start:
            quoted = True
        elif not quoted and char == delimiter:
            cell += 1
        at_start = not quoted and char == delimiter
        i += 1
    return cell if quoted else None


def _header(cells: list[str], path: Path, line: int) -> list[str]:
    header = [c.strip() for c in cells]
    lower = [c.lower() for c in header]
    for name in header:
        if name and lower.count(name.lower()) > 1:  # unnamed columns (trailing commas) may repeat
            raise ProbeError(f"column '{name}' appears twice in the header", path=path, line=line)
    return header


class _NotText(str):
    """A JSONL value that is neither text nor a number, as described in an error message.

    Only an error in a key the format reads: other keys (``"is_harmful": true``, ``"tags":
    [...]``, ``"meta": {...}``) are ignored whatever they hold, as extra CSV columns are.
    """

    __slots__ = ()


def _jsonl_records(text: str, path: Path) -> Iterator[tuple[int, list[str], dict[str, str]]]:
    # A number is a cell as written: an id 1.10 must not become "1.1".
    for number, obj in jsonl_objects(text, path, ProbeError, floats_as_written=True):
        cells: dict[str, str] = {}
        for key, value in obj.items():
            if isinstance(value, bool) or not isinstance(value, str | int | float | None):
                cells[key] = _NotText(describe_value(value))
            else:
                cells[key] = "" if value is None else str(value)
        yield number, list(obj), cells
