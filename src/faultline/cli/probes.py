"""``faultline probes``: list the built-in probe sets, validate probe files, import benchmarks."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from faultline._util.files import atomic_write_bytes
from faultline.cli._console import echo, out, shown
from faultline.cli._options import non_empty
from faultline.errors import UsageError
from faultline.probes import SEVERITIES, builtin_probe_sets, load_probes
from faultline.probes.importers import (
    FORMATS,
    import_probes,
    parse_map_options,
    render_probe_set,
)
from faultline.probes.model import EXPECTS


@click.group("probes")
def probes_group() -> None:
    """List built-in probe sets, check probe files and import public benchmarks."""


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
        echo(json.dumps(rows, indent=2))
        return 0
    table = Table(show_edge=False)
    for col in ("name", "version", "probes", "benign", "categories"):
        table.add_column(col, justify="right" if col in ("probes", "benign") else "left")
    for r in rows:
        table.add_row(
            shown(r["name"], one_line=True),
            shown(r["version"] or "", one_line=True),
            str(r["count"]),
            str(r["benign_controls"]),
            shown(", ".join(r["categories"]), one_line=True),
        )
    out.print(table)
    return 0


@probes_group.command("validate")
@click.argument("paths", nargs=-1, required=True, metavar="P...", callback=non_empty)
def validate_command(paths: tuple[str, ...]) -> int:
    """Check probe files (YAML, JSONL or directories): fields, types, unique ids.

    Exit 0 when all are valid; 2 with the file, line and field of the first problem.
    """
    for path in paths:
        s = load_probes(path)
        comply = sum(p.expect == "comply" for p in s)
        out.print(
            shown(
                f"{path}: ok — {len(s)} probes ({comply} benign controls), "
                f"{len(s.categories)} categories: {', '.join(s.categories)}",
                one_line=True,
            )
        )
    return 0


@probes_group.command("import")
@click.argument("file", metavar="FILE")
@click.option(
    "--format",
    "fmt",
    required=True,
    type=click.Choice(list(FORMATS)),
    help="The layout of FILE: a public benchmark, or csv / jsonl with --map.",
)
@click.option(
    "--out",
    "-o",
    "out_path",
    required=True,
    metavar="SET.yaml",
    help="The probe set to write (.yaml or .yml; replaced atomically).",
)
@click.option("--name", default=None, help="The set's name (default: the --out file's stem).")
@click.option(
    "--map",
    "maps",
    multiple=True,
    metavar="FIELD=COLUMN",
    help="Read FIELD from COLUMN, e.g. --map input=prompt, or "
    "--map expect=label:unsafe=refuse,safe=comply. Repeatable.",
)
@click.option(
    "--category",
    default=None,
    help="Category of rows that do not give one (named formats: instead of general_harm).",
)
@click.option(
    "--severity",
    type=click.Choice(SEVERITIES),
    default=None,
    help="Severity of every row (csv, jsonl).",
)
@click.option(
    "--expect",
    type=click.Choice(EXPECTS),
    default=None,
    help="Expectation of every row (csv, jsonl, jbb).",
)
@click.option(
    "--benign", is_flag=True, help="The rows are benign controls: same as --expect comply."
)
def import_command(  # noqa: PLR0917 - click passes every option
    file: str,
    fmt: str,
    out_path: str,
    name: str | None,
    maps: tuple[str, ...],
    category: str | None,
    severity: str | None,
    expect: str | None,
    benign: bool,
) -> int:
    """Turn a public benchmark file, or any CSV / JSONL, into a probe set.

    Formats: harmbench, advbench, jbb (JailbreakBench), xstest, donotanswer, and csv / jsonl
    with --map. Source categories are mapped to faultline's (docs/probes.md) and kept as tags.
    Exit 0 when the set is written; 2 with the file, line and field of the first problem.
    """
    target = Path(out_path)
    if target.suffix.lower() not in (".yaml", ".yml") or target.is_dir():
        raise UsageError(f"--out {out_path}: expected a .yaml or .yml file to write")
    if benign and expect == "refuse":
        raise UsageError("--benign means --expect comply; drop one of them")
    given = {"category": category, "severity": severity, "expect": "comply" if benign else expect}
    probes = import_probes(
        file,
        fmt,
        mapping=parse_map_options(maps),
        defaults={k: v for k, v in given.items() if v is not None},
    )
    data = render_probe_set(probes, name=name or target.stem, source=file, fmt=fmt)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, data)
    _print_counts(probes)
    comply = sum(p["expect"] == "comply" for p in probes)
    out.print(
        shown(
            f"Wrote {len(probes)} probes ({comply} benign controls) from {file} "
            f"({FORMATS[fmt].title}) to {target}."
        )
    )
    return 0


def _print_counts(probes: list[dict[str, Any]]) -> None:
    by_category = Counter(p["category"] for p in probes)
    benign = Counter(p["category"] for p in probes if p["expect"] == "comply")
    table = Table(show_edge=False)
    for col in ("category", "probes", "benign", "severities"):
        table.add_column(col, justify="right" if col in ("probes", "benign") else "left")
    for cat, count in sorted(by_category.items(), key=lambda kv: (-kv[1], kv[0])):
        tiers = Counter(p["severity"] for p in probes if p["category"] == cat)
        mix = ", ".join(f"{t} {tiers[t]}" for t in SEVERITIES if tiers[t])
        table.add_row(shown(cat, one_line=True), str(count), str(benign[cat]), mix)
    out.print(table)
