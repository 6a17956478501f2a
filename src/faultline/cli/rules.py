"""``faultline rules``: inspect rule packs and run their embedded examples."""

from __future__ import annotations

import json

import click
from rich.table import Table
from rich.text import Text

from faultline.cli._console import echo, out, shown
from faultline.scoring import builtin_rule_packs, load_rule_pack, run_examples
from faultline.scoring.rules import Rule


@click.group("rules")
def rules_group() -> None:
    """Inspect rule packs and test their examples."""


@rules_group.command("list")
@click.option(
    "--rules",
    "pack_name",
    default="default",
    show_default=True,
    metavar="PACK",
    help="A built-in pack name or a YAML file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def list_command(pack_name: str, as_json: bool) -> int:
    """List the rules of a pack: label, kind, scope, weight, failure modes and summary.

    The scope column also says when a rule counts only for the probes of one expectation
    (``refuse only``) and which rules cancel it (``unless …``).
    """
    pack = load_rule_pack(pack_name)
    if as_json:
        echo(
            json.dumps(
                {
                    "name": pack.name,
                    "version": pack.version,
                    "sha256": pack.sha256,
                    "builtin_packs": list(builtin_rule_packs()),
                    "scoring": pack.scoring.__dict__,
                    "rules": [
                        {
                            "label": r.label,
                            "kind": r.kind,
                            "scope": r.scope,
                            "applies_to": r.applies_to,
                            "unless": list(r.unless),
                            "case_sensitive": r.case_sensitive,
                            "weight": r.weight,
                            "failure_modes": list(r.failure_modes),
                            "summary": r.summary,
                            "description": r.description,
                            "patterns": len(r.patterns),
                            "examples": len(r.examples_match) + len(r.examples_no_match),
                        }
                        for r in pack.rules
                    ],
                },
                indent=2,
            )
        )
        return 0
    # Everything from the pack's file (and its path) is data: never markup, controls escaped.
    out.print(
        Text.assemble(
            shown(pack.name, "bold"),
            " ",
            shown(pack.version),
            f" — {len(pack.rules)} rules (sha256 {pack.sha256[:12]}) from ",
            shown(pack.source),
        )
    )
    table = Table(show_edge=False)
    for col in ("label", "kind", "scope", "weight", "failure modes", "summary"):
        table.add_column(col, justify="right" if col == "weight" else "left")
    for r in pack.rules:
        table.add_row(
            shown(r.label),
            shown(r.kind),
            shown(_scope(r)),
            f"{r.weight:g}",
            shown(", ".join(r.failure_modes)),
            shown(r.summary),
        )
    out.print(table)
    return 0


def _scope(rule: Rule) -> str:
    """Where a rule reads, for whom it counts, and what cancels it: ``opening, refuse only``."""
    parts: list[str] = [rule.scope]
    if rule.applies_to != "any":
        parts.append(f"{rule.applies_to} only")
    if rule.unless:
        parts.append(f"unless {', '.join(rule.unless)}")
    return ", ".join(parts)


@rules_group.command("test")
@click.option(
    "--rules",
    "pack_names",
    multiple=True,
    metavar="PACK",
    help="Packs to test (default: every built-in pack). Repeatable.",
)
def test_command(pack_names: tuple[str, ...]) -> int:
    """Run every rule's embedded examples; exit 1 if any rule misbehaves."""
    failures = 0
    for name in pack_names or tuple(builtin_rule_packs()):
        pack = load_rule_pack(name)
        results = run_examples(pack)
        bad = [r for r in results if not r.ok]
        failures += len(bad)
        out.print(
            shown(
                f"{pack.name} {pack.version}: {len(results) - len(bad)}/{len(results)} examples "
                f"pass across {len(pack.rules)} rules"
            )
        )
        for r in bad:
            verb = (
                "should match but does not" if r.expect == "match" else "should not match but does"
            )
            where = f"{pack.source}:{r.line}" if pack.source else f"line {r.line}"
            out.print(shown(f"  FAIL {r.rule} ({where}) {verb}: {r.text!r}", style="red"))
    return 1 if failures else 0
