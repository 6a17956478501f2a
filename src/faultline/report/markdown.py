"""report.md: a readable summary of a report, safe to paste into a pull request.

Everything a model wrote (and everything derived from it, such as explanations that quote
it) is escaped: Markdown and HTML syntax render as text and nothing becomes a link.
Numbers are rounded here, and only here; report.json keeps full precision.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from faultline._util.text import excerpt, short_id, visible
from faultline.probes.model import SEVERITIES
from faultline.report.mismatches import scorer_mismatches
from faultline.report.readings import LABELS, geometry_reading

__all__ = ["escape_md", "named_md", "points", "render_markdown"]

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~^$&])")
_LINKISH = re.compile(r"(?i)(://|www\.|@)")


def escape_md(text: str, limit: int = 160) -> str:
    r"""Make untrusted text safe for a Markdown table cell.

    The result is one line cut to ``limit`` characters, with Markdown and HTML syntax
    escaped, links defused and control characters shown as escapes (``\x1b``).
    """
    flat = excerpt(visible(text), limit)
    flat = _MD_SPECIAL.sub(r"\\\1", flat)
    return _LINKISH.sub(lambda m: m.group(1)[0] + "\u200b" + m.group(1)[1:], flat)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def points(delta: float | None) -> str:
    """A change of a rate in percentage points: ``+2.5 pts``, ``0.0 pts``, ``-<0.1 pts``.

    Only no change at all is ``0.0 pts``: a change too small for one decimal keeps its sign
    (``+<0.1 pts``), and float noise (a difference under 1e-12, as two ways of summing the
    same rate leave) is no change, never ``-0.0 pts``.
    """
    if delta is None:
        return "n/a"
    if abs(delta) < 1e-12:
        return "0.0 pts"
    if abs(delta) < 0.0005:
        return f"{'+' if delta > 0 else '-'}<0.1 pts"
    return f"{100 * delta:+.1f} pts"


def _ci(interval: Sequence[float] | None) -> str:
    return "" if not interval else f" (95% CI {100 * interval[0]:.1f}–{100 * interval[1]:.1f}%)"


def _fraction_ci(interval: Sequence[float] | None) -> str:
    """An interval of a fraction, as calibration.md writes it: `` [0.439, 1.000]``."""
    return "" if not interval else f" [{interval[0]:.3f}, {interval[1]:.3f}]"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def render_markdown(report: Mapping[str, Any]) -> str:
    """Render report.md from a report (as plain data: ``Report.to_dict()`` or report.json)."""
    run, m = report["run"], report["aggregate_metrics"]
    name = (run.get("probe_set") or {}).get("name")
    lines = [
        f"# faultline report — {escape_md(str(name), 80)}" if name else "# faultline report",
        "",
    ]
    lines += _meta(report)
    lines += _headline(m)
    if len(m.get("by_model", {})) > 1 or any(k != "unspecified" for k in m.get("by_model", {})):
        lines += _models(m)
    lines += _expectations(m)
    lines += _categories(m)
    lines += _transforms(m)
    lines += _severities(m)
    lines += _failure_modes(m)
    lines += _worst(report)
    lines += _calibration(report)
    lines += _geometry(report.get("observability"), m)
    return "\n".join(lines).rstrip() + "\n"


_HEX = re.compile(r"[0-9a-f]{1,64}")


def named_md(part: Mapping[str, Any] | None) -> str:
    """``name version (sha256 abc…)``, or ``not recorded``."""
    if not part or part.get("name") is None:
        return "not recorded"
    version = f" {escape_md(str(part['version']), 40)}" if part.get("version") else ""
    sha = str(part.get("sha256") or "")[:12]
    digest = (
        f" (sha256 `{sha}`)"
        if _HEX.fullmatch(sha)
        else f" (sha256 {escape_md(sha, 12)})"
        if sha
        else ""
    )
    return f"{escape_md(str(part['name']), 80)}{version}{digest}"


def _meta(report: Mapping[str, Any]) -> list[str]:
    run = report["run"]
    cfg = run["config"]
    weights = ", ".join(f"{k} {v:g}" for k, v in cfg["severity_weights"].items())
    spec = run["target"].get("spec")
    return [
        f"Run `{run['id']}` created {run['created_at']} by faultline {report['tool']['version']}.",
        "",
        f"- Target: {'not recorded' if spec is None else escape_md(str(spec), 120)}",
        f"- Probe set: {named_md(run.get('probe_set'))}",
        f"- Rules: {named_md(run.get('rules'))}",
        f"- Learned signal: {named_md(run.get('learned')) if run.get('learned') else 'off (rules only)'}",
        f"- A case passes when risk < {cfg['pass_threshold']:g}; severity weights: {weights}; seed {cfg['seed']}.",
        *_execution(run.get("execution")),
        "",
        *_warnings(run, "learned"),
    ]


def _warnings(run: Mapping[str, Any], about: str) -> list[str]:
    """The warnings of :func:`scorer_mismatches` that belong where ``about`` says, each a paragraph."""
    found = [m for m in scorer_mismatches(run, named_md) if m.about == about]
    return [line for m in found for line in (f"Warning: {m.text}.", "")]


def _execution(ex: Mapping[str, Any] | None) -> list[str]:
    """How a ``faultline run`` collected the answers."""
    if not ex:
        return []
    usage, cost = ex["usage"], ex.get("cost")
    line = (
        f"- Collected by `faultline run`: {ex['samples']} sample(s) per probe, {ex['requests']} requests, "
        f"{ex['retries']} retries, {ex['errors']} error case(s), {ex['cached']} from the cache, "
        f"{ex['sittings']} sitting(s); tokens {usage['input_tokens']:,} in / {usage['output_tokens']:,} out"
    )
    if cost is not None:
        line += f"; estimated cost {cost['estimate']:.4f}"
    return [line + "."]


def _per_probe(p: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The per-probe row, when probes have more than one sample (hit@K)."""
    if not p or not p["samples"]["max"] or p["samples"]["max"] < 2:
        return []
    k = p["samples"]["max"]
    span = f"{k}" if p["samples"]["min"] == k else f"{p['samples']['min']}–{k}"
    return [
        (
            f"Per-probe pass rate ({span} samples)",
            f"{_pct(p['pass_rate'])}{_ci(p.get('pass_rate_ci95'))} — a probe fails if any sample "
            f"fails: {p['failed']} of {p['passed'] + p['failed']} probes failed (hit@{k}), "
            f"{p['errors']} with errors",
        )
    ]


def _headline(m: Mapping[str, Any]) -> list[str]:
    c, o, ix = m["counts"], m["overall"], m["indices"]
    ratio = o["safe_unsafe_signal_ratio"]
    rows = [
        (
            "Pass rate",
            f"{_pct(o['pass_rate'])}{_ci(o.get('pass_rate_ci95'))} — {c['passed']} of {c['scored']} scored",
        ),
        *_per_probe(m.get("per_probe")),
        ("Severity-weighted pass rate", _pct(o["severity_weighted_pass_rate"])),
        (
            "High-stakes failure rate",
            f"{_pct(o['high_stakes_failure_rate'])} of failures are on high or critical probes",
        ),
        (
            "Coverage",
            f"{_pct(o['coverage'])} — {c['errors']} error case(s) of {c['cases']}, never counted as passes",
        ),
        (
            "Resilience / exposure index",
            f"{_num(ix['resilience_index'])} / {_num(ix['exposure_index'])}",
        ),
        (
            "Risk score",
            f"mean {_num(o['risk_score']['mean'])}, median {_num(o['risk_score']['median'])}, "
            f"P90 {_num(o['risk_score']['p90'])}, max {_num(o['risk_score']['max'])}",
        ),
        ("Fragility spread (std of risk)", _num(ix["fragility_spread"])),
        ("Boundary-language rate", _pct(o["boundary_language_rate"])),
        (
            "Safe:unsafe signals",
            f"{o['safe_signal_total']}:{o['unsafe_signal_total']}"
            + ("" if ratio is None else f" (ratio {ratio:.2f})"),
        ),
    ]
    return ["## Headline", "", *_table(["Metric", "Value"], rows)]


def _models(m: Mapping[str, Any]) -> list[str]:
    rows = []
    for name, s in m["by_model"].items():
        ex = s.get("by_expect", {})
        rows.append(
            (
                escape_md(name, 60),
                str(s["n"]),
                str(s["errors"]),
                _pct(s["pass_rate"]),
                _pct(ex["refuse"]["pass_rate"]) if "refuse" in ex else "–",
                _pct(1 - ex["comply"]["pass_rate"])
                if "comply" in ex and ex["comply"]["pass_rate"] is not None
                else "–",
                _pct(s["severity_weighted_pass_rate"]),
                str(s["high_stakes_failures"]),
            )
        )
    header = [
        "Model",
        "Cases",
        "Errors",
        "Pass rate",
        "Safe on harmful requests",
        "Over-refusal on benign controls",
        "Severity-weighted",
        "High-stakes failures",
    ]
    return ["## By model", "", *_table(header, rows)]


def _expectations(m: Mapping[str, Any]) -> list[str]:
    meaning = {
        "refuse": "harmful requests: a pass is a refusal or a safe answer",
        "comply": "benign controls: a failure is over-refusal",
    }
    rows = [
        (e, str(s["scored"]), _pct(s["pass_rate"]), meaning.get(e, ""))
        for e, s in m.get("by_expect", {}).items()
    ]
    if not rows:
        return []
    return ["## By expectation", "", *_table(["Expect", "Scored", "Pass rate", "Meaning"], rows)]


def _categories(m: Mapping[str, Any]) -> list[str]:
    rows = []
    for entry in m["category_ranking"]:
        s = m["by_category"][entry["category"]]
        rows.append(
            (
                escape_md(entry["category"], 60),
                str(s["n"]),
                _pct(s["pass_rate"]),
                _num(s["risk_mean"]),
                _num(s["risk_median"]),
                _num(s["weighted_risk_mean"]),
                str(s["critical_failures"]),
                str(s["high_failures"]),
                _pct(s["boundary_rate"]),
            )
        )
    errors = m.get("errors_by_category") or {}
    rows += [
        (escape_md(c, 60), "0", _all_errored(n), "–", "–", "–", "–", "–", "–")
        for c, n in sorted(errors.items())
        if c not in m["by_category"]
    ]
    header = [
        "Category (riskiest first)",
        "n",
        "Pass rate",
        "Mean risk",
        "Median risk",
        "Mean weighted risk",
        "Critical fails",
        "High fails",
        "Boundary rate",
    ]
    return ["## By category", "", *_table(header, rows)]


def _all_errored(n: int) -> str:
    """The pass rate of a category or tier whose every case errored: none, and why."""
    return f"– ({n} error{'s' * (n != 1)}, nothing scored)"


def _transforms(m: Mapping[str, Any]) -> list[str]:
    """Pass rates per attack transform, against the originals (``none``)."""
    by_transform = m.get("by_transform")
    if not by_transform:
        return []
    base = (by_transform.get("none") or {}).get("pass_rate")
    rows = []
    for name, s in by_transform.items():
        rate = s["pass_rate"]
        delta = None if name == "none" or base is None or rate is None else rate - base
        change = "–" if delta is None else points(delta)
        rows.append(
            (
                escape_md(name, 60),
                str(s["n"]),
                str(s["errors"]),
                f"{_pct(rate)}{_ci(s.get('pass_rate_ci95'))}",
                change,
                _weakest(s["by_category"]),
            )
        )
    header = ["Transform", "n", "Errors", "Pass rate", "Change vs none", "Weakest category"]
    return [
        "## By transform",
        "",
        "The same probes, disguised by each attack transform (`none`: the originals). A pass "
        "rate below the originals' shows the disguise gets past the model.",
        "",
        *_table(header, rows),
    ]


def _weakest(by_category: Mapping[str, Any]) -> str:
    """The category with the lowest pass rate below 100% (ties: name), with that rate."""
    rated = [(r, c) for c, s in by_category.items() if (r := s["pass_rate"]) is not None and r < 1]
    if not rated:
        return "–"
    rate, name = min(rated)
    return f"{escape_md(name, 60)} ({_pct(rate)})"


def _severities(m: Mapping[str, Any]) -> list[str]:
    errors = m.get("errors_by_severity") or {}
    rows = [
        (t, str(s["n"]), str(s["passed"]), str(s["failed"]), _pct(s["pass_rate"]))
        if (s := m["by_severity"].get(t))
        else (t, "0", "0", "0", _all_errored(errors[t]))
        for t in SEVERITIES
        if t in m["by_severity"] or t in errors
    ]
    return ["## By severity", "", *_table(["Severity", "n", "Passed", "Failed", "Pass rate"], rows)]


def _failure_modes(m: Mapping[str, Any]) -> list[str]:
    hist = m["failure_mode_histogram"]
    if not hist:
        return ["## Failure modes", "", "No failure modes were detected.", ""]
    rows = [(escape_md(k, 60), str(v)) for k, v in hist.items()]
    return ["## Failure modes", "", *_table(["Detected failure mode", "Cases"], rows)]


def _worst(report: Mapping[str, Any]) -> list[str]:
    worst = report["aggregate_metrics"]["worst_cases"]
    if not worst:
        return []
    by_id = {
        c["case_id"]: c for c in report["cases"] if c["case_id"] in {w["case_id"] for w in worst}
    }
    rows = []
    for i, w in enumerate(worst, 1):
        case = by_id.get(w["case_id"], {})
        rows.append(
            (
                str(i),
                escape_md(short_id(w["case_id"]), 60),  # its end tells cases apart
                escape_md(w["category"], 40),
                w["severity"],
                str(case.get("status", "")),
                _num(w["risk_score"]),
                _num(w["weighted_risk"]),
                escape_md(case.get("explanation", ""), 220),
            )
        )
    header = ["#", "Case", "Category", "Severity", "Verdict", "Risk", "Weighted", "Why"]
    return ["## Worst cases", "", *_table(header, rows)]


def _calibration(report: Mapping[str, Any]) -> list[str]:
    """Each rule that matched in this run, with its precision measured by calibration."""
    run = report["run"]
    cal = run.get("calibration")
    if not cal:
        return []
    fired: dict[tuple[str, str], int] = {}
    if "rule_counts" in report:
        fired = {(kind, label): n for kind, label, n in report["rule_counts"]}
    else:  # a report.json read back: every case is there
        for case in report["cases"]:
            for kind in ("boundary", "unsafe", "safe"):
                for label in case.get(f"matched_{kind}_patterns", ()):
                    fired[kind, label] = fired.get((kind, label), 0) + 1
    measured = {(str(r["kind"]), str(r["label"])): r for r in cal["rules"]}
    rows = []
    for (kind, label), count in sorted(fired.items(), key=lambda kv: (-kv[1], kv[0])):
        r = measured.get((kind, label))
        rows.append(
            (
                escape_md(label, 60),
                escape_md(kind, 20),
                str(count),
                "not measured"
                if r is None
                else f"{_num(r['precision'])}{_fraction_ci(r.get('precision_ci95'))}",
                "–" if r is None else escape_md(str(r["fired"]), 20),
            )
        )
    lines = [
        "## Rule precision (calibration)",
        "",
        f"Measured by `faultline calibrate` on {escape_md(str(cal.get('rows') or 'unknown'), 20)} "
        f"labelled rows ({escape_md(str(cal['file']), 80)}, sha256 {escape_md(str(cal['sha256'])[:12], 12)}): "
        "how often each rule that matched in this run agreed with the human labels when it fired.",
        "",
    ]
    lines += _warnings(run, "calibration")
    header = ["Rule", "Kind", "Cases here", "Precision [95% CI]", "Fired in calibration"]
    return lines + _table(header, rows)


def _geometry(obs: Mapping[str, Any] | None, m: Mapping[str, Any]) -> list[str]:
    if obs is None:
        return ["## Failure geometry", "", "Too few scored cases for the failure geometry.", ""]
    mi, nmi = obs["mutual_information"], obs["normalized_mutual_information"]
    reading = geometry_reading(obs, m)
    chosen = " (k chosen by silhouette)" if reading.n_clusters > 1 else ""
    lines = [
        "## Failure geometry",
        "",
        f"{obs['n_cases']} scored cases, embedded with {obs['embedding']['method']} "
        f"({obs['embedding']['dimensions']} dimensions) and grouped into {reading.clusters('KMeans ')}"
        f"{chosen}. Mutual information between the clusters and each label:",
        "",
    ]
    rows = [
        (name, f"{mi[name]:.3f}", f"{nmi[name]:.3f}", reading.readings[name]) for name in LABELS
    ]
    lines += _table(["Label", "MI (nats)", "Normalised", "Reading"], rows)
    lines += [
        reading.conclusion(lambda name: f"**{name}**")
        + " These are exploratory statistics, not evidence of causal structure.",
        "",
    ]
    cluster_rows = [
        (
            str(c["id"]),
            str(c["size"]),
            _pct(c["fail_rate"]),
            _num(c["risk_mean"]),
            escape_md(c["dominant_category"], 40),
            escape_md(", ".join(c["top_terms"]), 120),
        )
        for c in obs["clusters"]
    ]
    lines += _table(
        ["Cluster", "Size", "Fail rate", "Mean risk", "Dominant category", "Top terms"],
        cluster_rows,
    )
    return lines
