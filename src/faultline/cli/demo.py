"""``faultline demo``: the built-in failure-geometry demo, offline."""

from __future__ import annotations

import time

import click

from faultline.cli._console import out, progress
from faultline.cli._options import SEED, non_empty
from faultline.cli._render import render_run


@click.command("demo")
@click.option(
    "--out",
    "-o",
    "out_dir",
    default="faultline-demo",
    show_default=True,
    metavar="DIR",
    type=click.Path(file_okay=False),
    callback=non_empty,
    help="Directory for report.json, report.md and report.html.",
)
@click.option(
    "--seed", type=SEED, default=0, show_default=True, help="Seed of the failure geometry."
)
def demo_command(out_dir: str, seed: int) -> int:
    """Score real recorded model answers (XSTest v2 and JailbreakBench) and report, offline.

    2,550 public answers of six model groups to 650 probes (250 benign controls) are scored
    with the default rules; the report goes to DIR. Sources and licences:
    faultline/demo/data/ATTRIBUTION.md.
    """
    from faultline.demo import run_demo

    start = time.perf_counter()
    with progress("scoring the demo") as on_progress:
        run = run_demo(out_dir, seed=seed, on_progress=on_progress)
    render_run(run, "demo", time.perf_counter() - start)
    out.print(
        "Open report.html in a browser (it works offline) or report.md for the tables; every "
        "verdict in report.json has its explanation and evidence."
    )
    return 0
