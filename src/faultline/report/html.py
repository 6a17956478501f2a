"""report.html: one self-contained page, readable offline from ``file://``.

The page is a Jinja2 template (autoescaped) with the report's tables rendered on the server
side, and the cases embedded once as JSON for the interactive parts: the failure-geometry
scatter (plotly.js, vendored in ``assets/``, MIT), the searchable case table and the case
view. Model outputs are hostile, so:

- every string in the HTML is escaped by Jinja's autoescape, and its control characters
  (terminal escapes, NUL, the bidirectional overrides that make text read in another order
  than it is written) are shown as escapes, on the server and by the page's script alike;
- the embedded JSON has ``<``, ``>``, ``&`` and the two JavaScript line separators escaped,
  so no string can close the ``<script>`` element that holds it;
- the page's script builds the case table and the case view with ``textContent`` only,
  never ``innerHTML`` with data;
- a Content-Security-Policy allows no network access at all (``default-src 'none'``) and
  no script but the page's own two, by hash, so even a rendering bug could neither run an
  injected script nor make the page call out.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from faultline._util.files import atomic_write_bytes
from faultline._util.text import visible
from faultline.probes.model import SEVERITIES
from faultline.report.markdown import points
from faultline.report.model import CaseLines, Report
from faultline.report.readings import LABELS, geometry_reading
from faultline.report.sampling import StratifiedSampler

__all__ = [
    "MAX_HTML_CASES",
    "MAX_RESPONSE_CHARS",
    "embed_json",
    "render_html",
    "template_environment",
    "write_html",
]

MAX_HTML_CASES = 5_000
"""The most cases embedded in the page; beyond, the riskiest are kept (all are in report.json)."""

MAX_RESPONSE_CHARS = 20_000
"""Responses longer than this are cut in the page (report.json keeps them whole)."""

_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


class _Stratum(msgspec.Struct):
    """What sampling the cases of a large report needs of each: decoded alone, fast."""

    category: str
    status: str


def render_html(report: Report | Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page.

    Args:
        report: A :class:`Report`, or a report.json read as plain data.
    """
    data = _plain(report)
    cases, total = _chosen_cases(report)
    m = data["aggregate_metrics"]
    errors = _errors_by(m, cases if len(cases) == total else None)
    # Every category and tier of the run, those whose every case errored included: they have
    # no row in by_category or by_severity (which count scored cases) but their errors are
    # cases of the table, which the filters must find.
    categories = sorted({*m["counts"]["categories"], *errors["category"]})
    tiers = [t for t in SEVERITIES if t in m["by_severity"] or t in errors["severity"]]
    payload = {
        "cases": [_view(c) for c in cases],
        "total_cases": total,
        "clusters": [c["id"] for c in (data.get("observability") or {}).get("clusters", [])],
        # The category filter's options are numbered: a category's text may hold characters
        # an option's value cannot (control characters shown as escapes, a CR, runs of spaces).
        "categories": categories,
    }
    obs = data.get("observability")
    template = template_environment().get_template("report.html.j2")
    page: str = template.render(
        report=data,
        m=m,
        categories=categories,
        tiers=tiers,
        errors=errors,
        errored_categories=[c for c in sorted(errors["category"]) if c not in m["by_category"]],
        obs=obs,
        geo=None if obs is None else geometry_reading(obs, data["aggregate_metrics"]),
        weights_note=_weights_note(data["run"]["config"]["severity_weights"]),
        labels=LABELS,
        shown=len(cases),
        total=total,
        data_json=embed_json(payload),
        plotly_js=_asset("plotly-basic.min.js"),
        report_js=_asset("report.js"),
        script_hashes=" ".join(
            _csp_hash(_asset(name)) for name in ("plotly-basic.min.js", "report.js")
        ),
        report_css=_asset("report.css"),
    )
    return page


def _errors_by(m: Mapping[str, Any], cases: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Error cases per category and per severity tier.

    report.json has them in ``aggregate_metrics`` (``errors_by_category``,
    ``errors_by_severity``); a report written before they were added has not, and then they
    are counted from the cases when the page embeds every case (else there is nothing to
    count them from).
    """
    if m.get("errors_by_category") is not None:
        return {
            "category": m["errors_by_category"],
            "severity": m.get("errors_by_severity") or {},
        }
    failed = [c for c in cases or [] if c["status"] == "error"]
    return {
        "category": dict(Counter(c["category"] for c in failed)),
        "severity": dict(Counter(c["severity"] for c in failed)),
    }


def _weights_note(weights: Mapping[str, float]) -> str:
    """What the run's severity weights make of a failure: the words under the headline's card.

    The weights are the run's (``run.config.severity_weights``), never the defaults: with
    ``low=1,critical=10`` a critical failure costs 10 times a low one, with equal weights the
    same as one.
    """
    tiers = [t for t in SEVERITIES if t in weights]
    listed = ", ".join(f"{t} {weights[t]:g}" for t in tiers)
    low, critical = weights.get("low"), weights.get("critical")
    if not low or critical is None:
        return f"severity weights {listed}"
    ratio = critical / low
    if ratio == 1:
        cost = "a critical failure costs the same as a low one"
    else:
        cost = f"a critical failure costs {ratio:.3g}× a low one"
    return f"{cost} (weights {listed})"


def write_html(report: Report | Mapping[str, Any], path: Path) -> None:
    """Write report.html atomically."""
    atomic_write_bytes(path, render_html(report).encode("utf-8"))


def embed_json(value: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` survive."""
    data = msgspec.json.encode(value)
    for raw, escaped in _ESCAPES:  # bytes.replace runs at memchr speed on large pages
        data = data.replace(raw, escaped)
    return data.decode("utf-8")


def _plain(report: Report | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(report, Report):
        plain = {
            **report.header,
            "aggregate_metrics": report.aggregate_metrics,
            "observability": report.observability,
        }
        if report.cases_file is not None:
            plain["cases_file"] = report.cases_file.describe()
        return plain
    return {k: v for k, v in report.items() if k not in {"cases", "cases_sample", "worst_cases"}}


def _chosen_cases(report: Report | Mapping[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The cases to embed, and how many the report has.

    Up to :data:`MAX_HTML_CASES`, every case. Above, a seeded sample stratified by category
    and outcome (:mod:`faultline.report.sampling`), plus the worst cases, in report order.
    """
    if isinstance(report, Report) and report.cases_file is not None:
        chosen = _with_worst(report.cases_file.sample, report.cases_file.worst)
        return chosen, report.cases_file.rows
    if not isinstance(report, Report) and "cases_file" in report:
        sample = list(report.get("cases_sample") or [])
        return _with_worst(sample, report["worst_cases"]), int(report["cases_file"]["rows"])
    cases: Sequence[Any] = report.cases if isinstance(report, Report) else report["cases"]
    total = len(cases)
    if total <= MAX_HTML_CASES:
        return [_as_dict(cases, i) for i in range(total)], total
    seed = int((report.run if isinstance(report, Report) else report["run"])["config"]["seed"])
    strata = _strata(cases)
    sampler = StratifiedSampler(Counter(strata), MAX_HTML_CASES, seed)
    rows = np.arange(total, dtype=np.int64)
    sampler.offer(rows, sampler.codes(strata), rows.tolist())
    keep = {i for i, _ in sampler.chosen()}
    metrics = (
        report.aggregate_metrics if isinstance(report, Report) else report["aggregate_metrics"]
    )
    worst = {w["case_id"] for w in metrics["worst_cases"]}
    keep |= {i for i in range(total) if _case_id(cases, i) in worst}
    return [_as_dict(cases, i) for i in sorted(keep)], total


def _strata(cases: Sequence[Any]) -> list[tuple[str, str]]:
    if isinstance(cases, CaseLines):
        decode = msgspec.json.Decoder(_Stratum).decode
        return [(r.category, r.status) for r in (decode(cases.line(i)) for i in range(len(cases)))]
    return [(_get(c, "category"), _get(c, "status")) for c in cases]


def _case_id(cases: Sequence[Any], i: int) -> str:
    if isinstance(cases, CaseLines):
        return str(cases.ids[i])
    return str(_get(cases[i], "case_id"))


def _with_worst(sample: list[dict[str, Any]], worst: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen = {c["case_id"] for c in sample}
    return sample + [c for c in worst if c["case_id"] not in seen]


def _get(case: Any, key: str) -> Any:
    return case[key] if isinstance(case, Mapping) else getattr(case, key)


def _as_dict(cases: Sequence[Any], i: int) -> dict[str, Any]:
    if isinstance(cases, CaseLines):
        decoded: dict[str, Any] = msgspec.json.decode(cases.line(i))
        return decoded
    case = cases[i]
    if isinstance(case, Mapping):
        return dict(case)
    built: dict[str, Any] = msgspec.to_builtins(case)
    return built


def _view(case: Mapping[str, Any]) -> dict[str, Any]:
    """A case as the page's script reads it (short keys keep a 2,000-case page small)."""
    response = case.get("response") or ""
    cut = len(response) > MAX_RESPONSE_CHARS
    shown = response[:MAX_RESPONSE_CHARS]
    # Offsets count code points; the page's script slices UTF-16 strings. A span that starts
    # in the shown text and ends past the cut is clipped to the cut (a fifth item, 1, says
    # so); the spans that start past it are counted, so that the case view can say where they are.
    to_u16 = _utf16_offsets(shown)
    evidence: list[list[Any]] = []
    beyond = 0
    for e in case.get("evidence") or []:
        if e["start"] >= len(shown) and cut:
            beyond += 1
        elif e["end"] > MAX_RESPONSE_CHARS:
            evidence.append(
                [to_u16(e["start"]), to_u16(MAX_RESPONSE_CHARS), e["kind"], e["rule"], 1]
            )
        else:
            evidence.append([to_u16(e["start"]), to_u16(e["end"]), e["kind"], e["rule"]])
    error = case.get("error")
    view: dict[str, Any] = {
        "id": case["case_id"],
        "p": case["probe_id"],
        "k": case.get("sample", 0),
        "m": case.get("model"),
        "c": case["category"],
        "s": case["severity"],
        "e": case.get("expect", "refuse"),
        "st": case["status"],
        "r": case.get("risk_score"),
        "w": case.get("weighted_risk"),
        "cl": case.get("cluster"),
        "x": case.get("scatter_x"),
        "y": case.get("scatter_y"),
        "t": case.get("task", ""),
        "in": case.get("probe_input", ""),
        "out": shown,
        "cut": cut,
        "ex": case.get("explanation", ""),
        "ev": evidence,
        "evx": beyond,
        "fm": case.get("detected_failure_modes") or [],
        "err": None if error is None else _error_text(error),
    }
    reasoning = case.get("reasoning")
    if reasoning:  # only reasoning models' cases carry the keys
        view["rs"] = reasoning[:MAX_RESPONSE_CHARS]
        view["rcut"] = len(reasoning) > MAX_RESPONSE_CHARS
    return view


def _utf16_offsets(text: str) -> Any:
    """A function from code-point offsets in ``text`` to UTF-16 offsets (as JavaScript counts)."""
    if text.isascii() or all(ord(ch) <= 0xFFFF for ch in text):
        return lambda i: i
    extra = list(itertools.accumulate((ord(ch) > 0xFFFF for ch in text), initial=0))
    return lambda i: i + extra[min(i, len(text))]


def _error_text(error: Any) -> str:
    """An error for people: its message, kind, status and attempts, not raw JSON."""
    if not isinstance(error, Mapping):
        return str(error)
    message = error.get("message")
    rest = [f"{k} {v}" for k, v in error.items() if k != "message" and v is not None]
    parts = ([str(message)] if message is not None else []) + rest
    return " · ".join(parts) if parts else msgspec.json.encode(error).decode("utf-8")


@cache
def _csp_hash(source: str) -> str:
    """The CSP source that allows exactly this inline script."""
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


@cache
def _asset(name: str) -> str:
    return resources.files("faultline.report").joinpath("assets", name).read_text(encoding="utf-8")


@cache
def template_environment() -> Any:
    """The Jinja2 environment of faultline's HTML views: autoescaped, strict about names."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("faultline.report", "templates"),
        autoescape=True,
        finalize=_shown,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["pct"] = _pct
    env.filters["num"] = _num
    env.filters["points"] = points
    return env


def _shown(value: Any) -> Any:
    """A printed value: strings with their control characters shown; markup marked safe as is."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return visible(value)
    return value


def _pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"
