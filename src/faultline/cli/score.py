"""``faultline score``: score recorded responses and write the report."""

from __future__ import annotations

import time
from pathlib import Path

import click

from faultline.cli._console import out as console
from faultline.cli._console import progress, shown
from faultline.cli._options import non_empty, parse_config, scoring_options, warn_workers
from faultline.cli._render import render_gates, render_run, with_variants


@click.command("score")
@click.option(
    "--probes",
    "-p",
    required=True,
    callback=non_empty,
    metavar="P",
    help="Probe set: a YAML/JSONL file, a directory, or a built-in name.",
)
@click.option(
    "--responses",
    "-r",
    required=True,
    callback=non_empty,
    metavar="R",
    help="Recorded responses: a JSONL, JSONL.gz or Parquet file (probe_id, response, sample, "
    "model, error), a directory of them, or a glob such as 'logs/*.parquet' (a directory or "
    "glob leaves out the files in --out).",
)
@click.option(
    "--out",
    "-o",
    required=True,
    metavar="DIR",
    type=click.Path(file_okay=False),
    callback=non_empty,
    help="Directory for report.json, report.md and report.html (created if missing).",
)
@click.option(
    "--transform",
    "transforms",
    multiple=True,
    metavar="NAMES",
    help="Score attack variants too: the transforms (comma-separated) the responses were "
    "collected with, so answers to ids ID~NAME are scored. Repeatable.",
)
@click.option(
    "--calibration",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    default=None,
    help="A calibration.json from 'faultline calibrate': each rule's measured precision goes into the report.",
)
@click.option(
    "--junit",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write JUnit XML (one test case per probe) for CI systems.",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="Where batches are scored: this machine's processes (--workers), or Dask "
    "(pip install 'faultline[dask]'; docs/scale.md).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    default=None,
    help="A running Dask scheduler, e.g. tcp://10.0.0.5:8786 (default with --engine dask: "
    "a LocalCluster of --workers processes). It has 30 s to answer "
    "(FAULTLINE_SCHEDULER_TIMEOUT, in seconds).",
)
@click.option(
    "--cases-inline-max",
    type=click.IntRange(min=0),
    default=50_000,
    show_default=True,
    metavar="N",
    help="Above N cases, write them to DIR/cases.parquet and keep report.json to the "
    "aggregates, worst cases and geometry (docs/report-format.md).",
)
@scoring_options
def score_command(  # noqa: PLR0917 - click passes every option
    probes: str,
    responses: str,
    out: str,
    transforms: tuple[str, ...],
    calibration: str | None,
    junit: str | None,
    engine: str,
    scheduler: str | None,
    cases_inline_max: int,
    rules: str,
    rules_only: bool,
    learned: str,
    pass_threshold: float,
    severity_weights: str | None,
    seed: int,
    observability_min_cases: int,
    workers: int | None,
    fail_on: tuple[str, ...],
) -> int:
    """Score recorded responses against a probe set and write the report.

    Every response is scored by the rules, with the evidence; the run's metrics and failure
    geometry go to DIR/report.json (the source of truth), DIR/report.md and DIR/report.html
    (the interactive page); --junit FILE also writes JUnit XML for CI. --transform NAMES
    scores answers to the probes' attack variants as well (docs/probes.md). Exit 1 when a
    --fail-on gate trips, 2 on bad input (nothing is written then).
    """
    from faultline.calibration.attach import load_calibration
    from faultline.pipeline import score_files
    from faultline.probes.loader import load_probes
    from faultline.report.gates import evaluate_gates, parse_gate

    config = parse_config(pass_threshold, severity_weights, rules_only=rules_only, learned=learned)
    gates = [parse_gate(g) for g in fail_on]
    if scheduler is None:  # the workers are this machine's processes
        warn_workers(workers)
    if junit is not None:  # before any work: a path that cannot be written leaves --out as it was
        from faultline.report.junit import check_junit_path
        from faultline.report.model import CASES_FILE, REPORT_FILES

        outputs = (*REPORT_FILES, CASES_FILE)
        inputs = [Path(p) for p in (probes, responses) if Path(p).exists()]  # not a set's name
        check_junit_path(junit, [*inputs, *(Path(out) / name for name in outputs)])
    attached = None if calibration is None else load_calibration(calibration)
    probe_set = load_probes(probes)
    if transforms:
        probe_set = with_variants(probe_set, transforms)
    start = time.perf_counter()
    with progress("scoring") as on_progress:
        run = score_files(
            probe_set,
            responses,
            out,
            rules=rules,
            config=config,
            seed=seed,
            observability_min_cases=observability_min_cases,
            workers=workers,
            engine=engine,
            scheduler=scheduler,
            cases_inline_max=cases_inline_max,
            on_progress=on_progress,
            calibration=attached,
        )
    # Every file is written and every gate decided before a word is printed: the output may
    # go to a reader that leaves early (``| head``), which must change neither.
    junit_path = None
    if junit is not None:
        from faultline.report.junit import report_junit, write_junit

        junit_path = write_junit(junit, report_junit(run.report, probe_set))
    results = evaluate_gates(gates, run.report.aggregate_metrics, run.report.run)
    render_run(run, "score", time.perf_counter() - start)
    if junit_path is not None:
        console.print(shown(f"Wrote JUnit XML to {junit_path}."))
    return 1 if render_gates(results) else 0
