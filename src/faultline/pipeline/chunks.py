"""The worker side of scoring a file: one chunk of whole JSONL lines in, a compact result out.

A chunk is decoded, validated against the probe set, scored, and reduced to what the run
needs of it: the report.json line of each case (encoded here, in the worker), the columns
that order the cases and feed the failure geometry, the chunk's metrics (which merge
exactly), and its verdict table. The parent process never holds a million ``CaseScore``
objects, only their bytes and a few numbers each.

The functions run in worker processes or in the parent; :func:`init` sets the state they
share (the probes, the scorer) once per process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from faultline.metrics.aggregate import MetricsAccumulator
from faultline.observability.documents import VerdictTable
from faultline.probes.model import Probe
from faultline.responses.check import check_known
from faultline.responses.loader import decode_chunk
from faultline.scoring.case import ScoringConfig
from faultline.scoring.rules import RulePack
from faultline.scoring.scorer import Scorer

__all__ = ["ChunkResult", "init", "scan_models", "score_chunk"]

_ENCODER = msgspec.json.Encoder()
_state: dict[str, Any] = {}


class _ModelOnly(msgspec.Struct):
    model: str | None = None


_MODELS = msgspec.json.Decoder(_ModelOnly)


@dataclass
class ChunkResult:
    """What the parent needs of one scored chunk.

    Attributes:
        nbytes: The chunk's size, for progress.
        lines: Each case's line in the responses file.
        case_ids: Each case's id.
        probe: Each case's probe, as its index in the probe set.
        sample: Each case's sample number.
        models: Each case's model (``None`` when not recorded).
        scored: Whether each case was scored (not an error).
        passed: Whether each case passed (false for errors).
        risk: Each case's risk score (0 for errors).
        verdict: Each case's verdict, as an index in ``verdicts`` (-1 for errors).
        verdicts: The chunk's verdict table.
        json: Each case's report.json line without its closing brace (the geometry's fields
            go there).
        metrics: The chunk's metrics, to merge.
    """

    nbytes: int
    lines: list[int]
    case_ids: list[str]
    probe: NDArray[np.int64]
    sample: NDArray[np.int64]
    models: list[str | None]
    scored: NDArray[np.bool_]
    passed: NDArray[np.bool_]
    risk: NDArray[np.float64]
    verdict: NDArray[np.int64]
    verdicts: VerdictTable
    json: list[bytes]
    metrics: MetricsAccumulator = field(repr=False)


def init(probes: dict[str, Probe], set_name: str, pack: RulePack, config: ScoringConfig) -> None:
    """Set the state the chunk functions use in this process."""
    _state.update(
        probes=probes,
        index={pid: i for i, pid in enumerate(probes)},
        set_name=set_name,
        scorer=Scorer(pack, config),
        weights=config.severity_weights,
    )


def scan_models(chunk: bytes) -> set[str | None] | None:
    """The models named in a chunk, or ``None`` when the chunk does not decode.

    A chunk that does not decode is left to the scoring pass, which names the bad line.
    """
    try:
        return {r.model for r in _MODELS.decode_lines(chunk)}
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None


def score_chunk(path: Path, chunk: bytes, first_line: int, qualify: bool) -> ChunkResult:
    """Decode, validate and score one chunk of whole lines.

    Args:
        path: The responses file, for messages.
        chunk: Whole lines of it.
        first_line: The line number of the chunk's first line.
        qualify: Whether case ids carry the model (the run mixes several models).

    Raises:
        ResponseError: A line is malformed or names a probe that is not in the set.
    """
    batch = decode_chunk(path, chunk, first_line)
    probes, index = _state["probes"], _state["index"]
    check_known(batch.responses, probes, set_name=_state["set_name"], lines=batch.lines, path=path)
    cases = _state["scorer"].score_batch(probes, batch.responses, qualify_model=qualify)
    table = VerdictTable()
    scored = [c.status != "error" for c in cases]
    return ChunkResult(
        nbytes=len(chunk),
        lines=batch.lines,
        case_ids=[c.case_id for c in cases],
        probe=np.asarray([index[c.probe_id] for c in cases], dtype=np.int64),
        sample=np.asarray([c.sample for c in cases], dtype=np.int64),
        models=[c.model for c in cases],
        scored=np.asarray(scored, dtype=bool),
        passed=np.asarray([bool(c.passed) for c in cases], dtype=bool),
        risk=np.asarray([c.risk_score or 0.0 for c in cases], dtype=np.float64),
        verdict=np.asarray(
            [table.add(c) if ok else -1 for c, ok in zip(cases, scored, strict=True)],
            dtype=np.int64,
        ),
        verdicts=table,
        json=[_ENCODER.encode(c)[:-1] for c in cases],
        metrics=MetricsAccumulator(_state["weights"]).add(cases),
    )
