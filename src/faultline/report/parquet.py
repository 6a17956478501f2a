"""``cases.parquet``: the cases of a large run, one row per case, the case fields as columns.

Above ``--cases-inline-max`` cases, report.json keeps the aggregates, the worst cases and the
observability summary, and the cases go here (docs/report-format.md). The columns are the
contract's case fields, in the case object's order, with two representation choices:

- ``error`` is the JSON text of the case's error (an object or a string), null when none;
- a list field with no element is an empty list, a missing optional field is null.

:func:`case_of_row` turns a row back into the case object report.json would hold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import accumulate
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import msgspec
import pyarrow as pa

from faultline.errors import InputError
from faultline.report.model import CASES_FILE, rule_table
from faultline.report.sampling import StratifiedSampler
from faultline.report.shape import CaseShape
from faultline.responses.model import Usage
from faultline.scoring.case import CaseScore, Evidence

__all__ = [
    "CASES_FILE",
    "CASE_SCHEMA",
    "GEOMETRY_FIELDS",
    "case_of_row",
    "cases_table",
    "check_row_count",
    "iter_case_rows",
    "offer_batch",
    "read_cases",
    "read_sample",
    "rule_counts",
]


_EVIDENCE = pa.struct(
    [
        ("rule", pa.string()),
        ("kind", pa.string()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("text", pa.string()),
    ]
)
_USAGE = pa.struct([("input_tokens", pa.int64()), ("output_tokens", pa.int64())])
_LABELS = pa.list_(pa.string())

GEOMETRY_FIELDS = (
    pa.field("cluster", pa.int64()),
    pa.field("scatter_x", pa.float64()),
    pa.field("scatter_y", pa.float64()),
)
"""The columns the failure geometry adds (null for error cases, or when there is none)."""

CASE_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("probe_id", pa.string()),
        ("sample", pa.int64()),
        ("model", pa.string()),
        ("category", pa.string()),
        ("severity", pa.string()),
        ("severity_weight", pa.float64()),
        ("expect", pa.string()),
        ("status", pa.string()),
        ("passed", pa.bool_()),
        ("risk_score", pa.float64()),
        ("weighted_risk", pa.float64()),
        ("safe_signal_hits", pa.int64()),
        ("unsafe_signal_hits", pa.int64()),
        ("boundary_or_refusal_signal", pa.bool_()),
        ("matched_safe_patterns", _LABELS),
        ("matched_unsafe_patterns", _LABELS),
        ("matched_boundary_patterns", _LABELS),
        ("detected_failure_modes", _LABELS),
        ("task", pa.string()),
        ("probe_input", pa.string()),
        ("response", pa.string()),
        ("reasoning", pa.string()),
        ("explanation", pa.string()),
        ("evidence", pa.list_(_EVIDENCE)),
        ("error", pa.string()),
        ("usage", _USAGE),
        *GEOMETRY_FIELDS,
    ]
)
"""The columns of cases.parquet."""

_SCORED_SCHEMA = pa.schema(
    [f for f in CASE_SCHEMA if f.name not in {g.name for g in GEOMETRY_FIELDS}]
)
_OPTIONAL = ("model", "reasoning", "error", "usage", "cluster", "scatter_x", "scatter_y")
_ADDED = frozenset({"reasoning"})
"""Columns added since cases.parquet was first written: a file from before one is read
without it, as cases that had none (``reasoning``: faultline 0.x before reasoning models were
read)."""
_JSON = msgspec.json.Encoder()


def cases_table(cases: Sequence[CaseScore]) -> pa.Table:
    """Scored cases as cases.parquet columns, without the geometry's.

    Each column is its field's values, converted by Arrow, except the evidence, ``error``
    and ``usage`` (see :data:`_COLUMN_OF`).
    """
    return pa.Table.from_arrays(
        [_column(f, list(map(attrgetter(f.name), cases))) for f in _SCORED_SCHEMA],
        schema=_SCORED_SCHEMA,
    )


def _column(field: pa.Field, values: list[Any]) -> pa.Array:
    """One column of the cases' values of one field."""
    build = _COLUMN_OF.get(field.name)
    return pa.array(values, type=field.type) if build is None else build(values)


def _evidence_column(values: Sequence[list[Evidence]]) -> pa.Array:
    """Each case's evidence as a list of structs: offsets into one array of every span."""
    offsets = pa.array(accumulate(map(len, values), initial=0), pa.int32())
    flat = [e for spans in values for e in spans]
    spans = pa.StructArray.from_arrays(
        [pa.array(list(map(attrgetter(f.name), flat)), type=f.type) for f in _EVIDENCE],
        fields=list(_EVIDENCE),
    )
    return pa.ListArray.from_arrays(offsets, spans, type=pa.list_(_EVIDENCE))


def _error_column(values: Sequence[Any]) -> pa.Array:
    """Each case's error as its JSON text (null when none)."""
    return pa.array([None if e is None else _JSON.encode(e).decode() for e in values], pa.string())


def _usage_column(values: Sequence[Usage | None]) -> pa.Array:
    """Each case's token usage as a struct (null when not recorded)."""
    return pa.array([None if u is None else msgspec.structs.asdict(u) for u in values], _USAGE)


_COLUMN_OF: dict[str, Callable[[Sequence[Any]], pa.Array]] = {
    "evidence": _evidence_column,
    "error": _error_column,
    "usage": _usage_column,
}
"""The columns that are not their fields' values as they are, and how each is built."""


def case_of_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The case object of one row, as report.json holds it (optional fields left out when null)."""
    case = {k: v for k, v in row.items() if not (k in _OPTIONAL and v is None)}
    if case.get("error") is not None:
        case["error"] = msgspec.json.decode(case["error"])
    if case.get("usage") is not None:
        case["usage"] = {k: v for k, v in case["usage"].items() if v is not None}
    return case


def _nullable(kind: Any) -> bool:
    return type(None) in get_args(kind)


_SHAPE_FIELDS = {f.name: f.type for f in msgspec.structs.fields(CaseShape)}
_REQUIRED = frozenset(n for n, kind in _SHAPE_FIELDS.items() if not _nullable(kind))
"""The columns a row must fill: a case object's fields that may not be ``null``
(:class:`faultline.report.shape.CaseShape`, the shape inline cases are checked against)."""
_CHOICES = {n: get_args(kind) for n, kind in _SHAPE_FIELDS.items() if get_origin(kind) is Literal}
"""The columns whose value is one of a few words (``status``)."""


def _open(path: Path) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"cannot read the cases table: {exc}", path=path) from None


def check_row_count(path: Path, rows: Any) -> None:
    """A cases.parquet holds the number of rows report.json's ``cases_file.rows`` says.

    Read from the file's footer, so no row is read.

    Raises:
        InputError: It does not, or the file is not a Parquet file.
    """
    found = _open(path).metadata.num_rows
    if found != rows:
        raise InputError(
            f"has {found:,} rows, but report.json's cases_file.rows says {rows!r}: "
            "it is not the cases table of that report, or one of them was changed",
            path=path,
            field="cases_file.rows",
        )


def iter_case_rows(path: Path, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The record batches of a cases.parquet, a row group at a time, each checked.

    The columns read (all of :data:`CASE_SCHEMA` when ``columns`` is ``None``) must be there
    with their types, and each row must be a case object as report.json would hold it (a
    required field filled, ``status`` one of its words, no ``null`` in a list, an ``error``
    that is JSON): the rows are checked batch by batch as they are read, so a file of any
    size is checked in the memory of one batch.

    Raises:
        InputError: The file is missing or is not a cases table, or a row is not a case,
            naming the file, the row (``cases[N]``, counting from 0) and the field.
    """
    handle = _open(path)
    schema = handle.schema_arrow
    wanted = CASE_SCHEMA.names if columns is None else columns
    if any(name in _ADDED and name not in schema.names for name in wanted):
        wanted = [n for n in wanted if n in schema.names or n not in _ADDED]
        columns = None if columns is None else wanted
    missing = sorted(set(wanted) - set(schema.names))
    if missing:
        raise InputError(
            f"has no column {', '.join(missing)}; is it a faultline cases.parquet?", path=path
        )
    for name in wanted:
        found = schema.get_all_field_indices(name)
        if len(found) > 1:
            raise InputError("the column appears twice", path=path, field=name)
        got, expected = schema.field(found[0]).type, CASE_SCHEMA.field(name).type
        if got != expected and not pa.types.is_null(got):
            raise InputError(
                f"the column holds {got}, expected {expected} (faultline.report.parquet."
                "CASE_SCHEMA)",
                path=path,
                field=name,
            )
    first = 0
    for batch in handle.iter_batches(columns=columns, batch_size=65_536):
        _check_batch(batch, first, path)
        yield batch
        first += batch.num_rows


def _check_batch(batch: pa.RecordBatch, first: int, path: Path) -> None:
    """Each row of a batch (its first row's place in the file given) is a case object's."""
    import pyarrow.compute as pc

    def refuse(row: int, field: str, reason: str) -> None:
        raise InputError(
            f"row {first + row} of the cases table: {reason}",
            path=path,
            field=f"cases[{first + row}].{field}",
        )

    def first_true(mask: Any) -> int:
        return int(pc.index(mask.fill_null(False), True).as_py())

    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if name in _REQUIRED and column.null_count:
            refuse(first_true(column.is_null()), name, f"got null, expected {_wants(name)}")
        if name in _CHOICES:
            bad = first_true(pc.invert(pc.is_in(column, value_set=pa.array(_CHOICES[name]))))
            if bad >= 0:
                words = ", ".join(map(repr, _CHOICES[name]))
                refuse(bad, name, f"got {column[bad].as_py()!r}, expected one of {words}")
        if pa.types.is_list(column.type):
            _check_items(column, name, refuse, first_true)
        if name == "error" and column.null_count < len(column):
            for row, text in enumerate(column.to_pylist()):
                if text is not None and not _is_error_json(text):
                    refuse(row, name, f"got {text[:80]!r}, expected the JSON of a string or object")


def _check_items(column: Any, name: str, refuse: Any, first_true: Any) -> None:
    """No ``null`` inside a list column: a label, or an evidence span and each of its fields."""
    import pyarrow.compute as pc

    items = pc.list_flatten(column)
    if not len(items):
        return
    parents = pc.list_parent_indices(column)
    checks = [(items.is_null(), "", _wants(name))]
    if pa.types.is_struct(items.type):
        checks += [
            (pc.struct_field(items, [i]).is_null(), f".{f.name}", _kind(f.type))
            for i, f in enumerate(items.type)
        ]
    for mask, part, wants in checks:
        at = first_true(mask)
        if at >= 0:
            row = parents[at].as_py()
            index = at - first_true(pc.equal(parents, row))
            refuse(row, f"{name}[{index}]{part}", f"got null, expected {wants}")


def _is_error_json(text: str) -> bool:
    try:
        return isinstance(msgspec.json.decode(text), dict | str)
    except msgspec.DecodeError:
        return False


def _wants(name: str) -> str:
    """What a column's value is, in words."""
    kind = CASE_SCHEMA.field(name).type
    if pa.types.is_list(kind):
        return "a list of evidence spans" if name == "evidence" else "a list of strings"
    return _kind(kind)


def _kind(kind: Any) -> str:
    return "a whole number" if pa.types.is_integer(kind) else f"a {kind}"


def read_sample(path: Path, size: int, seed: int) -> list[dict[str, Any]]:
    """The HTML sample of a cases.parquet: the cases ``faultline score`` chose, chosen again.

    Two passes: the strata's sizes first (two small columns), then the sample.
    """
    sizes: Counter[tuple[str, str]] = Counter()
    for batch in iter_case_rows(path, ["category", "status"]):
        sizes.update(zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True))
    sampler = StratifiedSampler(sizes, size, seed)
    row = 0
    for batch in iter_case_rows(path):
        offer_batch(sampler, batch, row)
        row += batch.num_rows
    return [item for _, item in sampler.chosen()]


def offer_batch(sampler: StratifiedSampler, batch: pa.RecordBatch, first_row: int) -> None:
    """Offer a batch of cases (its first row's place in the file given) to a sampler."""
    import numpy as np

    rows = np.arange(first_row, first_row + batch.num_rows, dtype=np.int64)
    codes = _stratum_codes(sampler, batch)
    wanted = np.flatnonzero(sampler.wants(rows, codes))
    if wanted.size:
        chosen = batch.take(pa.array(wanted)).to_pylist()
        sampler.offer(rows[wanted], codes[wanted], [case_of_row(r) for r in chosen])


def _stratum_codes(sampler: StratifiedSampler, batch: pa.RecordBatch) -> Any:
    """Each row's stratum code (-1 for a stratum the sampler does not have), without a row loop."""
    import numpy as np
    import pyarrow.compute as pc

    categories = sorted({c for c, _ in sampler.strata})
    statuses = sorted({s for _, s in sampler.strata})
    # One extra row and column of -1: index -1 (a value not in the run) lands there.
    table = np.full((len(categories) + 1, len(statuses) + 1), -1, dtype=np.int64)
    for (category, status), code in sampler.code.items():
        table[categories.index(category), statuses.index(status)] = code

    def index(column: str, values: list[str]) -> Any:
        found = pc.index_in(batch.column(column), value_set=pa.array(values, pa.string()))
        return found.fill_null(-1).to_numpy(zero_copy_only=False)

    return table[index("category", categories), index("status", statuses)]


def rule_counts(path: Path) -> list[list[Any]]:
    """How many cases each rule matched in, as ``[kind, label, count]``, from a cases.parquet."""
    import pyarrow.compute as pc

    counts: Counter[tuple[str, str]] = Counter()
    columns = {
        "boundary": "matched_boundary_patterns",
        "unsafe": "matched_unsafe_patterns",
        "safe": "matched_safe_patterns",
    }
    for batch in iter_case_rows(path, list(columns.values())):
        for kind, name in columns.items():
            flat = pc.list_flatten(batch.column(name))
            if len(flat):
                for item in pc.value_counts(flat).to_pylist():
                    counts[kind, item["values"]] += item["counts"]
    return rule_table(counts)


def read_cases(path: Path, fields: tuple[str, ...] | None = None) -> Iterator[dict[str, Any]]:
    """The cases of a cases.parquet as case objects, a row group at a time.

    Args:
        path: The file.
        fields: Read only these columns (all when ``None``): a view that needs four fields
            of ten million cases reads four columns.
    """
    columns = None if fields is None else [f for f in CASE_SCHEMA.names if f in fields]
    for batch in iter_case_rows(path, columns):
        for row in batch.to_pylist():
            yield case_of_row(row)
