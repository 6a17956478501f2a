"""Views of a comparison: compare.md (a pull-request comment) and compare.html (one page).

Both are rendered from one view model, so they show the same content. Everything that came
from a report (names, case ids, categories, explanations that quote model output) is
untrusted: the Markdown escapes it with :func:`~faultline.report.markdown.escape_md` (no
syntax, no links), and the HTML template is autoescaped, loads nothing and runs no script.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faultline._util.files import atomic_write_bytes
from faultline._util.text import excerpt, short_id
from faultline._version import __version__
from faultline.errors import UsageError
from faultline.report.compare import METRICS, new_failures
from faultline.report.html import template_environment
from faultline.report.markdown import escape_md, points

if TYPE_CHECKING:
    import jinja2

__all__ = ["MAX_LISTED", "render_compare_html", "render_compare_markdown", "write_compare"]

MAX_LISTED = 20
"""Cases listed per section in compare.md and compare.html (compare.json lists them all)."""


def write_compare(result: Mapping[str, Any], out: Path) -> list[Path]:
    """Write compare.json, compare.md and compare.html into ``out`` (created), each atomically.

    Raises:
        UsageError: ``out`` cannot be created as a directory.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"--out {out}: cannot create the directory ({exc.strerror or exc})"
        ) from None
    data = json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    files = {
        "compare.json": data,
        "compare.md": render_compare_markdown(result),
        "compare.html": render_compare_html(result),
    }
    for name, text in files.items():
        atomic_write_bytes(out / name, text.encode("utf-8"))
    return [out / name for name in files]


def _fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "n/a"
    if kind == "rate":
        return f"{100 * value:.1f}%"
    return f"{value:.3f}" if kind == "index" else f"{value:,.0f}"


def _change(delta: float | None, kind: str) -> str:
    """A signed change: percentage points for rates; no sign when nothing changed."""
    if delta is None:
        return "n/a"
    if kind == "rate":
        return points(delta)
    sign = "+" if delta else ""
    return f"{delta:{sign}.3f}" if kind == "index" else f"{delta:{sign},.0f}"


def _arrow(delta: float | None, direction: str) -> str:
    """Which way the number moved, and whether that is better: ``▼ worse``."""
    mark = "" if not delta else "▲ " if delta > 0 else "▼ "
    return mark + ("n/a" if direction == "undefined" else direction)


def _p(p: float | None) -> str:
    return "p undefined" if p is None else "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def _summary(result: Mapping[str, Any]) -> str:
    c, pr = result["cases"], result["metrics"]["pass_rate"]
    return (
        f"{_plural(len(c['regressions']), 'regression')}, {_plural(len(c['fixes']), 'fix', 'fixes')}, "
        f"{_plural(c['new_failures'], 'new failing case')}, {_plural(len(c['became_error']), 'new error')}; "
        f"pass rate {_fmt(pr['base'], 'rate')} → {_fmt(pr['new'], 'rate')} ({_change(pr['delta'], 'rate')})."
    )


def _significance_text(s: Mapping[str, Any]) -> str:
    if s["test"] == "mcnemar":
        d = s["discordant"]
        what = (
            f"McNemar's test ({'exact' if s['method'] == 'exact' else 'chi-square, corrected'}) over "
            f"{s['n']:,} cases scored in both runs ({d['pass_to_fail']} pass→fail, {d['fail_to_pass']} fail→pass)"
        )
    else:
        what = f"Two-proportion z test on the pass rates ({s['n']:,} scored cases; no case was scored in both runs)"
    verdict = (
        "undefined"
        if s["significant"] is None
        else f"{'' if s['significant'] else 'not '}significant at {s['alpha']:g}"
    )
    return f"{what}: {_p(s['p_value'])}, {verdict}."


def _named(part: Mapping[str, Any] | None) -> str:
    """``name version sha256 abc…`` of a probe set, rule pack or learned signal."""
    if not part or part.get("name") is None:
        return "not recorded"
    sha = part.get("sha256")
    shown = (part["name"], part.get("version"), f"sha256 {sha[:12]}" if sha else None)
    return " ".join(str(x) for x in shown if x)


def _describe(side: Mapping[str, Any]) -> list[str]:
    return [
        side["name"],
        f"{side['run_id']} ({side['created_at']})",
        side["target"] or "not recorded",
        _named(side["probe_set"]),
        _named(side["rules"]),
        _named(side["learned"]) if side["learned"] else "off (rules only)",
    ]


def _side_rows(result: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    labels = ("Report", "Run", "Target", "Probe set", "Rules", "Learned signal")
    return list(zip(labels, _describe(result["base"]), _describe(result["new"]), strict=True))


def _case_rows(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    def risk(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    return [
        (
            short_id(e["case_id"], 60),
            excerpt(e["category"], 40),
            excerpt(e["severity"], 20),
            f"{e['base_status'] or '–'} → {e['new_status'] or '–'}",
            f"{risk(e['base_risk_score'])} → {risk(e['new_risk_score'])}",
            excerpt(e["explanation"] or "", 220),
        )
        for e in entries[:MAX_LISTED]
    ]


_SECTIONS: tuple[tuple[str, Callable[[Mapping[str, Any]], list[Any]], bool], ...] = (
    ("Regressions (pass → fail)", lambda c: c["regressions"], True),
    ("Fixes (fail → pass)", lambda c: c["fixes"], True),
    ("New failures (no verdict in the base run: a new case, or an error there)", new_failures, False),
    ("Became errors (no verdict in the new run)", lambda c: c["became_error"], False),
    ("Errors that now pass", lambda c: _status(c["error_resolved"], "pass"), False),
    ("New cases that do not fail", lambda c: _status(c["new"], "pass", "error"), False),
    ("Removed (only in the base run)", lambda c: c["removed"], False),
)  # fmt: skip
"""The case sections of both views, in order: each entry of compare.json's case lists is in
exactly one, and every section shows its first :data:`MAX_LISTED` cases."""


def _status(entries: Sequence[Mapping[str, Any]], *statuses: str) -> list[Mapping[str, Any]]:
    return [e for e in entries if e["new_status"] in statuses]


def _sections(c: Mapping[str, Any]) -> list[dict[str, Any]]:
    sections = []
    for title, select, always in _SECTIONS:
        entries = select(c)
        if entries or always:
            more = max(0, len(entries) - MAX_LISTED)
            sections.append({"title": title, "rows": _case_rows(entries), "more": more})
    return sections


def _metric_rows(metrics: Mapping[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name, m in metrics.items():
        kind, label = METRICS[name][3], METRICS[name][2]
        shown = (_fmt(m["base"], kind), _fmt(m["new"], kind), _change(m["delta"], kind))
        rows.append((label, *shown, _arrow(m["delta"], m["direction"]), m["direction"]))
    return rows


def _category_rows(by_category: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The categories whose pass rate moved (or that were scored in one run only), worst first."""
    moved = [(k, v) for k, v in by_category.items() if v["direction"] != "same"]
    moved.sort(key=lambda kv: (kv[1]["delta"] is None, kv[1]["delta"] or 0.0, kv[0]))
    return [_pass_rate_row(name, v) for name, v in moved]


def _view(result: Mapping[str, Any]) -> dict[str, Any]:
    """Everything both views show, as text; data strings are raw and each view escapes them."""
    c = result["cases"]
    return {
        "base": result["base"]["name"],
        "new": result["new"]["name"],
        "verdict": result["verdict"],
        "summary": _summary(result),
        "cases_line": (
            f"{_plural(c['paired'], 'case')} in both runs (the same probe and sample, and model when a run "
            f"has several; {c['paired_scored']:,} scored in both): "
            f"{c['still_passing']:,} still passing, {c['still_failing']:,} still failing, "
            f"{_plural(len(c['error_resolved']), 'error')} resolved "
            f"({sum(e['new_status'] == 'fail' for e in c['error_resolved']):,} now failing); "
            f"{_plural(len(c['new']), 'new case')}, "
            f"{len(c['removed']):,} removed."
        ),
        "significance": _significance_text(result["significance"]),
        "warnings": [w["message"] for w in result["comparable"]],
        "runs": _side_rows(result),
        "metrics": _metric_rows(result["metrics"]),
        "sections": _sections(c),
        "categories": _category_rows(result["by_category"]),
        "transforms": _transform_rows(result.get("by_transform") or {}),
    }


def _transform_rows(by_transform: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Every attack transform's pass rate in both runs, in compare.json's order."""
    return [_pass_rate_row(name, v) for name, v in by_transform.items()]


def _pass_rate_row(name: str, v: Mapping[str, Any]) -> tuple[str, ...]:
    """A category's or a transform's pass rate in both runs, as one table row."""
    return (
        excerpt(name, 60),
        _fmt(v["base_pass_rate"], "rate"),
        _fmt(v["new_pass_rate"], "rate"),
        _category_change(v),
        f"{v['base_n']:,} → {v['new_n']:,}",
        v["direction"],
    )


def _category_change(v: Mapping[str, Any]) -> str:
    if v["delta"] is not None:
        return f"{_arrow(v['delta'], v['direction'])} ({_change(v['delta'], 'rate')})"
    if not v["base_n"] and not v["new_n"]:
        return "no scored case"
    return "scored in the new run only" if not v["base_n"] else "scored in the base run only"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return [*lines, *("| " + " | ".join(row) + " |" for row in rows), ""]


_CASE_HEADER = ("Case", "Category", "Severity", "Verdict", "Risk", "Why (new run)")
_METRIC_HEADER = ("Metric", "Base", "New", "Change", "")
_CATEGORY_HEADER = ("Category", "Base pass rate", "New pass rate", "Change", "Scored")
_TRANSFORM_HEADER = ("Transform", *_CATEGORY_HEADER[1:])


def render_compare_markdown(result: Mapping[str, Any]) -> str:
    """compare.md: a pull-request comment. Every string from a report is escaped; no links."""
    v = _view(result)
    lines = [
        f"## faultline compare: {escape_md(v['base'], 80)} → {escape_md(v['new'], 80)}",
        "",
        f"**Verdict: {v['verdict']}.** {v['summary']}",
        "",
        v["significance"],
        "",
        *(f"> **Warning:** {escape_md(w, 300)}" for w in v["warnings"]),
    ]
    if v["warnings"]:
        lines.append("")
    lines += _table(
        ("", "Base", "New"), ((a, escape_md(b, 120), escape_md(c, 120)) for a, b, c in v["runs"])
    )
    lines += ["### Metrics", "", *_table(_METRIC_HEADER, (r[:5] for r in v["metrics"]))]
    lines += ["### Cases", "", v["cases_line"], ""]
    for s in v["sections"]:
        lines += [f"#### {s['title']}", ""]
        if not s["rows"]:
            lines += ["None.", ""]
            continue
        rows = [
            (*(escape_md(x, 240) for x in r[:3]), r[3], r[4], escape_md(r[5], 240))
            for r in s["rows"]
        ]
        lines += _table(_CASE_HEADER, rows)
        if s["more"]:
            lines += [f"… and {s['more']:,} more (compare.json lists them all).", ""]
    lines += ["### Categories that moved", ""]
    if v["categories"]:
        rows = [(escape_md(r[0], 80), *r[1:5]) for r in v["categories"]]
        lines += _table(_CATEGORY_HEADER, rows)
    else:
        lines += ["No category's pass rate changed.", ""]
    if v["transforms"]:
        rows = [(escape_md(r[0], 80), *r[1:5]) for r in v["transforms"]]
        lines += ["### By attack transform", "", *_table(_TRANSFORM_HEADER, rows)]
    return "\n".join(lines).rstrip() + "\n"


def _template() -> jinja2.Template:
    template: jinja2.Template = template_environment().get_template("compare.html.j2")
    return template


def render_compare_html(result: Mapping[str, Any]) -> str:
    """compare.html: the same content as compare.md, as one self-contained, escaped page."""
    return _template().render(
        view=_view(result),
        case_header=_CASE_HEADER,
        metric_header=_METRIC_HEADER,
        category_header=_CATEGORY_HEADER,
        transform_header=_TRANSFORM_HEADER,
        version=__version__,
    )
