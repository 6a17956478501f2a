"""``build_report``: cases in, report.json, report.md and report.html out."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from faultline._util.files import atomic_write_bytes, staged_files
from faultline.metrics.aggregate import MetricsAccumulator, rank_as_listed, with_expected_modes
from faultline.metrics.transforms import transform_metrics, with_transforms
from faultline.observability.geometry import DEFAULT_MIN_CASES, compute_observability
from faultline.probes.probeset import ProbeSet
from faultline.report.html import render_html, write_html
from faultline.report.jsonio import (
    cases_file_path,
    read_report,
    report_json_path,
    write_report_json,
)
from faultline.report.markdown import render_markdown
from faultline.report.model import (
    CASES_FILE,
    REPORT_FILES,
    CaseLines,
    Report,
    count_rules,
    new_run_id,
    rule_table,
    utc_now,
)
from faultline.scoring.case import CaseScore, ScoringConfig
from faultline.scoring.learned import load_learned
from faultline.scoring.rules import RulePack

__all__ = ["build_report", "rerender_report", "run_metadata", "write_report"]


def run_metadata(
    *,
    probe_set: ProbeSet | None,
    rules: RulePack | None,
    config: ScoringConfig,
    target: Mapping[str, Any] | None,
    seed: int,
    observability_min_cases: int,
    models: Sequence[str] = (),
    run_id: str | None = None,
    created_at: str | None = None,
    calibration: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report's ``run`` object."""
    run: dict[str, Any] = {
        "id": run_id or new_run_id(),
        "created_at": created_at or utc_now(),
        "target": dict(target)
        if target is not None
        else {"spec": None, "provider": None, "models": list(models)},
        "probe_set": {
            "name": probe_set.name if probe_set else None,
            "version": probe_set.version if probe_set else None,
            "sha256": probe_set.sha256 if probe_set else None,
            "probes": len(probe_set) if probe_set else None,
        },
        "rules": {
            "name": rules.name if rules else None,
            "version": rules.version if rules else None,
            "sha256": rules.sha256 if rules else None,
        },
        "learned": None if config.learned is None else load_learned(config.learned).identity(),
        "config": {
            "pass_threshold": config.pass_threshold,
            "severity_weights": dict(config.severity_weights),
            "observability_min_cases": observability_min_cases,
            "seed": seed,
        },
    }
    if calibration is not None:
        run["calibration"] = dict(calibration)
    return run


def build_report(
    cases: Sequence[CaseScore],
    *,
    out: str | Path | None = None,
    probe_set: ProbeSet | None = None,
    rules: RulePack | None = None,
    config: ScoringConfig | None = None,
    target: Mapping[str, Any] | None = None,
    seed: int = 0,
    observability_min_cases: int = DEFAULT_MIN_CASES,
    metrics: MetricsAccumulator | None = None,
    run_id: str | None = None,
    created_at: str | None = None,
    calibration: Mapping[str, Any] | None = None,
) -> Report:
    """Assemble a report from scored cases, and write it when ``out`` is given.

    Computes ``aggregate_metrics`` and, with at least ``observability_min_cases`` scored
    cases, the failure geometry, whose cluster and 2-D position are set on each scored case.

    Args:
        cases: The run's cases (errors included), in the report's order.
        out: A directory to write report.json, report.md and report.html into (created if missing).
        probe_set: The probe set, for its name and hash.
        rules: The rule pack, for its name, version and hash.
        config: The scoring configuration the cases were scored with.
        target: The target spec (without secrets) that produced the responses.
        seed: Seeds the failure geometry.
        observability_min_cases: The fewest scored cases for which the geometry is built.
        metrics: An accumulator already holding these cases, to avoid a second pass.
        run_id: The run id (default: a new one).
        created_at: The creation time (default: now).
        calibration: Each rule's measured precision, for ``run.calibration``
            (:func:`faultline.calibration.attach.load_calibration`).

    Returns:
        The report.
    """
    config = config or ScoringConfig()
    accumulator = metrics or MetricsAccumulator(config.severity_weights).add(cases)
    geometry = compute_observability(cases, seed=seed, min_cases=observability_min_cases)
    for i, case in enumerate(c for c in cases if c.status != "error"):
        if geometry is None:
            case.cluster = case.scatter_x = case.scatter_y = None
        else:
            case.cluster, case.scatter_x, case.scatter_y = (
                geometry.cluster[i],
                geometry.x[i],
                geometry.y[i],
            )
    models = sorted({c.model for c in cases if c.model is not None})
    report = Report(
        run=run_metadata(
            probe_set=probe_set,
            rules=rules,
            config=config,
            target=target,
            seed=seed,
            observability_min_cases=observability_min_cases,
            models=models,
            run_id=run_id,
            created_at=created_at,
            calibration=calibration,
        ),
        cases=cases,
        aggregate_metrics=accumulator.result()
        if probe_set is None
        else with_expected_modes(
            with_transforms(accumulator.result(), _by_transform(cases, probe_set)),
            Counter(c.probe_id for c in cases if c.status == "fail"),
            {p.id: p.failure_modes for p in probe_set},
        ),
        observability=None if geometry is None else geometry.summary,
    )
    ranking = report.aggregate_metrics["category_ranking"]
    report.aggregate_metrics["category_ranking"] = rank_as_listed(
        ranking, ((c.category, c.risk_score) for c in cases)
    )
    if out is not None:
        write_report(report, Path(out))
    return report


def _by_transform(cases: Sequence[CaseScore], probe_set: ProbeSet) -> dict[str, Any] | None:
    """``by_transform`` of the cases whose probe is in the set (docs/metrics.md)."""
    index = probe_set.index
    known = [(index[c.probe_id], c) for c in cases if c.probe_id in index]
    return transform_metrics(
        probe_set.probes,
        np.fromiter((i for i, _ in known), dtype=np.int64, count=len(known)),
        np.fromiter((c.status != "error" for _, c in known), dtype=np.bool_, count=len(known)),
        np.fromiter((c.status == "pass" for _, c in known), dtype=np.bool_, count=len(known)),
    )


def write_report(report: Report, out: Path, *, cases: Path | None = None) -> list[Path]:
    """Write report.json, report.md and report.html into ``out`` (created if missing), as a group.

    All three are written to temporary files first: if any fails, the reports already in
    ``out`` stay as they were, all three of the same run. A report that keeps its cases
    inline removes the cases.parquet an earlier, larger run left in ``out``, so the directory
    never holds the cases of another run.

    Args:
        report: The report.
        out: The directory.
        cases: For a report whose cases are in cases.parquet (``report.cases_file``): the
            file, written elsewhere in ``out``'s file system, to move to ``out/cases.parquet``
            with the reports, in the same group. If anything fails, it replaces nothing (and
            is removed); once all are written, it goes in first, so report.json never names a
            cases.parquet that is not there.

    Returns:
        The paths written (cases.parquet last, if moved).
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in REPORT_FILES]
    group = paths if cases is None else [out / CASES_FILE, *paths]
    with staged_files(group) as staged:
        json_tmp, md_tmp, html_tmp = staged[-3:]
        write_report_json(report, json_tmp)
        atomic_write_bytes(md_tmp, render_markdown(_plain(report)).encode("utf-8"))
        write_html(report, html_tmp)
        if cases is not None:
            os.replace(cases, staged[0])
    if cases is not None:
        if report.cases_file is not None:
            report.cases_file.directory = out
        return [*paths, out / CASES_FILE]
    if report.cases_file is None:  # the cases are inline: an earlier run's file is not this run's
        (out / CASES_FILE).unlink(missing_ok=True)
    return paths


def rerender_report(source: str | Path, out: str | Path | None = None) -> list[Path]:
    """Render report.md and report.html again from a saved report.json.

    The report is checked and both views are rendered before either file is written, so a
    damaged report (or a missing or foreign cases.parquet) leaves the views in ``out`` as
    they were.

    Args:
        source: A report.json, or a run directory holding one.
        out: Where to write the views (default: beside the report.json).

    Returns:
        The paths written.

    Raises:
        InputError: ``source`` is missing or is not a faultline report, or its cases.parquet
            is missing or is not the one report.json describes.
    """
    data = read_report(source)
    report_path = report_json_path(source)
    target = Path(out) if out is not None else report_path.parent
    if "cases_file" in data:
        md, html = _render_split(data, cases_file_path(report_path, data["cases_file"]))
    else:
        md, html = _render_inline(data)
    target.mkdir(parents=True, exist_ok=True)
    paths = [target / "report.md", target / "report.html"]
    with staged_files(paths) as (md_tmp, html_tmp):
        atomic_write_bytes(md_tmp, md.encode("utf-8"))
        atomic_write_bytes(html_tmp, html.encode("utf-8"))
    return paths


def _render_inline(data: dict[str, Any]) -> tuple[str, str]:
    """report.md and report.html of a report whose cases are in report.json."""
    worst = {w["case_id"] for w in data["aggregate_metrics"]["worst_cases"]}
    plain = {
        **{k: v for k, v in data.items() if k != "cases"},
        "cases": [
            {"case_id": c["case_id"], "status": c["status"], "explanation": c["explanation"]}
            for c in data["cases"]
            if c["case_id"] in worst
        ],
    }
    if data["run"].get("calibration"):
        plain["rule_counts"] = _count_rules(_Matched(**_matched(c)) for c in data["cases"])
    return render_markdown(plain), render_html(data)


def _render_split(data: dict[str, Any], cases_path: Path) -> tuple[str, str]:
    """The views of a report whose cases are in cases.parquet: the page's sample is drawn again."""
    from faultline.report.html import MAX_HTML_CASES
    from faultline.report.parquet import read_sample, rule_counts

    plain = {
        **{k: v for k, v in data.items() if k != "worst_cases"},
        "cases": [
            {"case_id": c["case_id"], "status": c["status"], "explanation": c["explanation"]}
            for c in data["worst_cases"]
        ],
    }
    if data["run"].get("calibration"):
        plain["rule_counts"] = rule_counts(cases_path)
    sample = read_sample(cases_path, MAX_HTML_CASES, int(data["run"]["config"]["seed"]))
    return render_markdown(plain), render_html({**data, "cases_sample": sample})


def _matched(case: Mapping[str, Any]) -> dict[str, list[str]]:
    return {k: list(case.get(k) or []) for k in _Matched.__struct_fields__}


def _plain(report: Report) -> dict[str, Any]:
    """The parts of the report the Markdown view reads, without converting every case."""
    worst = [w["case_id"] for w in report.aggregate_metrics["worst_cases"]]
    cases = report.cases
    if report.cases_file is not None:
        plain = {
            **report.header,
            "cases": [
                {k: c[k] for k in ("case_id", "status", "explanation")}
                for c in report.cases_file.worst
            ],
            "aggregate_metrics": report.aggregate_metrics,
            "observability": report.observability,
        }
        if report.run.get("calibration"):
            plain["rule_counts"] = report.cases_file.rules
        return plain
    if isinstance(cases, CaseLines):
        chosen = [c for cid in worst if (c := cases.find(cid)) is not None]
    else:
        wanted = set(worst)
        chosen = [c for c in cases if c.case_id in wanted]
    plain = {
        **report.header,
        "cases": [
            {"case_id": c.case_id, "status": c.status, "explanation": c.explanation} for c in chosen
        ],
        "aggregate_metrics": report.aggregate_metrics,
        "observability": report.observability,
    }
    if report.run.get("calibration"):
        plain["rule_counts"] = _rule_counts(report)
    return plain


class _Matched(msgspec.Struct):
    """The matched rules of a case: all that is decoded to count them."""

    matched_boundary_patterns: list[str] = []
    matched_unsafe_patterns: list[str] = []
    matched_safe_patterns: list[str] = []


def _rule_counts(report: Report) -> list[list[Any]]:
    """How many cases each rule matched in, as ``[kind, label, count]``, for the Markdown."""
    cases = report.cases
    if isinstance(cases, CaseLines):
        decode = msgspec.json.Decoder(_Matched).decode
        matched: Iterable[Any] = (decode(cases.line(i)) for i in range(len(cases)))
    else:
        matched = cases
    return _count_rules(matched)


def _count_rules(matched: Iterable[Any]) -> list[list[Any]]:
    return rule_table(count_rules(matched))
