"""``faultline compare``: what changed between two reports, and gates on it for CI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from rich.text import Text

from faultline.cli._console import out, shown
from faultline.cli._options import non_empty
from faultline.cli._render import check_finished, render_gates, written

_STYLES = {"worse": "bold red", "better": "bold green", "mixed": "bold yellow", "same": "bold"}
_SHOWN = 5


@click.command("compare")
@click.argument("base", metavar="BASE", callback=non_empty)
@click.argument("new", metavar="NEW", callback=non_empty)
@click.option(
    "--out",
    "-o",
    "out_dir",
    default="faultline-compare",
    show_default=True,
    metavar="DIR",
    type=click.Path(file_okay=False),
    callback=non_empty,
    help="Directory for compare.json, compare.md and compare.html (created if missing).",
)
@click.option(
    "--fail-on",
    "fail_on",
    multiple=True,
    metavar="GATE",
    help=(
        "Exit 1 when a gate trips, e.g. 'regressions>0', 'pass_rate<0.95', "
        "'high_stakes_failure_rate>0' or 'severity_weighted_pass_rate_drop>0.02'. Repeatable."
    ),
)
@click.option(
    "--junit",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write JUnit XML: one test per changed case (regressions fail) and per gate.",
)
def compare_command(
    base: str, new: str, out_dir: str, fail_on: tuple[str, ...], junit: str | None
) -> int:
    """Compare two reports: regressions, fixes and metric changes.

    BASE and NEW are report.json files or run directories. Cases are matched by probe and
    sample, and by model too when a run has answers from several models: regressions
    (pass → fail), fixes (fail → pass), new and removed cases; each headline
    metric's change, and whether it is better or worse; the categories that moved; and
    McNemar's test on the cases in both runs (a two-proportion test when none pair up).
    Writes compare.json, compare.md (for a pull request) and compare.html to DIR. Exit 1
    when a --fail-on gate trips, 2 on bad input.
    """
    from faultline.report.compare import compare_files
    from faultline.report.compare_views import write_compare
    from faultline.report.gates import evaluate_compare_gates, parse_compare_gate

    gates = [parse_compare_gate(g) for g in fail_on]
    for given in (base, new):
        check_finished(given, "compare")
    if junit is not None:  # before anything is written: a bad path leaves --out as it was
        from faultline.report.junit import check_junit_path

        outputs = ("compare.json", "compare.md", "compare.html")
        from faultline.report.jsonio import report_json_path

        reports = [report_json_path(p) for p in (base, new)]
        check_junit_path(junit, [*reports, *(Path(out_dir) / name for name in outputs)])
    result = compare_files(base, new)
    paths = write_compare(result, Path(out_dir))
    _summary(result)
    out.print(shown(f"Wrote {written(paths)}."))
    results = evaluate_compare_gates(gates, result)
    if junit is not None:
        from faultline.report.junit import compare_junit, write_junit

        out.print(
            shown(f"Wrote JUnit XML to {write_junit(junit, compare_junit(result, results))}.")
        )
    tripped = render_gates(results) if results else False
    return 1 if tripped else 0


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _risk(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _summary(result: Mapping[str, Any]) -> None:
    """The verdict, the headline numbers, warnings and the worst regressions."""
    c, pr, s = result["cases"], result["metrics"]["pass_rate"], result["significance"]
    p = s["p_value"]
    test = "McNemar" if s["test"] == "mcnemar" else "two-proportion z"
    out.print(
        Text.assemble(
            ("faultline compare: ", "bold"),
            (result["verdict"], _STYLES.get(result["verdict"], "bold")),
            f" · regressions {len(c['regressions']):,}, fixes {len(c['fixes']):,}, "
            f"new failing {c['new_failures']:,}, new errors {len(c['became_error']):,}, "
            f"removed {len(c['removed']):,} · pass rate {_pct(pr['base'])} → {_pct(pr['new'])}",
            f" · {test} p = {'n/a' if p is None else f'{p:.3g}'}",
        )
    )
    for warning in result["comparable"]:
        out.print(Text.assemble(("Warning: ", "yellow"), shown(warning["message"])))
    from faultline.report.compare import new_failures

    _listed("Regressions, worst first:", c["regressions"])
    _listed("New failures (no verdict in the base run), worst first:", new_failures(c))


def _listed(title: str, entries: Sequence[Mapping[str, Any]]) -> None:
    """The first few cases of a list, and where the rest are: compare.md and compare.json."""
    from faultline.report.compare_views import MAX_LISTED

    if entries:
        out.print(Text(title))
    for e in entries[:_SHOWN]:
        # One line each, line breaks escaped and never wrapped: an id's line break, or a space
        # where the line wraps, would start a line of the log with what the data says.
        out.print(
            shown(
                f"  {e['case_id']}  {e['category']}  {e['severity']}  risk "
                f"{_risk(e['base_risk_score'])} → {_risk(e['new_risk_score'])}",
                one_line=True,
            ),
            soft_wrap=True,
        )
    if len(entries) > _SHOWN:
        in_md = min(len(entries), MAX_LISTED)
        out.print(
            Text(
                f"  … and {len(entries) - _SHOWN:,} more: compare.md lists the first {in_md:,}, "
                f"compare.json all {len(entries):,}"
            )
        )
