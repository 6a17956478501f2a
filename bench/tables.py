"""Render bench/out/results.json as the Markdown tables of docs/benchmarks.md.

python bench/tables.py [bench/out/results.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MIB = 2**20


def _rate(value: float) -> str:
    return f"{value:,.0f} responses/s"


def _cold(base: dict[str, Any], name: str) -> str:
    cold = base.get(f"{name}_cold")
    return f"{cold['responses_per_s']:,.0f}" if cold else "n/a"


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "n/a"


def _mib(value: float) -> str:
    return f"{value / MIB:,.0f} MiB"


def _met(flag: bool | None) -> str:
    return "n/a" if flag is None else ("**yes**" if flag else "**no**")


def _measured(git: dict[str, Any]) -> str:
    commit = f"`{str(git.get('commit'))[:12]}`"
    digest = f"sha256 of the package files `{str(git.get('package_sha256'))[:16]}`"
    if git.get("package_sha256") not in (None, git.get("src_sha256")):
        return f"imported from `{git.get('package')}` (not this checkout), {digest}"
    dirty = f" plus local changes to {', '.join(git['dirty'])}" if git.get("dirty") else ""
    return f"commit {commit}{dirty}; {digest}"


def machine(results: dict[str, Any]) -> str:
    m = results["machine"]
    git = results.get("git", {})
    return (
        "\n".join(
            [
                f"- CPU: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable)",
                f"- RAM: {m['ram_bytes'] / 2**30:.1f} GiB",
                f"- OS: {m['os']} (kernel {m['kernel']}); Python {m['python']}",
                f"- Load average at start: {', '.join(f'{x:.2f}' for x in m['load_average'])}; at "
                f"end: {', '.join(f'{x:.2f}' for x in m.get('load_average_end', []))}",
                f"- faultline: {results['config'].get('label') or _measured(git)}",
                f"- Run at {results['created_at']}; whole benchmark {results['bench_seconds'] / 60:.0f} min",
            ]
        )
        + "\n"
    )


def headline(results: dict[str, Any]) -> str:
    rows = ["| measure | result | goal | met |", "| --- | --- | --- | --- |"]
    e2e, base, speed = results.get("end_to_end"), results.get("baseline"), results["speedups"]
    if e2e:
        best = e2e["best"]
        others = ", ".join(f"{r['seconds']:.1f} s" for r in e2e["runs"])
        rows.append(
            f"| end to end, `faultline score`, {e2e['responses']:,} responses "
            f"(best of {len(e2e['runs'])}: {others}) | {_rate(best['responses_per_s'])} "
            f"({best['seconds']:.1f} s) | ≥ {e2e['goal_responses_per_s']:,} responses/s on 2 "
            f"cores | {_met(e2e['goal_met'])} |"
        )
        rows.append(
            f"| end to end, peak memory (largest process / summed tree) | "
            f"{_mib(best['maxrss_bytes'])} / {_mib(best['tree_rss_peak_bytes'])} | | |"
        )
        rows.append(
            f"| end to end, CPU seconds used by faultline / by other processes (of "
            f"{best['seconds'] * results['machine']['usable_cores']:.0f} available) | "
            f"{best['tree_cpu_seconds']:.0f} / {best.get('other_cpu_seconds', 0):.0f} "
            f"(stolen by the hypervisor: {best.get('steal_cpu_seconds', 0):.0f}) | | |"
        )
    if base:
        n = f"{base['sample']:,}"
        rows.append(
            f"| naive loop of Python `re.search`, {base['naive_compiled']} patterns, "
            f"{n} responses, 1 process | {_rate(base['naive']['responses_per_s'])} | | |"
        )
        rows.append(
            f"| faultline matcher (`Matcher.match`), same sample, 1 process, warm (cold) | "
            f"{_rate(base['matcher']['responses_per_s'])} ({_cold(base, 'matcher')}) | | |"
        )
        if "matcher_batch" in base:
            rows.append(
                f"| faultline matcher (`Matcher.match_batch`, {base['matcher_batch_size']:,} "
                f"texts a call), same sample, 1 process, warm (cold) | "
                f"{_rate(base['matcher_batch']['responses_per_s'])} "
                f"({_cold(base, 'matcher_batch')}) | | |"
            )
        rows.append(
            f"| faultline scorer (`Scorer.score_batch`), same sample, 1 process, warm (cold) | "
            f"{_rate(base['scorer']['responses_per_s'])} ({_cold(base, 'scorer')}) | | |"
        )
    runner = results.get("runner")
    if runner:
        rows.append(
            f"| runner overhead, `faultline run` against a zero-latency local server, "
            f"{runner['requests']:,} requests, concurrency {runner['concurrency']} | "
            f"{runner['requests_per_s']:,.0f} requests/s | ≥ {runner['goal_requests_per_s']:,} "
            f"requests/s | {_met(runner['goal_met'])} |"
        )
    if "end_to_end_vs_naive" in speed:
        rows.append(
            f"| speed-up, end to end vs naive loop | "
            f"{speed['end_to_end_vs_naive']:.1f}× | ≥ {speed['goal']}× | "
            f"{_met(speed.get('goal_met'))} |"
        )
    if speed:
        rows.append(
            f"| speed-up, matcher (the faster call) vs naive loop (both 1 process) | "
            f"{speed['matcher_vs_naive']:.1f}× | | |"
        )
    return "\n".join(rows) + "\n"


def observability(results: dict[str, Any]) -> str:
    obs = results.get("observability")
    if not obs:
        return ""
    rows = [
        "| cases | scored | distinct points | clusters | time | peak memory of the step "
        "| memory before (the cases) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows.extend(
        f"| {r['cases']:,} | {r['scored']:,} | {_count(r.get('documents'))} | {r['n_clusters']} | "
        f"{r['seconds']:.1f} s | {_mib(r['peak_rss_bytes'])} | {_mib(r['rss_before_bytes'])} |"
        for r in obs["sizes"]
    )
    return "\n".join(rows) + "\n"


def _size(value: int) -> str:
    return f"{value / 2**30:,.2f} GiB" if value >= 2**30 else f"{value / 2**20:,.1f} MiB"


def _anon(run: dict[str, Any]) -> str:
    return _mib(run["tree_anon_peak_bytes"]) if "tree_anon_peak_bytes" in run else "n/a"


def scale(results: dict[str, Any]) -> str:
    """The scale step: one row per size and engine, then the Dask vs local check."""
    data = results.get("scale")
    if not data:
        return ""
    rows = [
        "| responses | engine | wall time | responses/s | peak memory of the tree: resident "
        "(anonymous) "
        "| CPU s, faultline / others | report.json | cases.parquet | time goal | memory goal |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    goal_mib = data["goal_peak_bytes"] / MIB
    for size in data["sizes"]:
        for r in size["runs"]:
            files = r["files_bytes"]
            rows.append(
                f"| {r['responses']:,} | {r['engine']}, {r['workers']} workers | "
                f"{r['seconds']:.1f} s | {r['responses_per_s']:,.0f} | "
                f"{_mib(r['tree_rss_peak_bytes'])} ({_anon(r)}) | "
                f"{r['tree_cpu_seconds']:.0f} / {r['other_cpu_seconds']:.0f} | "
                f"{_size(files.get('report.json', 0))} | "
                f"{_size(files['cases.parquet']) if 'cases.parquet' in files else 'none'} | "
                f"≤ {r['goal_seconds']:,.{0 if r['goal_seconds'] >= 10 else 1}f} s: "
                f"{_met(r['time_goal_met'])} | "
                f"≤ {goal_mib:,.0f} MiB: {_met(r['memory_goal_met'])} |"
            )
    for check in data["dask_vs_local"]:
        report, cases = check["report_json"], check["cases_parquet"]
        rows.append(
            f"\nDask vs local at {check['responses']:,} responses: report.json "
            f"{'identical' if report['identical_bytes'] else 'different'} apart from `run.id` and "
            f"`run.created_at`; cases.parquet "
            f"{'identical' if cases['identical_bytes'] else 'different'} byte for byte."
        )
    return "\n".join(rows) + "\n"


def render(results: dict[str, Any]) -> str:
    parts = ["### Machine\n", machine(results)]
    if set(results["config"].get("only", [])) != {"scale"}:
        parts += ["\n### Throughput\n", headline(results)]
    base = results.get("baseline")
    if base:
        skipped = len(base["naive_skipped"])
        parts.append(
            f"\nThe naive loop and the matcher found the same rules in {base['same_rules']:,} "
            f"of {base['sample']:,} responses (same rules and spans: "
            f"{base['same_rules_and_spans']:,}); Python `re` rejected {skipped} of "
            f"{base['patterns']} patterns.\n"
        )
    if results.get("observability"):
        parts += ["\n### Observability\n", observability(results)]
    if results.get("scale"):
        parts += ["\n### Scale\n", scale(results)]
    return "".join(parts)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "out/results.json"
    print(render(json.loads(path.read_text())))


if __name__ == "__main__":
    main()
