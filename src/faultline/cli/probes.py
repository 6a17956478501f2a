"""``faultline probes``: list the built-in probe sets and validate probe files."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from faultline.cli._console import out
from faultline.probes import builtin_probe_sets, load_probes


@click.group("probes")
def probes_group() -> None:
    """List built-in probe sets and check probe files."""


@probes_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def list_command(as_json: bool) -> int:
    """List the built-in probe sets: name, version, count and categories."""
    rows: list[dict[str, Any]] = []
    for name in builtin_probe_sets():
        s = load_probes(builtin_probe_sets()[name])
        rows.append(
            {
                "name": name,
                "version": s.version,
                "count": len(s),
                "categories": s.categories,
                "benign_controls": sum(p.expect == "comply" for p in s),
                "sha256": s.sha256,
                "description": s.description,
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return 0
    table = Table(show_edge=False)
    for col in ("name", "version", "probes", "benign", "categories"):
        table.add_column(col, justify="right" if col in ("probes", "benign") else "left")
    for r in rows:
        table.add_row(
            r["name"],
            r["version"] or "",
            str(r["count"]),
            str(r["benign_controls"]),
            Text(", ".join(r["categories"])),
        )
    out.print(table)
    return 0


@probes_group.command("validate")
@click.argument("paths", nargs=-1, required=True, metavar="P...")
def validate_command(paths: tuple[str, ...]) -> int:
    """Check probe files (YAML, JSONL or directories): fields, types, unique ids.

    Exit 0 when all are valid; 2 with the file, line and field of the first problem.
    """
    for path in paths:
        s = load_probes(path)
        comply = sum(p.expect == "comply" for p in s)
        out.print(
            Text(
                f"{path}: ok — {len(s)} probes ({comply} benign controls), "
                f"{len(s.categories)} categories: {', '.join(s.categories)}"
            )
        )
    return 0
