"""Score recorded responses end to end: read, score (in parallel), measure, report.

:func:`score_files` is what ``faultline score`` and ``faultline demo`` run. It reads the
responses (JSONL, JSONL.gz or Parquet files, a directory or a glob) as a stream of pieces.
An engine (:mod:`.engines`: this process, worker processes, or Dask) runs the batch function
(:mod:`.batch`) on each piece; the parent folds the results into one run (:mod:`.assemble`),
computes the failure geometry and writes the report. Small runs keep their cases in
report.json; above ``cases_inline_max`` cases they go to cases.parquet and memory stays flat
in the number of responses. Nothing is written until every response has been read and
scored, so bad input never leaves a half-written report, and a previous report in the same
directory survives.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultline._util.cpus import usable_cpus
from faultline._util.files import missing_dirs
from faultline._util.text import well_formed
from faultline.errors import ResponseError, UsageError
from faultline.metrics.aggregate import rank_as_listed, with_expected_modes
from faultline.metrics.transforms import transform_metrics_of_counts, with_transforms
from faultline.observability.geometry import DEFAULT_MIN_CASES, load_numeric_libraries
from faultline.pipeline.assemble import RunAssembly
from faultline.pipeline.batch import CHANGED, BatchContext, Layout
from faultline.pipeline.engines import Engine, open_engine
from faultline.probes.loader import load_probes
from faultline.probes.probeset import ProbeSet
from faultline.report.build import run_metadata, write_report
from faultline.report.model import Report, rule_table
from faultline.responses.loader import CHUNK_BYTES
from faultline.responses.sources import Piece, find_sources, iter_pieces, source_bytes
from faultline.scoring.case import ScoringConfig
from faultline.scoring.rules import RulePack, load_rule_pack

__all__ = [
    "CASES_INLINE_MAX",
    "PARALLEL_MIN_BYTES",
    "ProgressCallback",
    "ScoreRun",
    "score_files",
]

ProgressCallback = Callable[[str, int, int], None]
"""Called as ``(stage, done, total)``; stage ``score`` counts bytes of the responses files."""

PARALLEL_MIN_BYTES = 8 << 20
"""Inputs smaller than this are scored in this process: a pool would cost more than it saves."""

PIECE_ROWS = 20_000
"""Parquet rows per batch."""

CASES_INLINE_MAX = 50_000
"""Above this many cases, they go to cases.parquet instead of report.json."""


@dataclass
class ScoreRun:
    """The outcome of :func:`score_files`.

    Attributes:
        report: The report (its cases are read from their report.json lines on demand; a
            large run's are in cases.parquet, ``report.cases_file``).
        written: The files written.
        unanswered: Ids of probes that no response answers.
        skipped: Responses files of the directory or glob that were not read, being in
            ``out``.
        workers: How many worker processes scored the responses (0: this process).
    """

    report: Report
    written: list[Path] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
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
    engine: str = "local",
    scheduler: str | None = None,
    cases_inline_max: int = CASES_INLINE_MAX,
    piece_bytes: int = CHUNK_BYTES,
    piece_rows: int = PIECE_ROWS,
    on_progress: ProgressCallback | None = None,
    run_id: str | None = None,
    created_at: str | None = None,
    calibration: Mapping[str, Any] | None = None,
    target: Mapping[str, Any] | None = None,
    execution: Mapping[str, Any] | None = None,
) -> ScoreRun:
    """Score responses against a probe set and write the report.

    The report is the one :func:`faultline.build_report` writes for
    ``faultline.score(probes, load_responses(responses))``, byte for byte apart from the
    run id and time, but it is built without holding every case as an object; above
    ``cases_inline_max`` cases, the cases go to cases.parquet and report.json keeps the
    aggregates, the worst cases and the geometry (schema 2, docs/report-format.md).

    Args:
        probes: A probe-set file, directory or built-in name, or a loaded set.
        responses: A responses file (JSONL, JSONL.gz or Parquet), a directory of them, or
            a glob. A directory or a glob leaves out the files in ``out``: a run's own
            cases.parquet is never read back as responses.
        out: The directory for the report (``None``: write nothing; cases stay inline).
        rules: A rule pack, or the name or path of one.
        config: Pass threshold and severity weights.
        seed: Seeds the failure geometry and the HTML sample.
        observability_min_cases: The fewest scored cases for which the geometry is built.
        workers: Worker processes: 1 (the default) scores in this process; ``None`` uses
            one per CPU this process may use (:func:`~faultline._util.cpus.usable_cpus`).
            Inputs under 8 MB are scored in this process by the local engine.
            Worker processes start fresh interpreters, so a script that uses them needs the
            usual ``if __name__ == "__main__":`` guard. With ``engine="dask"``, the workers
            of the LocalCluster started when no ``scheduler`` is given.
        engine: ``local`` (this process or a process pool) or ``dask``.
        scheduler: The address of a running Dask scheduler (``engine="dask"``).
        cases_inline_max: The most cases kept in report.json.
        piece_bytes: Roughly how many bytes of JSONL each batch covers.
        piece_rows: How many Parquet rows each batch covers. The report does not depend
            on either, nor does cases.parquet (its row groups are of fixed length).
        on_progress: Called with progress as pieces are scored.
        run_id: The run id (default: a new one).
        created_at: The creation time (default: now).
        calibration: Each rule's measured precision, for ``run.calibration``.
        target: The target that produced the responses, for ``run.target`` (default: the
            responses, as ``replay:NAME``).
        execution: How the responses were collected, for ``run.execution``
            (``faultline run`` gives it).

    Raises:
        InputError: A probe set, responses file or rule pack is malformed; nothing is written.
        UsageError: An option is out of range, or the engine cannot start.
    """
    if cases_inline_max < 0:
        raise UsageError(f"cases_inline_max must be 0 or more, got {cases_inline_max}")
    if isinstance(out, str) and not out.strip():
        # Path("") is the current directory: the report would be written there
        raise UsageError("out is empty text; expected a directory for the report, or None")
    probe_set = probes if isinstance(probes, ProbeSet) else load_probes(probes)
    pack = rules if isinstance(rules, RulePack) else load_rule_pack(rules)
    config = config or ScoringConfig()
    paths, skipped = find_sources(responses, exclude=out)
    size = source_bytes(paths)
    n_workers = _worker_count(workers, size, engine)
    digest = hashlib.sha256()
    context = BatchContext(probe_set.by_id, probe_set.name, pack, config)
    spill_dir = None
    created: list[Path] = []  # the directories of ``out`` this run made, deepest first
    runner = open_engine(engine, context, workers=n_workers, scheduler=scheduler)
    try:
        models, scanned = _scan(runner, iter_pieces(paths, piece_bytes, piece_rows))
        records = scanned.total()
        names = sorted({m or "" for m in models})
        inline = out is None or records <= cases_inline_max
        if inline:
            # scikit-learn and SciPy take 1.5 s to import: load them while the responses are
            # scored. A run large enough for cases.parquet loads them for the geometry
            # instead, so the parent's 93 MiB of them do not add to the workers' peak.
            threading.Thread(
                target=load_numeric_libraries, name="faultline-imports", daemon=True
            ).start()
        else:
            created = missing_dirs(Path(out))  # type: ignore[arg-type]
            Path(out).mkdir(parents=True, exist_ok=True)  # type: ignore[arg-type]
            spill_dir = Path(tempfile.mkdtemp(prefix=".faultline-", dir=out))
        layout = Layout({name: i for i, name in enumerate(names)}, len(models) > 1, inline)
        assembly = RunAssembly(
            probe_set,
            config.severity_weights,
            model_names=names,
            spill=None if spill_dir is None else spill_dir / "cases.arrow",
        )
        done = 0
        for result in runner.score(iter_pieces(paths, piece_bytes, piece_rows, digest), layout):
            assembly.add(result, result.path)
            scanned[result.path] -= result.n
            done += result.nbytes
            if on_progress is not None:
                on_progress("score", done, size)
        _check_unchanged(scanned)
    except BaseException:
        _remove(spill_dir)
        _remove_empty(created)
        raise
    finally:
        runner.close()
    try:
        outcome = _report(
            assembly,
            probe_set=probe_set,
            pack=pack,
            config=config,
            paths=paths,
            responses=responses,
            digest=digest.hexdigest(),
            out=None if out is None else Path(out),
            spill_dir=spill_dir,
            seed=seed,
            min_cases=observability_min_cases,
            workers=runner.workers,
            on_progress=on_progress,
            meta={
                "run_id": run_id,
                "created_at": created_at,
                "calibration": calibration,
                "target": target,
                "execution": execution,
            },
        )
        outcome.skipped = skipped
        return outcome
    finally:
        _remove(spill_dir)
        _remove_empty(created)


def _scan(runner: Engine, pieces: Iterator[Piece]) -> tuple[set[str | None], Counter[Path]]:
    """The models the pieces name, and each file's records (pieces that do not decode: none)."""
    models: set[str | None] = set()
    records: Counter[Path] = Counter()
    taken: deque[Path] = deque()

    def noted() -> Iterator[Piece]:
        for piece in pieces:
            taken.append(piece.path)
            yield piece

    for found in runner.scan(noted()):
        path = taken.popleft()  # results come in input order
        if found is not None:
            models |= found[0]
            records[path] += found[1]
    return models, records


def _check_unchanged(left: Counter[Path]) -> None:
    """Raise if a file gave another number of records to scoring than to the scan.

    Args:
        left: Each file's records when scanned, less those scored.

    Raises:
        ResponseError: Naming the file.
    """
    path, n = next(((p, n) for p, n in left.items() if n), (None, 0))
    if path is not None:
        more = f"{-n} more" if n < 0 else f"{n} fewer"
        raise ResponseError(
            f"{CHANGED}: it gave {more} records the second time; score a copy that nothing "
            "writes to",
            path=path,
        )


def _remove_empty(directories: list[Path]) -> None:
    """Remove the directories this run made, deepest first, where nothing was written.

    After a run that wrote its report they hold it, so only a failed run's go.
    """
    for directory in directories:
        with contextlib.suppress(OSError):
            directory.rmdir()


def _report(
    assembly: RunAssembly,
    *,
    probe_set: ProbeSet,
    pack: RulePack,
    config: ScoringConfig,
    paths: list[Path],
    responses: str | Path,
    digest: str,
    out: Path | None,
    spill_dir: Path | None,
    seed: int,
    min_cases: int,
    workers: int,
    on_progress: ProgressCallback | None,
    meta: dict[str, Any],
) -> ScoreRun:
    from faultline.report.html import MAX_HTML_CASES
    from faultline.report.parquet import CASES_FILE

    if on_progress is not None:
        on_progress("report", 0, 1)
    assembly.check_unique()
    pairs, geometry = assembly.geometry(seed=seed, min_cases=min_cases)
    counts = assembly.probe_counts
    metrics = with_expected_modes(
        with_transforms(
            assembly.metrics.result(),
            transform_metrics_of_counts(probe_set.probes, counts[0], counts[1], counts[2]),
        ),
        assembly.failed_per_probe(),
        {p.id: p.failure_modes for p in probe_set},
    )
    # A file name need not be UTF-8; the report is, so a byte that is not shows as U+FFFD.
    name = well_formed(paths[0].name if len(paths) == 1 else str(responses))
    recorded: dict[str, Any] = {"name": name, "sha256": digest, "records": assembly.n_cases}
    if len(paths) > 1:
        recorded["files"] = len(paths)
    target = meta["target"]
    described = {"spec": f"replay:{name}", "provider": "replay"} if target is None else target
    run = run_metadata(
        probe_set=probe_set,
        rules=pack,
        config=config,
        target={**described, "models": sorted(assembly.models), "responses": recorded},
        seed=seed,
        observability_min_cases=min_cases,
        run_id=meta["run_id"],
        created_at=meta["created_at"],
        calibration=meta["calibration"],
    )
    answered = assembly.answered()
    unanswered = [p.id for i, p in enumerate(probe_set) if i not in answered]
    run["probe_set"]["unanswered"] = len(unanswered)
    if meta["execution"] is not None:
        run["execution"] = dict(meta["execution"])
    observability = None if geometry is None else geometry.summary
    if assembly.inline:
        cases = assembly.inline_cases(pairs, geometry)
        metrics["category_ranking"] = rank_as_listed(
            metrics["category_ranking"], cases.category_risks()
        )
        report = Report(run, cases, metrics, observability)
    else:
        assert out is not None
        assert spill_dir is not None
        cases_file = assembly.write_cases(
            spill_dir / CASES_FILE,
            pairs,
            geometry,
            worst=[w["case_id"] for w in metrics["worst_cases"]],
            sample_size=MAX_HTML_CASES,
            seed=seed,
        )
        cases_file.rules = rule_table(assembly.rules)
        report = Report(run, [], metrics, observability, cases_file)
    outcome = ScoreRun(report, unanswered=unanswered, workers=workers)
    if out is not None:
        # cases.parquet joins the reports' group: it replaces an earlier run's only once
        # report.json and the views are written, so a failure leaves that run whole.
        spilled = None if spill_dir is None else spill_dir / CASES_FILE
        outcome.written = write_report(report, out, cases=spilled)
    if on_progress is not None:
        on_progress("report", 1, 1)
    return outcome


def _worker_count(requested: int | None, size: int, engine: str) -> int:
    if engine != "local":
        return requested or usable_cpus()
    if requested is not None and requested <= 1:
        return 0
    if size < PARALLEL_MIN_BYTES:
        return 0
    return requested or usable_cpus()


def _remove(directory: Path | None) -> None:
    import shutil

    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
