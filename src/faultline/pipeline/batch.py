"""The batch function: one piece of the responses in, a compact, mergeable result out.

A piece (a chunk of JSONL lines or a batch of Parquet rows, :mod:`faultline.responses.sources`)
is decoded, validated against the probe set, scored, and reduced to what the run needs of it:

- its metrics, verdict table and (probe, verdict) pairs, which merge exactly;
- counts per probe, for the per-probe and per-transform numbers;
- its cases: as report.json lines when the run is small enough to keep them inline, or as an
  Arrow table (the cases.parquet columns, plus where each came from) when it is not.

The same function runs in this process, in worker processes and on Dask workers; every one of
them gets the same :class:`BatchContext` once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from faultline.errors import ResponseError
from faultline.metrics.aggregate import MetricsAccumulator
from faultline.observability.documents import VerdictTable
from faultline.observability.pairs import PairStats
from faultline.probes.model import Probe
from faultline.report.model import count_rules
from faultline.responses.check import check_known
from faultline.responses.loader import ResponseBatch
from faultline.responses.sources import Piece, decode_piece, scan_piece
from faultline.scoring.case import CaseScore, ScoringConfig
from faultline.scoring.rules import RulePack
from faultline.scoring.scorer import Scorer

__all__ = ["CHANGED", "BatchContext", "BatchResult", "Layout", "init", "scan", "score_piece"]

_ENCODER = msgspec.json.Encoder()
_state: dict[str, _State] = {}
"""This process's scoring state, under one key: replaced whole, read once a piece, so that
two runs sharing a threaded Dask worker never score a piece with each other's parts."""


@dataclass(frozen=True)
class BatchContext:
    """What every batch needs, sent once to each process.

    Attributes:
        probes: The probes by id, in probe-set order.
        set_name: The probe set's name, for messages.
        pack: The rule pack.
        config: The scoring configuration.
    """

    probes: dict[str, Probe]
    set_name: str
    pack: RulePack
    config: ScoringConfig


@dataclass(frozen=True)
class Layout:
    """How the run lays its cases out, known once the input has been scanned.

    Attributes:
        model_rank: Each model's place in the report's order (``""`` for no model).
        qualify: Whether case ids carry the model (the run mixes several models).
        inline: Whether cases are kept as report.json lines (else as Arrow tables).
    """

    model_rank: dict[str, int]
    qualify: bool
    inline: bool


@dataclass
class BatchResult:
    """What the parent needs of one scored piece.

    Attributes:
        index: The piece's place in the input.
        path: The file it comes from.
        nbytes: The input bytes it covers, for progress.
        n: How many cases.
        metrics: Its metrics, to merge.
        verdicts: Its verdict table.
        pairs: Its scored cases as (probe, verdict) pairs (verdicts index ``verdicts``).
        probe_counts: Cases, scored, passed and failed per probe index (4 rows).
        strata: Cases per (category, status).
        rules: Cases each (kind, rule) matched in.
        models: The models that answered.
        keys: Each case's (model rank, probe, sample), one row per case, for the duplicate
            check.
        lines: Each case's line (or row) in its file.
        json: Inline runs: each case's report.json line without its closing brace.
        case_ids: Inline runs: each case's id.
        verdict: Inline runs: each case's verdict (-1 for errors).
        table: Large runs: the cases as an Arrow table (cases.parquet columns, no geometry).
    """

    index: int
    path: Path
    nbytes: int
    n: int
    metrics: MetricsAccumulator = field(repr=False)
    verdicts: VerdictTable
    pairs: PairStats
    probe_counts: NDArray[np.int64]
    strata: Counter[tuple[str, str]]
    rules: Counter[tuple[str, str]]
    models: set[str]
    keys: NDArray[np.int64]
    lines: NDArray[np.int64]
    json: list[bytes] = field(default_factory=list)
    case_ids: list[str] = field(default_factory=list)
    verdict: NDArray[np.int64] | None = None
    table: Any = None


@dataclass(frozen=True)
class _State:
    context: BatchContext
    index: dict[str, int]
    scorer: Scorer


def init(context: BatchContext) -> None:
    """Set the state the batch function uses in this process."""
    _init(context)


def _init(context: BatchContext) -> _State:
    """This process's state for ``context``, built and kept."""
    state = _State(
        context,
        {pid: i for i, pid in enumerate(context.probes)},
        Scorer(context.pack, context.config),
    )
    _state["now"] = state
    return state


def scan(piece: Piece) -> tuple[set[str | None], int] | None:
    """The models named in a piece and how many records it holds (``None``: it does not decode)."""
    return scan_piece(piece)


def score_piece(
    index: int, piece: Piece, layout: Layout, context: BatchContext | None = None
) -> BatchResult:
    """Decode, validate and score one piece.

    Args:
        index: The piece's place in the input.
        piece: The piece.
        layout: How the run lays its cases out.
        context: The run's context; ``None`` uses the one :func:`init` set in this process.

    Raises:
        ResponseError: A record is malformed or names a probe that is not in the set.
    """
    if context is None:
        state = _state["now"]
    else:
        found = _state.get("now")
        state = found if found is not None and found.context is context else _init(context)
    ctx = state.context
    inline = layout.inline
    batch = decode_piece(piece)
    probes, probe_index = ctx.probes, state.index
    check_known(batch.responses, probes, set_name=ctx.set_name, lines=batch.lines, path=piece.path)
    ranks = [layout.model_rank.get(r.model or "") for r in batch.responses]
    if None in ranks:
        raise _changed(batch, ranks)
    cases: list[CaseScore] = state.scorer.score_batch(
        probes, batch.responses, qualify_model=layout.qualify
    )
    n = len(cases)
    probe = np.fromiter(
        map(probe_index.__getitem__, map(attrgetter("probe_id"), cases)), dtype=np.int64, count=n
    )
    status = list(map(attrgetter("status"), cases))
    scored = np.fromiter(map("error".__ne__, status), dtype=bool, count=n)
    passed = np.fromiter(map("pass".__eq__, status), dtype=bool, count=n)
    keys = np.empty((n, 3), dtype=np.int64)
    keys[:, 0] = np.fromiter(ranks, dtype=np.int64, count=n)  # cases are in response order
    keys[:, 1] = probe
    keys[:, 2] = np.fromiter(map(attrgetter("sample"), cases), dtype=np.int64, count=n)
    table = VerdictTable()
    verdict = np.asarray(
        [table.add(c) if ok else -1 for c, ok in zip(cases, scored, strict=True)], dtype=np.int64
    )
    risk = np.fromiter((c.risk_score or 0.0 for c in cases), dtype=np.float64, count=n)
    width = len(probes)
    result = BatchResult(
        index=index,
        path=piece.path,
        nbytes=piece.nbytes,
        n=n,
        metrics=MetricsAccumulator(ctx.config.severity_weights).add(cases),
        verdicts=table,
        pairs=PairStats.of_cases(probe[scored], verdict[scored], keys[scored], risk[scored]),
        probe_counts=np.stack(
            [
                np.bincount(probe, minlength=width),
                np.bincount(probe[scored], minlength=width),
                np.bincount(probe[passed], minlength=width),
                np.bincount(probe[scored & ~passed], minlength=width),
            ]
        ),
        strata=Counter(zip(map(attrgetter("category"), cases), status, strict=True)),
        rules=Counter() if inline else count_rules(cases),
        models={c.model for c in cases if c.model is not None},
        keys=keys,
        lines=np.asarray(batch.lines, dtype=np.int64),
    )
    if inline:
        result.json = [_ENCODER.encode(c)[:-1] for c in cases]
        result.case_ids = [c.case_id for c in cases]
        result.verdict = verdict
    else:
        result.table = _arrow_cases(cases, probe, verdict, result.lines)
    return result


CHANGED = "changed while faultline read it (once for the model names, once to score it)"
"""Why the second read of a responses file found what the first did not."""


def _changed(batch: ResponseBatch, ranks: list[int | None]) -> ResponseError:
    """The error for the first record whose model the scan did not see (rank ``None``).

    The file changed between the two reads; the error names it and the record's line.
    """
    at = ranks.index(None)
    line, model = batch.lines[at], batch.responses[at].model
    named = "no model" if model is None else f"model {model!r}"
    return ResponseError(
        f"gives {named}, which no responses file held when first read: it {CHANGED}; "
        "score a copy that nothing writes to",
        path=batch.path,
        line=line,
        field="model",
    )


def _arrow_cases(
    cases: list[CaseScore],
    probe: NDArray[np.int64],
    verdict: NDArray[np.int64],
    lines: NDArray[np.int64],
) -> Any:
    """The cases as cases.parquet columns, with their probe, verdict and line for the parent."""
    import pyarrow as pa

    from faultline.report.parquet import cases_table

    table = cases_table(cases)
    return (
        table.append_column("_probe", pa.array(probe, pa.int64()))
        .append_column("_verdict", pa.array(verdict, pa.int64()))
        .append_column("_line", pa.array(lines, pa.int64()))
    )
