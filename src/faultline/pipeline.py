"""Score recorded responses end to end: read, score (in parallel), measure, report.

:func:`score_files` is what ``faultline score`` and ``faultline demo`` run. It streams the
responses file in chunks of whole lines; each chunk is decoded, validated and scored in a
worker process (or in this process for small inputs), and folded into the metrics as it
returns. Nothing is written until every response has been read and scored, so bad input
never leaves a half-written report, and a previous report in the same directory survives.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from faultline.metrics.aggregate import MetricsAccumulator
from faultline.observability.geometry import DEFAULT_MIN_CASES
from faultline.probes.loader import load_probes
from faultline.probes.model import Probe
from faultline.probes.probeset import ProbeSet
from faultline.report.build import build_report
from faultline.report.model import Report
from faultline.responses.check import ResponseChecker, check_known
from faultline.responses.loader import CHUNK_BYTES, decode_chunk, iter_chunks
from faultline.scoring import order_cases
from faultline.scoring.case import CaseScore, ScoringConfig
from faultline.scoring.rules import RulePack, load_rule_pack
from faultline.scoring.scorer import Scorer

__all__ = ["ProgressCallback", "ScoreRun", "score_files"]

ProgressCallback = Callable[[str, int, int], None]
"""Called as ``(stage, done, total)``; stage ``score`` counts bytes of the responses file."""

PARALLEL_MIN_BYTES = 8 << 20
"""Inputs smaller than this are scored in this process: a pool would cost more than it saves."""


@dataclass
class ScoreRun:
    """The outcome of :func:`score_files`.

    Attributes:
        report: The report.
        written: The files written.
        unanswered: Ids of probes that no response answers.
        workers: How many worker processes scored the responses (0: this process).
    """

    report: Report
    written: list[Path] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    workers: int = 0


def score_files(
    probes: str | Path | ProbeSet,
    responses: str | Path,
    out: str | Path | None,
    *,
    rules: str | Path | RulePack = "default",
    config: ScoringConfig | None = None,
    seed: int = 0,
    observability_min_cases: int = DEFAULT_MIN_CASES,
    workers: int | None = 1,
    on_progress: ProgressCallback | None = None,
    run_id: str | None = None,
    created_at: str | None = None,
) -> ScoreRun:
    """Score a responses file against a probe set and write the report.

    Args:
        probes: A probe-set file, directory or built-in name, or a loaded set.
        responses: The responses file (JSONL).
        out: The directory for report.json and report.md (``None``: write nothing).
        rules: A rule pack, or the name or path of one.
        config: Pass threshold and severity weights.
        seed: Seeds the failure geometry.
        observability_min_cases: The fewest scored cases for which the geometry is built.
        workers: Worker processes for scoring: 1 (the default) scores in this process;
            ``None`` uses one per CPU. Inputs under 8 MB are always scored in this process.
            Worker processes start fresh interpreters, so a script that uses them needs the
            usual ``if __name__ == "__main__":`` guard.
        on_progress: Called with progress as chunks are scored.
        run_id: The run id (default: a new one).
        created_at: The creation time (default: now).

    Raises:
        InputError: A probe set, responses file or rule pack is malformed; nothing is written.
    """
    probe_set = probes if isinstance(probes, ProbeSet) else load_probes(probes)
    pack = rules if isinstance(rules, RulePack) else load_rule_pack(rules)
    config = config or ScoringConfig()
    path = Path(responses)
    size = path.stat().st_size if path.is_file() else 0
    n_workers = _worker_count(workers, size)
    digest = hashlib.sha256()
    chunks = iter_chunks(path, CHUNK_BYTES, digest)
    checker = ResponseChecker()
    metrics = MetricsAccumulator(config.severity_weights)
    cases: list[CaseScore] = []
    done = 0
    for lines, batch, nbytes in _score_chunks(
        chunks, path, probe_set=probe_set, pack=pack, config=config, workers=n_workers
    ):
        checker.check_unique(batch, lines, path)
        metrics.add(batch)
        cases.extend(batch)
        done += nbytes
        if on_progress is not None:
            on_progress("score", done, size)
    if len(checker.models) > 1:
        for case in cases:
            if case.model is not None:
                case.case_id = f"{case.case_id}@{case.model}"
        metrics = MetricsAccumulator(config.severity_weights).add(cases)
    cases = order_cases(cases, probe_set)
    models = sorted(m for m in checker.models if m is not None)
    target = {
        "spec": f"replay:{path.name}",
        "provider": "replay",
        "models": models,
        "responses": {"name": path.name, "sha256": digest.hexdigest(), "records": len(cases)},
    }
    if on_progress is not None:
        on_progress("report", 0, 1)
    report = build_report(
        cases,
        out=None,
        probe_set=probe_set,
        rules=pack,
        config=config,
        target=target,
        seed=seed,
        observability_min_cases=observability_min_cases,
        metrics=metrics,
        run_id=run_id,
        created_at=created_at,
    )
    answered = checker.answered
    run = ScoreRun(
        report, unanswered=[p.id for p in probe_set if p.id not in answered], workers=n_workers
    )
    report.run["probe_set"]["unanswered"] = len(run.unanswered)
    if out is not None:
        from faultline.report.build import write_report

        run.written = write_report(report, Path(out))
    if on_progress is not None:
        on_progress("report", 1, 1)
    return run


def _worker_count(requested: int | None, size: int) -> int:
    if requested is not None and requested <= 1:
        return 0
    if size < PARALLEL_MIN_BYTES:
        return 0
    return requested or os.cpu_count() or 1


# --------------------------------------------------------------------------- scoring chunks

_state: dict[str, Any] = {}
_CASES = msgspec.msgpack.Decoder(list[CaseScore])
_ENCODER = msgspec.msgpack.Encoder()


def _init(
    probes: Mapping[str, Probe], set_name: str, pack: RulePack, config: ScoringConfig
) -> None:
    _state["probes"], _state["set_name"] = probes, set_name
    _state["scorer"] = Scorer(pack, config)


def _score(path: Path, chunk: bytes, first_line: int) -> tuple[list[int], list[CaseScore]]:
    batch = decode_chunk(path, chunk, first_line)
    check_known(
        batch.responses, _state["probes"], set_name=_state["set_name"], lines=batch.lines, path=path
    )
    return batch.lines, _state["scorer"].score_batch(_state["probes"], batch.responses)


def _score_packed(path: Path, chunk: bytes, first_line: int) -> tuple[list[int], bytes]:
    lines, cases = _score(path, chunk, first_line)
    return lines, _ENCODER.encode(cases)


def _score_chunks(
    chunks: Iterator[tuple[int, bytes]],
    path: Path,
    *,
    probe_set: ProbeSet,
    pack: RulePack,
    config: ScoringConfig,
    workers: int,
) -> Iterator[tuple[list[int], list[CaseScore], int]]:
    init_args = (probe_set.by_id, probe_set.name, pack, config)
    if workers == 0:
        _init(*init_args)
        for first_line, chunk in chunks:
            lines, cases = _score(path, chunk, first_line)
            yield lines, cases, len(chunk)
        return
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init, initargs=init_args
    ) as pool:
        pending: list[tuple[Future[tuple[list[int], bytes]], int]] = []
        try:
            for first_line, chunk in chunks:
                pending.append((pool.submit(_score_packed, path, chunk, first_line), len(chunk)))
                while len(pending) > 2 * workers:
                    yield _collect(*pending.pop(0))
            while pending:
                yield _collect(*pending.pop(0))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _collect(
    future: Future[tuple[list[int], bytes]], nbytes: int
) -> tuple[list[int], list[CaseScore], int]:
    lines, packed = future.result()
    return lines, _CASES.decode(packed), nbytes
