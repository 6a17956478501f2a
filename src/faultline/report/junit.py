"""JUnit XML: a report as test results, so CI systems show a red probe as a failed test.

:func:`junit_xml` turns suites of test cases into the JUnit XML that Jenkins, GitLab, GitHub
reporter actions and Azure DevOps read (validated against the Jenkins xunit plugin's
``junit-10.xsd``). :func:`report_junit` maps a report onto it: one test case per probe (per
model when several answered), failing when any of its samples failed (hit@K), an error when
it has errors but no failure (an unknown is never a pass), grouped into one suite per
category. Everything model-written is untrusted: the XML escaping is ElementTree's, and
characters XML 1.0 cannot hold (control characters, lone surrogates) are dropped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import msgspec

from faultline._util.files import atomic_write_bytes, check_writable_dir
from faultline._version import __version__
from faultline.errors import InputError, UsageError
from faultline.probes.model import Probe
from faultline.report.gates import GateResult
from faultline.report.model import CaseLines, Report
from faultline.report.parquet import read_cases
from faultline.scoring.case import CaseScore

__all__ = [
    "JUnitCase",
    "JUnitSuite",
    "check_junit_path",
    "compare_junit",
    "junit_xml",
    "report_junit",
    "write_junit",
]

Detail = tuple[str, str, str]
"""A failure or error: ``(message, type, text)``."""

_ILLEGAL = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SHOWN_SAMPLES = 10
_SHOWN_SPANS = 3
_SPAN_CHARS = 200


def _clean(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold, and with LF line ends.

    Line ends are normalised because an XML parser reads a raw CR in text as LF.
    """
    return _ILLEGAL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


@dataclass(frozen=True)
class JUnitCase:
    """One test case.

    Attributes:
        classname: The dotted group the case belongs to (CI systems group by it).
        name: The test's name.
        time: Seconds the test took.
        failure: ``(message, type, text)`` when the test failed.
        error: ``(message, type, text)`` when the test could not be run or judged.
        skipped: Why the test was skipped, when it was.
        system_out: Text shown beside the result.
    """

    classname: str
    name: str
    time: float = 0.0
    failure: Detail | None = None
    error: Detail | None = None
    skipped: str | None = None
    system_out: str | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.failure, self.error, self.skipped)) > 1:
            raise ValueError("a JUnit case has at most one of failure, error and skipped")


@dataclass(frozen=True)
class JUnitSuite:
    """A named group of test cases.

    Attributes:
        name: The suite's name.
        cases: Its test cases, in the order they are written.
        properties: ``(name, value)`` pairs written as the suite's ``<properties>``.
    """

    name: str
    cases: Sequence[JUnitCase]
    properties: Sequence[tuple[str, str]] = field(default_factory=tuple)


def _counts(cases: Sequence[JUnitCase]) -> dict[str, int]:
    return {
        "tests": len(cases),
        "failures": sum(c.failure is not None for c in cases),
        "errors": sum(c.error is not None for c in cases),
        "skipped": sum(c.skipped is not None for c in cases),
    }


def _seconds(value: float) -> str:
    return f"{max(0.0, value):.3f}"


def _detail(parent: ET.Element, tag: str, detail: Detail) -> None:
    message, kind, text = detail
    child = ET.SubElement(parent, tag, message=_clean(message), type=_clean(kind))
    child.text = _clean(text)


def _case(parent: ET.Element, case: JUnitCase) -> None:
    element = ET.SubElement(
        parent,
        "testcase",
        classname=_clean(case.classname),
        name=_clean(case.name),
        time=_seconds(case.time),
    )
    if case.failure is not None:
        _detail(element, "failure", case.failure)
    if case.error is not None:
        _detail(element, "error", case.error)
    if case.skipped is not None:
        ET.SubElement(element, "skipped", message=_clean(case.skipped))
    if case.system_out is not None:
        ET.SubElement(element, "system-out").text = _clean(case.system_out)


def junit_xml(suites: Sequence[JUnitSuite], *, name: str = "faultline") -> bytes:
    """The JUnit XML document of ``suites``: UTF-8, with the counts CI systems read.

    Suites and cases are written in the order given; the totals on ``<testsuites>`` and each
    ``<testsuite>`` are counted from the cases.

    Args:
        suites: The test suites.
        name: The name of the whole document (``<testsuites name=...>``).

    Returns:
        The document's bytes, with an XML declaration.
    """
    totals = {"tests": 0, "failures": 0, "errors": 0}
    root = ET.Element("testsuites", name=_clean(name))
    time = 0.0
    for suite in suites:
        counts = _counts(suite.cases)
        suite_time = sum(c.time for c in suite.cases)
        time += suite_time
        for key in totals:
            totals[key] += counts[key]
        attrib = {"name": _clean(suite.name), **{k: str(v) for k, v in counts.items()}}
        element = ET.SubElement(root, "testsuite", attrib, time=_seconds(suite_time))
        properties = ET.SubElement(element, "properties")
        for key, value in suite.properties:
            ET.SubElement(properties, "property", name=_clean(key), value=_clean(value))
        for case in suite.cases:
            _case(element, case)
    root.attrib.update({k: str(v) for k, v in totals.items()}, time=_seconds(time))
    ET.indent(root, space="  ")
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


# -- a report as JUnit ------------------------------------------------------------------------


class _Span(msgspec.Struct):
    rule: str = ""
    text: str = ""


class _Sample(msgspec.Struct):
    """The fields of a case the JUnit view reads (the rest is never decoded)."""

    case_id: str
    probe_id: str
    status: Literal["pass", "fail", "error"]
    sample: int = 0
    model: str | None = None
    category: str = ""
    severity: str = ""
    risk_score: float | None = None
    explanation: str = ""
    evidence: list[_Span] = []
    error: Any = None


@dataclass
class _Probe:
    """What one probe's samples (for one model) add up to."""

    category: str
    samples: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    max_risk: float | None = None
    failing: list[_Sample] = field(default_factory=list)
    errored: list[_Sample] = field(default_factory=list)

    def add(self, s: _Sample) -> None:
        self.samples += 1
        if s.risk_score is not None and (self.max_risk is None or s.risk_score > self.max_risk):
            self.max_risk = s.risk_score
        if s.status == "pass":
            self.passed += 1
        elif s.status == "fail":
            self.failed += 1
            self.failing.append(s)
            if len(self.failing) >= 2 * _SHOWN_SAMPLES:
                self.failing = _worst_first(self.failing)[:_SHOWN_SAMPLES]
        else:
            self.errors += 1
            self.errored.append(s)
            if len(self.errored) >= 2 * _SHOWN_SAMPLES:
                self.errored = _first(self.errored)[:_SHOWN_SAMPLES]


def _worst_first(samples: list[_Sample]) -> list[_Sample]:
    return sorted(samples, key=lambda s: (-(s.risk_score or 0.0), s.sample, s.case_id))


def _first(samples: list[_Sample]) -> list[_Sample]:
    return sorted(samples, key=lambda s: (s.sample, s.case_id))


def _samples(cases: Sequence[Any]) -> Iterator[_Sample]:
    """Each case as a :class:`_Sample`, decoding only what the view reads."""
    if isinstance(cases, CaseLines):
        decode = msgspec.json.Decoder(_Sample).decode
        for i in range(len(cases)):
            yield decode(cases.line(i))
        return
    for i, case in enumerate(cases):
        if isinstance(case, CaseScore):
            yield _Sample(
                case_id=case.case_id,
                probe_id=case.probe_id,
                status=case.status,
                sample=case.sample,
                model=case.model,
                category=case.category,
                severity=case.severity,
                risk_score=case.risk_score,
                explanation=case.explanation,
                evidence=[_Span(e.rule, e.text) for e in case.evidence[:_SHOWN_SPANS]],
                error=case.error,
            )
            continue
        try:
            yield msgspec.convert(case, _Sample)
        except msgspec.ValidationError as exc:
            raise InputError(f"report case {i + 1} cannot be read: {exc}") from None


def _error_text(error: Any) -> tuple[str, str]:
    """The ``(message, kind)`` of a case's error, whatever shape it was recorded in."""
    if isinstance(error, Mapping):
        message = error.get("message")
        kind = error.get("kind") or error.get("type") or "error"
        return (str(message) if message is not None else str(dict(error))), str(kind)
    return ("no answer" if error is None else str(error)), "error"


def _failure(probe: _Probe) -> Detail:
    worst = _worst_first(probe.failing)[:_SHOWN_SAMPLES]
    lines = [f"{probe.failed} of {probe.samples} sample(s) failed."]
    for s in worst:
        risk = "n/a" if s.risk_score is None else f"{s.risk_score:.3f}"
        lines.append(f"{s.case_id}: risk {risk}: {s.explanation}")
        lines.extend(
            f"    evidence {span.rule}: {span.text[:_SPAN_CHARS]!r}"
            for span in s.evidence[:_SHOWN_SPANS]
        )
    if probe.failed > len(worst):
        lines.append(f"... and {probe.failed - len(worst)} more failing sample(s).")
    return worst[0].explanation, worst[0].severity or "fail", "\n".join(lines)


def _error(probe: _Probe) -> Detail:
    if not probe.samples:
        message = "no answer: the probe is in the probe set, but no response answers it"
        return message, "no_answer", f"{message}. It is unknown, never a pass."
    first = _first(probe.errored)[:_SHOWN_SAMPLES]
    first_message, first_kind = _error_text(first[0].error)
    lines = [f"{probe.errors} of {probe.samples} sample(s) were not answered or not scored."]
    for s in first:
        message, kind = _error_text(s.error)
        lines.append(f"{s.case_id}: {kind}: {message}")
    if probe.errors > len(first):
        lines.append(f"... and {probe.errors - len(first)} more error(s).")
    return first_message, first_kind, "\n".join(lines)


def _summary(probe: _Probe) -> str:
    risk = "n/a" if probe.max_risk is None else f"{probe.max_risk:.3f}"
    return (
        f"{probe.samples} sample(s): {probe.passed} passed, {probe.failed} failed, "
        f"{probe.errors} error(s); highest risk {risk}"
    )


def _properties(run: Mapping[str, Any], version: str) -> list[tuple[str, str]]:
    """The run metadata each suite carries: what was tested, with which rules, how strictly."""
    target = run.get("target") or {}
    probe_set = run.get("probe_set") or {}
    rules = run.get("rules") or {}
    learned = run.get("learned") or {}
    models = target.get("models")
    pairs: list[tuple[str, Any]] = [
        ("faultline.version", version),
        ("run.id", run.get("id")),
        ("run.created_at", run.get("created_at")),
        ("target.spec", target.get("spec")),
        ("target.provider", target.get("provider")),
        ("target.base_url", target.get("base_url")),
        ("target.models", ",".join(map(str, models)) if models else None),
        ("probe_set.name", probe_set.get("name")),
        ("probe_set.version", probe_set.get("version")),
        ("probe_set.sha256", probe_set.get("sha256")),
        ("rules.name", rules.get("name")),
        ("rules.version", rules.get("version")),
        ("rules.sha256", rules.get("sha256")),
        ("learned.name", learned.get("name")),
        ("learned.sha256", learned.get("sha256")),
        ("config.pass_threshold", (run.get("config") or {}).get("pass_threshold")),
    ]
    return [(k, str(v)) for k, v in pairs if v is not None]


def report_junit(report: Report | Mapping[str, Any], probes: Iterable[Probe] = ()) -> bytes:
    """A report as JUnit XML: one test case per probe, one suite per category.

    A probe (per model, when several models answered) fails when any of its samples failed
    (hit@K, as ``aggregate_metrics.per_probe``): the failure's message is the worst failing
    sample's explanation, its type the probe's severity, and its text the failing samples'
    case ids, risk scores, explanations and first evidence spans. A probe with errors and no
    failure is an error (an unknown, never a pass). Each suite carries the run's metadata
    (target, probe set, rules, pass threshold) as properties. The same report always gives
    the same bytes.

    A probe of ``probes`` that no case answers (per model, when several answered) is an
    error too: a probe without an answer is unknown, and it is counted, not left out.

    Args:
        report: A :class:`Report`, or a report.json read as plain data
            (:func:`faultline.report.read_report`).
        probes: The probe set the report was scored against, so that its unanswered probes
            are tests too (the report holds only the answered ones).

    Returns:
        The JUnit XML document.

    Raises:
        InputError: A case in plain data lacks a field the view needs.
    """
    if isinstance(report, Report) and report.cases_file is not None:
        run, version = report.run, __version__
        cases: Any = list(read_cases(report.cases_file.path, _Sample.__struct_fields__))
    elif isinstance(report, Report):
        run, cases, version = report.run, report.cases, __version__
    else:
        run, cases = report.get("run") or {}, report.get("cases") or []
        version = str((report.get("tool") or {}).get("version", __version__))
    answered: dict[tuple[str, str | None], _Probe] = {}
    for s in _samples(cases):
        key = (s.probe_id, s.model)
        probe = answered.get(key)
        if probe is None:
            probe = answered[key] = _Probe(category=s.category)
        probe.add(s)
    models = sorted({m for _, m in answered if m is not None})
    several = len(models) > 1
    answerers: list[str | None] = [*models] if models else [None]
    for p in probes:  # a probe no case answers: unknown, so an error
        for answerer in answerers:
            answered.setdefault((p.id, answerer), _Probe(category=p.category))
    by_category: dict[str, list[JUnitCase]] = {}
    for (probe_id, model), probe in sorted(answered.items(), key=lambda kv: _order(kv[0])):
        by_category.setdefault(probe.category, []).append(
            JUnitCase(
                classname=f"faultline.{probe.category}",
                name=f"{probe_id} @{model}" if several and model is not None else probe_id,
                failure=_failure(probe) if probe.failed else None,
                error=_error(probe)
                if not probe.failed and (probe.errors or not probe.samples)
                else None,
                system_out=_summary(probe),
            )
        )
    properties = _properties(run, version)
    suites = [JUnitSuite(cat, by_category[cat], properties) for cat in sorted(by_category)]
    return junit_xml(suites)


def _order(key: tuple[str, str | None]) -> tuple[str, bool, str]:
    probe_id, model = key
    return probe_id, model is not None, model or ""


def compare_junit(result: Mapping[str, Any], gates: Sequence[GateResult] = ()) -> bytes:
    """JUnit XML for ``faultline compare``: the changed cases, and the gates.

    Suite ``changes``: one test per case that changed, matched by case id. A regression
    (pass to fail) and a new failing case (only in the new run, or an error in the base run)
    fail, with the new explanation; a case that became an error is an error; a fix or an
    error that now passes passes; a removed case is skipped. Suite
    ``gates``: one test per ``--fail-on`` gate, failing when it tripped.

    Args:
        result: The compare.json object (:func:`faultline.report.compare.compare_reports`).
        gates: The evaluated gates.
    """
    c = result["cases"]
    kinds = ("regressions", "became_error", "new", "fixes", "error_resolved", "removed")
    changed = [_change_case(kind, entry) for kind in kinds for entry in c[kind]]
    checks = [
        JUnitCase(
            classname="faultline.gates",
            name=str(g.gate),
            failure=(g.describe(), "gate", g.describe()) if g.tripped else None,
        )
        for g in gates
    ]
    properties = [(side, str(result[side].get("name") or "")) for side in ("base", "new")]
    suites = [JUnitSuite("changes", changed, properties)]
    if checks:
        suites.append(JUnitSuite("gates", checks, properties))
    return junit_xml(suites, name="faultline compare")


def _change_case(kind: str, entry: Mapping[str, Any]) -> JUnitCase:
    name = f"{entry['case_id']} ({entry.get('base_status') or 'absent'} → {entry.get('new_status') or 'absent'})"
    explanation = str(entry.get("explanation") or "")
    base = JUnitCase(classname=f"faultline.{entry['category']}", name=name)
    if kind == "regressions" or (kind != "fixes" and entry.get("new_status") == "fail"):
        return replace(base, failure=(explanation, str(entry["severity"]), explanation))
    if kind == "became_error":
        return replace(base, error=(explanation, "error", explanation))
    if kind == "removed":
        return replace(base, skipped="not in the new report")
    return replace(base, system_out=explanation or None)


def check_junit_path(path: str | Path, taken: Iterable[str | Path] = ()) -> Path:
    """Check, before any work, that JUnit XML can be written to ``path``.

    A command calls this before it writes anything, so a path that cannot be written exits 2
    with every file already in its output directory untouched (see
    :func:`~faultline._util.files.check_writable_dir`; nothing is left behind).

    Args:
        path: The ``--junit`` value.
        taken: The files the command reads or writes itself (its inputs, its reports, a
            run's journal): JUnit XML written over one of them would replace it.

    Raises:
        UsageError: The directory cannot be created, a file cannot be written in it, or
            ``path`` is one of ``taken``.
    """
    p = Path(path)
    problem = check_writable_dir(p.parent)
    if problem is not None:
        raise UsageError(f"--junit {p}: {problem}; give a path in a writable directory")
    for other in taken:
        if _same_file(p, Path(other)):
            raise UsageError(
                f"--junit {p}: is {other}, a file this command reads or writes itself; "
                "give the JUnit XML a path of its own, such as junit.xml"
            )
    return p


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file (through links too), whether or not it exists."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def write_junit(path: str | Path, data: bytes) -> Path:
    """Write JUnit XML to ``path`` atomically, creating its directory if missing.

    Returns:
        The path written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(p, data)
    return p
