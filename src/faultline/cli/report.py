"""``faultline report``: render report.html and report.md again from a report.json."""

from __future__ import annotations

import time

import click

from faultline.cli._console import out, shown
from faultline.cli._options import non_empty
from faultline.cli._render import check_finished, written


@click.command("report")
@click.argument("source", metavar="DIR_OR_JSON", type=click.Path(), callback=non_empty)
@click.option(
    "--out",
    "-o",
    "out_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    default=None,
    callback=non_empty,
    help="Where to write the views (default: beside the report.json).",
)
def report_command(source: str, out_dir: str | None) -> int:
    """Render report.html and report.md again from a saved report.json (or a run directory).

    Useful after upgrading faultline, or for a report.json copied from CI. The report.json
    itself is read, never changed. Exit 2 when the file is missing or not a faultline report
    (the field is named), or its cases.parquet is missing or not the one it describes; the
    views already in DIR are then left as they were.
    """
    from faultline.report.build import rerender_report

    check_finished(source)
    start = time.perf_counter()
    paths = rerender_report(source, out_dir)
    out.print(shown(f"Wrote {written(paths)} in {time.perf_counter() - start:.1f} s."))
    return 0
