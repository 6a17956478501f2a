"""Score recorded responses end to end: read, score (in parallel), measure, report.

:func:`score_files` is what ``faultline score`` and ``faultline demo`` run. It streams the
responses file in chunks of whole lines. Each chunk is decoded, validated, scored and encoded
in a worker process (or in this process for small inputs) by :mod:`.chunks`; the parent folds
the chunks into one run (:mod:`.assemble`), orders the cases, computes the failure geometry
and writes the report. Nothing is written until every response has been read and scored, so
bad input never leaves a half-written report, and a previous report in the same directory
survives.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultline.metrics.aggregate import with_expected_modes
from faultline.metrics.transforms import with_transforms
from faultline.observability.geometry import DEFAULT_MIN_CASES, load_numeric_libraries
from faultline.pipeline import chunks
from faultline.pipeline.assemble import RunAssembly
from faultline.probes.loader import load_probes
from faultline.probes.probeset import ProbeSet
from faultline.report.build import run_metadata, write_report
from faultline.report.model import Report
from faultline.responses.loader import CHUNK_BYTES, iter_chunks
from faultline.scoring.case import ScoringConfig
from faultline.scoring.rules import RulePack, load_rule_pack

__all__ = ["PARALLEL_MIN_BYTES", "ProgressCallback", "ScoreRun", "score_files"]

ProgressCallback = Callable[[str, int, int], None]
"""Called as ``(stage, done, total)``; stage ``score`` counts bytes of the responses file."""

PARALLEL_MIN_BYTES = 8 << 20
"""Inputs smaller than this are scored in this process: a pool would cost more than it saves."""


@dataclass
class ScoreRun:
    """The outcome of :func:`score_files`.

    Attributes:
        report: The report (its cases are read from their report.json lines on demand).
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
    calibration: Mapping[str, Any] | None = None,
    target: Mapping[str, Any] | None = None,
    execution: Mapping[str, Any] | None = None,
) -> ScoreRun:
    """Score a responses file against a probe set and write the report.

    The report is the one :func:`faultline.build_report` writes for
    ``faultline.score(probes, load_responses(responses))``, byte for byte apart from the
    run id and time, but it is built without holding every case as an object.

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
        calibration: Each rule's measured precision, for ``run.calibration``.
        target: The target that produced the responses, for ``run.target`` (default: the
            responses file, as ``replay:NAME``).
        execution: How the responses were collected, for ``run.execution``
            (``faultline run`` gives it).

    Raises:
        InputError: A probe set, responses file or rule pack is malformed; nothing is written.
    """
    probe_set = probes if isinstance(probes, ProbeSet) else load_probes(probes)
    pack = rules if isinstance(rules, RulePack) else load_rule_pack(rules)
    config = config or ScoringConfig()
    path = Path(responses)
    size = path.stat().st_size if path.is_file() else 0
    n_workers = _worker_count(workers, size)
    # scikit-learn and SciPy take seconds to import: load them while the responses are scored.
    threading.Thread(target=load_numeric_libraries, name="faultline-imports", daemon=True).start()
    digest = hashlib.sha256()
    assembly = RunAssembly(probe_set, path, config.severity_weights)
    with _Pool(n_workers, (probe_set.by_id, probe_set.name, pack, config)) as pool:
        qualify = len(pool.scan_models(path)) > 1
        done = 0
        for result in pool.score(path, digest, qualify):
            assembly.add(result)
            done += result.nbytes
            if on_progress is not None:
                on_progress("score", done, size)
    if on_progress is not None:
        on_progress("report", 0, 1)
    cases, geometry, answered = assembly.finish(seed=seed, min_cases=observability_min_cases)
    recorded = {"name": path.name, "sha256": digest.hexdigest(), "records": len(cases)}
    described = {"spec": f"replay:{path.name}", "provider": "replay"} if target is None else target
    target = {**described, "models": assembly.models, "responses": recorded}
    run = run_metadata(
        probe_set=probe_set,
        rules=pack,
        config=config,
        target=target,
        seed=seed,
        observability_min_cases=observability_min_cases,
        run_id=run_id,
        created_at=created_at,
        calibration=calibration,
    )
    unanswered = [p.id for i, p in enumerate(probe_set) if i not in answered]
    run["probe_set"]["unanswered"] = len(unanswered)
    if execution is not None:
        run["execution"] = dict(execution)
    report = Report(
        run=run,
        cases=cases,
        aggregate_metrics=with_expected_modes(
            with_transforms(assembly.metrics.result(), assembly.transform_metrics()),
            assembly.failed_per_probe(),
            {p.id: p.failure_modes for p in probe_set},
        ),
        observability=None if geometry is None else geometry.summary,
    )
    outcome = ScoreRun(report, unanswered=unanswered, workers=n_workers)
    if out is not None:
        outcome.written = write_report(report, Path(out))
    if on_progress is not None:
        on_progress("report", 1, 1)
    return outcome


def _worker_count(requested: int | None, size: int) -> int:
    if requested is not None and requested <= 1:
        return 0
    if size < PARALLEL_MIN_BYTES:
        return 0
    return requested or os.cpu_count() or 1


class _Pool:
    """Runs the chunk functions in worker processes, or in this process when ``workers`` is 0.

    Each worker gets the probes, rules and configuration once, when it starts.
    """

    def __init__(self, workers: int, init_args: tuple[Any, ...]) -> None:
        self.workers = workers
        self._executor: ProcessPoolExecutor | None = None
        if workers == 0:
            chunks.init(*init_args)
        else:
            method = (
                "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
            )
            self._executor = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context(method),
                initializer=_init_worker,
                initargs=init_args,
            )

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        # On an error or Ctrl-C, drop the queued chunks and wait for the few in flight, so no
        # worker outlives the run.
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def scan_models(self, path: Path) -> set[str | None]:
        """Every model named in the file (bad lines are left to the scoring pass)."""
        pieces = (chunk for _, chunk in iter_chunks(path, CHUNK_BYTES))
        found: set[str | None] = set()
        results = (
            map(chunks.scan_models, pieces)
            if self._executor is None
            else self._executor.map(chunks.scan_models, pieces)
        )
        for models in results:
            found |= models or set()
        return found

    def score(self, path: Path, digest: Any, qualify: bool) -> Iterator[chunks.ChunkResult]:
        """Score every chunk, yielding results in file order."""
        pieces = iter_chunks(path, CHUNK_BYTES, digest)
        if self._executor is None:
            for first_line, chunk in pieces:
                yield chunks.score_chunk(path, chunk, first_line, qualify)
            return
        pending: list[Future[chunks.ChunkResult]] = []
        for first_line, chunk in pieces:
            pending.append(
                self._executor.submit(chunks.score_chunk, path, chunk, first_line, qualify)
            )
            while len(pending) > 2 * self.workers:
                yield pending.pop(0).result()
        while pending:
            yield pending.pop(0).result()


def _init_worker(*init_args: Any) -> None:
    """A worker's start: Ctrl-C is the parent's to handle (it stops the pool), then the state."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    chunks.init(*init_args)
