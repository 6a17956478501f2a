"""Render a scored run for the terminal: the headline, models, categories and geometry."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from faultline._util.text import visible
from faultline.cli._console import err, out, shown

if TYPE_CHECKING:
    from faultline.pipeline import ScoreRun
    from faultline.probes.model import Probe
    from faultline.probes.probeset import ProbeSet
    from faultline.report.gates import GateResult
    from faultline.runner import ProbeRun


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def render_warnings(scorer: dict[str, Any]) -> None:
    """Print on stderr each mismatch between the scorer's parts.

    Args:
        scorer: A report's ``run``, or a calibration's ``scorer`` (the same keys); see
            :func:`~faultline.report.mismatches.scorer_mismatches`.
    """
    from faultline.report.mismatches import plain_named, scorer_mismatches

    def named(part: Any) -> str:  # a name from a file: its line breaks cannot start a line
        return visible(plain_named(part), one_line=True)

    for mismatch in scorer_mismatches(scorer, named):
        err.print(Text.assemble(("Warning: ", "yellow"), shown(f"{mismatch.text}.")))


def with_variants(probe_set: ProbeSet, transforms: tuple[str, ...]) -> ProbeSet:
    """``probe_set`` with its attack variants; one line on stderr for the variants not made.

    A variant whose input would equal its probe's (``leetspeak`` or ``homoglyph`` of a text
    without the letters they swap) is not made (:func:`apply_transforms`); the line says how
    many, under which transforms, and why, once for the whole set.
    """
    from faultline.probes.transforms import apply_transforms, parse_transforms

    unchanged: dict[str, int] = {}

    def count(_: Probe, name: str) -> None:
        unchanged[name] = unchanged.get(name, 0) + 1

    derived = apply_transforms(probe_set, parse_transforms(transforms), on_unchanged=count)
    if unchanged:
        total = sum(unchanged.values())
        each = ", ".join(f"{name} {n:,}" for name, n in unchanged.items())
        err.print(
            shown(
                f"faultline: {total:,} attack {'variant was' if total == 1 else 'variants were'} "
                f"not made ({each}): the transform leaves the probe's input unchanged (it has "
                "none of the letters the transform swaps), so the copy would carry no disguise"
            )
        )
    return derived


def render_run(run: ScoreRun | ProbeRun, command: str, seconds: float) -> None:
    """Print what a score, run or demo run found and wrote, and any warning on stderr."""
    render_warnings(run.report.run)
    m = run.report.aggregate_metrics
    c, o = m["counts"], m["overall"]
    ci = o.get("pass_rate_ci95")
    ci_text = f" (95% CI {_pct(ci[0])}–{_pct(ci[1])})" if ci else ""
    out.print(
        Text.assemble(
            (f"faultline {command}: ", "bold"),
            f"{c['cases']:,} cases, {c['scored']:,} scored, {c['errors']:,} errors · pass rate ",
            (_pct(o["pass_rate"]), "bold"),
            ci_text,
            f" · severity-weighted {_pct(o['severity_weighted_pass_rate'])}",
            f" · high-stakes share of failures {_pct(o['high_stakes_failure_rate'])}",
        )
    )
    models = m.get("by_model", {})
    if len(models) > 1:
        _models(models)
    _categories(m)
    _geometry(run.report.observability, m)
    if run.unanswered:
        ids = ", ".join(run.unanswered[:5]) + (" …" if len(run.unanswered) > 5 else "")
        out.print(
            Text.assemble(
                ("Note:", "yellow"),
                f" {len(run.unanswered)} probe(s) have no response: ",
                shown(ids, one_line=True),
            ),
            soft_wrap=True,  # one line: the ids' spaces must not start a line where it wraps
        )
    skipped = getattr(run, "skipped", None)  # only score reads a directory or a glob
    if skipped:
        listed = ", ".join(visible(str(p), one_line=True) for p in skipped[:3])
        more = " …" if len(skipped) > 3 else ""
        out.print(
            Text.assemble(
                ("Note:", "yellow"),
                f" {len(skipped)} responses file(s) in the output directory were not read: "
                f"{listed}{more}",
            ),
            soft_wrap=True,
        )
    if run.written:
        out.print(shown(f"Wrote {written(run.written)} in {seconds:.1f} s."), soft_wrap=True)


def _models(models: dict[str, Any]) -> None:
    table = Table(title="Pass rates per model", title_justify="left", show_edge=False)
    for name in (
        "model",
        "cases",
        "pass rate",
        "safe on harmful",
        "over-refusal",
        "high-stakes fails",
    ):
        table.add_column(name, justify="left" if name == "model" else "right")
    for name, s in models.items():
        ex = s.get("by_expect", {})
        over = ex.get("comply", {}).get("pass_rate")
        table.add_row(
            shown(name, one_line=True),
            f"{s['n']:,}",
            _pct(s["pass_rate"]),
            _pct(ex["refuse"]["pass_rate"]) if "refuse" in ex else "–",
            _pct(None if over is None else 1 - over) if "comply" in ex else "–",
            f"{s['high_stakes_failures']:,}",
        )
    out.print(table)


def _categories(m: dict[str, Any]) -> None:
    worst = m["category_ranking"][:5]
    if not worst:
        return
    parts = []
    for r in worst:
        s = m["by_category"][r["category"]]
        parts.append(
            f"{r['category']} (mean risk {r['risk_mean']:.2f}, pass {_pct(s['pass_rate'])})"
        )
    # One line, never wrapped: a category's line break, or a space where the line wraps,
    # would start a line of the log with what the data says.
    out.print(shown("Riskiest categories: " + "; ".join(parts), one_line=True), soft_wrap=True)


def _geometry(obs: dict[str, Any] | None, m: dict[str, Any]) -> None:
    # Here, not at the top: faultline.report loads NumPy, which `faultline --help` must not.
    from faultline.report.readings import LABELS, geometry_reading

    if obs is None:
        out.print("Failure geometry: too few scored cases.")
        return
    reading = geometry_reading(obs, m)
    nmi = obs["normalized_mutual_information"]
    readings = ", ".join(
        f"{k.replace('_', '/')} {nmi[k]:.2f}"
        if k in reading.applicable
        else f"{k.replace('_', '/')} n/a"
        for k in LABELS
    )
    out.print(
        f"Failure geometry: {reading.clusters()} over {obs['n_cases']:,} cases. "
        + reading.conclusion(lambda name: f"[bold]{name}[/]")
        + (f" (normalised MI: {readings})" if reading.applicable else "")
    )
    table = Table(show_edge=False, pad_edge=False)
    for name in ("cluster", "size", "fail rate", "dominant category", "top terms"):
        table.add_column(name, justify="right" if name in ("size", "fail rate") else "left")
    for cl in obs["clusters"]:
        table.add_row(
            str(cl["id"]),
            f"{cl['size']:,}",
            _pct(cl["fail_rate"]),
            shown(cl["dominant_category"], one_line=True),
            shown(", ".join(cl["top_terms"][:5]), one_line=True),
        )
    out.print(table)


def render_gates(results: list[GateResult]) -> bool:
    """Print each gate's outcome; return whether any tripped."""
    for r in results:
        style = "red" if r.tripped else "green"
        out.print(Text.assemble(("gate", style), " ", shown(r.describe())))
    return any(r.tripped for r in results)


def written(paths: list[Path]) -> str:
    """A list of paths for a message."""
    return ", ".join(str(p) for p in paths)


def check_finished(given: str, then: str = "") -> None:
    """A run directory without its report.json but with a journal: say the run is unfinished.

    ``faultline compare`` and ``faultline report`` read a run's report.json; before this they
    said only "no such file" of a run stopped before its report was written.

    Args:
        given: The directory or report.json the user named.
        then: What to do once the run is finished, if anything (a finished run writes its
            report and views itself).

    Raises:
        InputError: ``given`` is a run directory whose run was interrupted before its report
            was written, naming the journal, how many cases it holds and how to finish it.
    """
    from faultline.errors import InputError
    from faultline.report.jsonio import report_json_path
    from faultline.runner.journal import JOURNAL_NAME, recorded_count

    directory = Path(given)
    journal = directory / JOURNAL_NAME
    if not directory.is_dir() or report_json_path(directory).exists() or not journal.exists():
        return
    raise InputError(
        f"no report.json: the run was interrupted before its report was written "
        f"({recorded_count(directory):,} cases recorded in {journal}); finish it with the same "
        f"'faultline run' command and --resume{f', then {then}' if then else ''}",
        path=directory,
    )
