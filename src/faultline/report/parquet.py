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
from typing import Any

import msgspec
import pyarrow as pa

from faultline.errors import InputError
from faultline.report.model import CASES_FILE, rule_table
from faultline.report.sampling import StratifiedSampler
from faultline.responses.model import Usage
from faultline.scoring.case import CaseScore, Evidence

__all__ = [
    "CASES_FILE",
    "CASE_SCHEMA",
    "GEOMETRY_FIELDS",
    "case_of_row",
    "cases_table",
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
_OPTIONAL = ("model", "error", "usage", "cluster", "scatter_x", "scatter_y")
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


def iter_case_rows(path: Path, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The record batches of a cases.parquet, a row group at a time.

    Raises:
        InputError: The file is missing or is not a cases table.
    """
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"cannot read the cases table: {exc}", path=path) from None
    missing = sorted(set(columns or []) - set(handle.schema_arrow.names))
    if missing:
        raise InputError(
            f"has no column {', '.join(missing)}; is it a faultline cases.parquet?", path=path
        )
    yield from handle.iter_batches(columns=columns, batch_size=65_536)


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
