"""The spill of a large run's cases, and cases.parquet written from it.

A run above ``cases_inline_max`` appends each batch's Arrow table to a spill file (Arrow IPC,
LZ4) as it arrives, so the parent never holds the cases. Once the geometry is known,
:func:`write_cases` reads the spill back a batch at a time, gives each case its cluster and
point, and writes cases.parquet in input order; the worst cases and the HTML sample are picked
up on the way. The rows are written in row groups of :data:`ROW_GROUP` (the last one shorter),
whatever the batches were, so the file's bytes depend on its rows alone: not on the input's
format, its files or how it was cut. Encoding and compressing a row group (Arrow's work,
without the GIL) runs in a thread of its own while the next one is read and prepared.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faultline.observability.geometry import PairGeometry
from faultline.observability.pairs import PairStats
from faultline.report.model import CasesFile
from faultline.report.parquet import CASES_FILE
from faultline.report.sampling import StratifiedSampler

__all__ = ["ROW_GROUP", "Spill", "write_cases"]

ROW_GROUP = 16_384
"""The most rows in one of cases.parquet's row groups."""


class Spill:
    """A spill file of batch tables, one record batch per piece, in input order.

    Args:
        path: Where the file goes (created by the first batch).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: Any = None

    def append(self, table: Any, mapping: NDArray[np.int64]) -> None:
        """Append a piece's table, its verdicts renumbered through ``mapping``."""
        import pyarrow as pa

        verdict = table.column("_verdict").to_numpy()
        remapped = np.where(
            verdict >= 0, mapping[np.maximum(verdict, 0)] if mapping.size else -1, -1
        )
        table = table.set_column(
            table.schema.get_field_index("_verdict"), "_verdict", pa.array(remapped, pa.int64())
        )
        if self._writer is None:
            self._writer = pa.ipc.new_file(
                str(self.path), table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")
            )
        self._writer.write_batch(table.combine_chunks().to_batches(max_chunksize=1 << 40)[0])

    def close(self) -> None:
        """Finish the file (appending is over)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def batches(self) -> Iterator[Any]:
        """The pieces' record batches, in input order."""
        import pyarrow as pa

        self.close()
        if not self.path.exists():
            return
        # Plain reads, not a memory map: mapped pages would count in the process's memory.
        with pa.OSFile(str(self.path), "rb") as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)

    def line(self, piece: int, offset: int) -> int:
        """The input line of a piece's case, given its place in the piece."""
        import pyarrow as pa

        self.close()
        with pa.OSFile(str(self.path), "rb") as source:
            reader = pa.ipc.open_file(source)
            return int(reader.get_batch(piece).column("_line")[offset].as_py())


def write_cases(
    spill: Spill,
    path: Path,
    pairs: PairStats,
    geometry: PairGeometry | None,
    *,
    worst: list[str],
    sampler: StratifiedSampler,
) -> CasesFile:
    """Write cases.parquet from the spill, in input order, with the geometry's columns.

    Args:
        spill: The run's spilled cases.
        path: Where to write it.
        pairs: The run's pairs.
        geometry: Their geometry, if any.
        worst: The ids of the worst cases, whose full objects report.json holds.
        sampler: Chooses the HTML sample as the cases go by.

    Returns:
        What report.json says of the file, with the worst cases and the HTML sample.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from faultline.report.parquet import CASE_SCHEMA, case_of_row, offer_batch

    found: dict[str, dict[str, Any]] = {}
    wanted = pa.array(sorted(worst), pa.string())
    row = 0
    group_rows = ROW_GROUP
    with (
        pq.ParquetWriter(str(path), CASE_SCHEMA, compression="zstd", write_statistics=False) as out,
        ThreadPoolExecutor(1, thread_name_prefix="faultline-parquet") as encoder,
    ):
        pending: deque[Future[None]] = deque()
        held = _Rows()

        def encode(group: Any) -> None:
            # One contiguous table a row group long: Parquet's pages then fall where the rows
            # put them, not where the batches ended.
            pending.append(encoder.submit(out.write_table, group, row_group_size=group_rows))
            while len(pending) > 1:  # one row group in the encoder at most: memory stays flat
                pending.popleft().result()

        for batch in spill.batches():
            cluster, xs, ys = _geometry_columns(batch, pairs, geometry)
            cases = pa.RecordBatch.from_arrays(
                [batch.column(name) for name in CASE_SCHEMA.names[:-3]] + [cluster, xs, ys],
                schema=CASE_SCHEMA,
            )
            offer_batch(sampler, cases, row)
            for r in cases.filter(pc.is_in(cases.column("case_id"), value_set=wanted)).to_pylist():
                found[r["case_id"]] = case_of_row(r)
            row += batch.num_rows
            held.add(cases)
            while held.rows >= group_rows:
                encode(held.take(group_rows))
        if held.rows:
            encode(held.take(held.rows))
        while pending:
            pending.popleft().result()
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return CasesFile(
        name=CASES_FILE,
        rows=row,
        sha256=digest.hexdigest(),
        worst=[found[w] for w in worst if w in found],
        sample=[item for _, item in sampler.chosen()],
        directory=path.parent,
    )


class _Rows:
    """Record batches held until a row group's worth has come, taken off in input order."""

    def __init__(self) -> None:
        self._batches: deque[Any] = deque()
        self.rows = 0

    def add(self, batch: Any) -> None:
        self._batches.append(batch)
        self.rows += batch.num_rows

    def take(self, n: int) -> Any:
        """The first ``n`` rows held, as one table of contiguous columns."""
        import pyarrow as pa

        parts = []
        wanted = n
        while wanted:
            first = self._batches[0]
            if first.num_rows <= wanted:
                parts.append(self._batches.popleft())
                wanted -= first.num_rows
            else:
                parts.append(first.slice(0, wanted))
                self._batches[0] = first.slice(wanted)
                wanted = 0
        self.rows -= n
        return pa.Table.from_batches(parts, schema=parts[0].schema).combine_chunks()


def _geometry_columns(batch: Any, pairs: PairStats, geometry: PairGeometry | None) -> list[Any]:
    import pyarrow as pa

    n = batch.num_rows
    if geometry is None:
        return [pa.nulls(n, pa.int64()), pa.nulls(n, pa.float64()), pa.nulls(n, pa.float64())]
    verdict = batch.column("_verdict").to_numpy()
    scored = verdict >= 0
    at = pairs.locate(batch.column("_probe").to_numpy()[scored], verdict[scored])
    mask = ~scored
    cluster = np.zeros(n, dtype=np.int64)
    xs = np.zeros(n, dtype=np.float64)
    ys = np.zeros(n, dtype=np.float64)
    cluster[scored], xs[scored], ys[scored] = geometry.cluster[at], geometry.x[at], geometry.y[at]
    return [
        pa.array(cluster, pa.int64(), mask=mask),
        pa.array(xs, pa.float64(), mask=mask),
        pa.array(ys, pa.float64(), mask=mask),
    ]
