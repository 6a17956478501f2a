"""JUnit XML: valid against the schema CI systems read, one test case per probe, hostile-safe."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lxml import etree

from faultline import build_report, load_probes, load_responses, read_report, score
from faultline.pipeline import score_files
from faultline.report.junit import (
    JUnitCase,
    JUnitSuite,
    junit_xml,
    report_junit,
    write_junit,
)
from faultline.report.model import CaseLines
from faultline.scoring.case import CaseScore, Evidence, ScoringConfig

SCHEMA = etree.XMLSchema(etree.parse(str(Path(__file__).parent / "data" / "junit-10.xsd")))
FIXED = {"run_id": "20261121T000000Z-000000", "created_at": "2026-11-21T00:00:00Z"}
CONFIG = ScoringConfig(learned=None)


def _valid(document: bytes) -> etree._Element:
    """Parse ``document``, check it against the JUnit schema and the counts, return the root."""
    root = etree.fromstring(document)
    assert SCHEMA.validate(root), SCHEMA.error_log
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for suite in root.iterfind("testsuite"):
        cases = suite.findall("testcase")
        counts = {
            "tests": len(cases),
            "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
        }
        assert {k: int(suite.get(k)) for k in counts} == counts
        assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in cases)
        for key in totals:
            totals[key] += counts[key]
    assert {k: int(root.get(k)) for k in totals} == totals
    assert root.get("name") == "faultline"
    return root


def _case(
    probe_id: str,
    status: str,
    *,
    sample: int = 0,
    model: str | None = None,
    risk: float | None = None,
    category: str = "weapons",
    severity: str = "high",
    explanation: str | None = None,
    response: str = "an answer",
    evidence: Sequence[Evidence] = (),
    error: Any = None,
) -> CaseScore:
    if risk is None and status != "error":
        risk = 0.9 if status == "fail" else 0.1
    return CaseScore(
        case_id=f"{probe_id}#{sample}" + (f"@{model}" if model else ""),
        probe_id=probe_id,
        sample=sample,
        model=model,
        category=category,
        severity=severity,  # type: ignore[arg-type]
        severity_weight=1.5,
        expect="refuse",
        status=status,  # type: ignore[arg-type]
        passed=None if status == "error" else status == "pass",
        risk_score=risk,
        weighted_risk=None if risk is None else min(1.0, risk * 1.5),
        safe_signal_hits=0,
        unsafe_signal_hits=len(evidence),
        boundary_or_refusal_signal=False,
        matched_safe_patterns=[],
        matched_unsafe_patterns=[e.rule for e in evidence],
        matched_boundary_patterns=[],
        detected_failure_modes=[],
        task="t",
        probe_input="i",
        response=response,
        explanation=explanation
        if explanation is not None
        else f"{probe_id} sample {sample}: {status}.",
        evidence=list(evidence),
        error=error or ({"kind": "timeout", "message": "timed out"} if status == "error" else None),
    )


def _report(cases: list[CaseScore]) -> Any:
    return build_report(cases, config=CONFIG, observability_min_cases=10**6, **FIXED)


def _testcases(root: etree._Element) -> dict[str, etree._Element]:
    return {tc.get("name"): tc for tc in root.iter("testcase")}


# -- the real pipeline ------------------------------------------------------------------------


@pytest.fixture
def small_report(small_files: tuple[Path, Path]) -> Any:
    probes, responses = small_files
    probe_set = load_probes(probes)
    return build_report(
        score(probe_set, load_responses(responses)), probe_set=probe_set, config=CONFIG, **FIXED
    )


def test_the_small_report_has_one_test_per_probe_in_one_suite_per_category(
    small_report: Any,
) -> None:
    root = _valid(report_junit(small_report))
    suites = {s.get("name"): [tc.get("name") for tc in s.iter("testcase")] for s in root}
    assert suites == {
        "benign_control": ["ctl-1"],
        "harassment": ["hr-1"],
        "prompt_injection": ["inj-1", "inj-2"],
        "weapons": ["wpn-1", "wpn-2"],
    }
    cases = _testcases(root)
    assert cases["wpn-2"].get("classname") == "faultline.weapons"
    assert cases["wpn-2"].find("failure").get("type") == "high"
    assert cases["hr-1"].find("error") is not None  # an error is never a pass
    assert cases["wpn-1"].find("failure") is None
    assert cases["wpn-1"].find("error") is None


def test_the_counts_agree_with_per_probe_metrics(small_report: Any) -> None:
    root = _valid(report_junit(small_report))
    per_probe = small_report.aggregate_metrics["per_probe"]
    assert int(root.get("tests")) == per_probe["probes"]
    assert int(root.get("failures")) == per_probe["failed"]
    assert int(root.get("errors")) == per_probe["errors"]


def test_each_suite_carries_the_run_metadata(
    small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    run = score_files(probes, responses, tmp_path / "out", config=CONFIG, workers=1).report.run
    root = _valid(report_junit(read_report(tmp_path / "out")))
    for suite in root.iter("testsuite"):
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props["target.spec"] == "replay:responses.jsonl"
        assert props["probe_set.sha256"] == run["probe_set"]["sha256"]
        assert props["probe_set.name"] == run["probe_set"]["name"]
        assert props["rules.sha256"] == run["rules"]["sha256"]
        assert props["config.pass_threshold"] == "0.5"
        assert props["run.id"] == run["id"]
        assert "learned.sha256" not in props  # rules only: no learned model


def test_lazy_cases_plain_cases_and_report_json_give_the_same_bytes(
    small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    run = score_files(probes, responses, tmp_path / "out", config=CONFIG, workers=1)
    assert isinstance(run.report.cases, CaseLines)
    from_lines = report_junit(run.report)
    assert report_junit(read_report(tmp_path / "out")) == from_lines
    assert report_junit(run.report.to_dict()) == from_lines
    _valid(from_lines)


# -- semantics --------------------------------------------------------------------------------


def test_a_probe_fails_when_any_sample_fails_with_the_worst_explanation() -> None:
    spans = [
        Evidence("unsafe.recipe", "unsafe", 0, 9, "Mix 30 g "),
        Evidence("x", "unsafe", 9, 10, "o"),
    ]
    report = _report(
        [
            _case("p", "pass", sample=0),
            _case("p", "fail", sample=1, risk=0.6, explanation="mild"),
            _case("p", "fail", sample=2, risk=0.95, explanation="worst", evidence=spans),
            _case("q", "pass", sample=0),
            _case("q", "pass", sample=1),
        ]
    )
    cases = _testcases(_valid(report_junit(report)))
    failure = cases["p"].find("failure")
    assert failure.get("message") == "worst"
    assert failure.get("type") == "high"
    text = failure.text
    assert text.startswith("2 of 3 sample(s) failed.")
    assert text.index("p#2: risk 0.950: worst") < text.index("p#1: risk 0.600: mild")
    assert "evidence unsafe.recipe: 'Mix 30 g '" in text
    assert "p#0" not in text
    assert cases["q"].find("failure") is None
    assert "2 sample(s): 2 passed" in cases["q"].find("system-out").text


@pytest.mark.parametrize(
    ("statuses", "outcome"),
    [
        (["error"], "error"),
        (["error", "error"], "error"),
        (["pass", "error"], "error"),
        (["fail", "error"], "failure"),
        (["pass", "pass"], None),
    ],
)
def test_errors_are_junit_errors_unless_a_sample_failed(
    statuses: list[str], outcome: str | None
) -> None:
    report = _report([_case("p", s, sample=i) for i, s in enumerate(statuses)])
    (tc,) = _testcases(_valid(report_junit(report))).values()
    assert [child.tag for child in tc if child.tag != "system-out"] == (
        [outcome] if outcome else []
    )


def test_an_error_carries_every_error_message() -> None:
    report = _report(
        [
            _case("p", "error", sample=0, error={"kind": "rate_limited", "message": "429 twice"}),
            _case("p", "error", sample=1, error="connection reset"),
            _case("p", "pass", sample=2),
        ]
    )
    error = _valid(report_junit(report)).find(".//error")
    assert error.get("message") == "429 twice"
    assert error.get("type") == "rate_limited"
    assert "p#0: rate_limited: 429 twice" in error.text
    assert "p#1: error: connection reset" in error.text


def test_several_models_give_one_test_per_probe_and_model() -> None:
    report = _report(
        [
            _case("p", "pass", model="a"),
            _case("p", "fail", model="b"),
            _case("q", "error", model="a"),
        ]
    )
    cases = _testcases(_valid(report_junit(report)))
    assert sorted(cases) == ["p @a", "p @b", "q @a"]
    assert cases["p @b"].find("failure") is not None
    assert cases["p @a"].find("failure") is None


def test_one_model_keeps_plain_probe_names() -> None:
    report = _report([_case("p", "pass", model="a"), _case("q", "fail", model="a")])
    assert sorted(_testcases(_valid(report_junit(report)))) == ["p", "q"]


def test_many_failing_samples_are_summarised() -> None:
    report = _report([_case("p", "fail", sample=i, risk=0.5 + i / 100) for i in range(30)])
    text = _valid(report_junit(report)).find(".//failure").text
    assert text.startswith("30 of 30 sample(s) failed.")
    assert "p#29: risk 0.790" in text
    assert "p#0:" not in text
    assert text.endswith("... and 20 more failing sample(s).")


def test_an_empty_report_is_a_valid_empty_document() -> None:
    root = _valid(report_junit(_report([])))
    assert root.get("tests") == "0"
    assert len(root) == 0


# -- hostile text -----------------------------------------------------------------------------

HOSTILE = "<script>alert('x')</script> ]]> &amp; \"q\" \x00\x1b[31m red \x7f\ud800 end\r\nline"


def test_hostile_text_is_escaped_and_round_trips_without_illegal_characters() -> None:
    span = Evidence("unsafe.<b>", "unsafe", 0, len(HOSTILE), HOSTILE)
    report = _report(
        [
            _case(
                "p<&>\x01",
                "fail",
                category="cat]]>\x00",
                explanation=HOSTILE,
                response=HOSTILE,
                evidence=[span],
            ),
            _case("e", "error", error={"kind": "exception", "message": HOSTILE}),
        ]
    )
    document = report_junit(report)
    assert b"<script>" not in document
    assert b"\x00" not in document
    assert b"\x1b" not in document
    root = _valid(document)
    expected = "<script>alert('x')</script> ]]> &amp; \"q\" [31m red \x7f end\nline"
    failure = root.find(".//failure")
    assert failure.get("message") == expected
    assert expected in failure.text
    assert root.find(".//error").get("message") == expected
    names = {tc.get("name") for tc in root.iter("testcase")}
    assert names == {"p<&>", "e"}
    assert {s.get("name") for s in root} == {"cat]]>", "weapons"}
    ET.fromstring(document)  # the stdlib parser reads it too


_ANY_CHARACTER = st.characters(
    categories=["Cc", "Cf", "Cs", "Co", "Cn", "L", "M", "N", "P", "S", "Z"]
)


@given(
    st.lists(
        st.tuples(st.text(_ANY_CHARACTER), st.sampled_from(["failure", "error", "skipped", None])),
        max_size=5,
    ),
    st.text(_ANY_CHARACTER),
)
def test_any_text_in_any_field_gives_a_valid_document(
    cases: list[tuple[str, str | None]], suite_name: str
) -> None:
    built = []
    for text, outcome in cases:
        detail = (text, text, text)
        built.append(
            JUnitCase(
                classname=text,
                name=text,
                failure=detail if outcome == "failure" else None,
                error=detail if outcome == "error" else None,
                skipped=text if outcome == "skipped" else None,
                system_out=text,
            )
        )
    document = junit_xml([JUnitSuite(suite_name, built, [(suite_name, suite_name)])])
    root = _valid(document)
    for tc, (text, _) in zip(root.iter("testcase"), cases, strict=True):
        assert tc.get("name") == _cleaned(text)
        assert (tc.find("system-out").text or "") == _cleaned(text)
        for tag in ("failure", "error"):
            if (detail := tc.find(tag)) is not None:
                assert detail.get("message") == detail.get("type") == _cleaned(text)
                assert (detail.text or "") == _cleaned(text)


def _cleaned(text: str) -> str:
    allowed = lambda c: (  # noqa: E731
        c in "\t\n" or "\x20" <= c <= "\ud7ff" or "\ue000" <= c <= "\ufffd" or c >= "\U00010000"
    )
    return "".join(c for c in text.replace("\r\n", "\n").replace("\r", "\n") if allowed(c))


# -- the generic builder ----------------------------------------------------------------------


def test_junit_xml_counts_skipped_cases_and_writes_properties() -> None:
    suite = JUnitSuite(
        "s",
        [
            JUnitCase("c", "a", time=1.25),
            JUnitCase("c", "b", skipped="not asked"),
            JUnitCase("c", "d", failure=("m", "t", "x")),
        ],
        [("k", "v")],
    )
    root = _valid(junit_xml([suite], name="faultline"))
    (element,) = root
    assert (element.get("tests"), element.get("failures"), element.get("skipped")) == (
        "3",
        "1",
        "1",
    )
    assert element.get("time") == "1.250"
    assert root.get("time") == "1.250"
    assert element.find("properties/property").attrib == {"name": "k", "value": "v"}
    assert element.find("testcase/skipped").get("message") == "not asked"


def test_a_case_has_at_most_one_outcome() -> None:
    with pytest.raises(ValueError, match="at most one"):
        JUnitCase("c", "n", failure=("m", "t", "x"), error=("m", "t", "x"))


def test_write_junit_creates_the_directory_and_writes_the_bytes(tmp_path: Path) -> None:
    path = write_junit(tmp_path / "ci" / "junit.xml", b"<testsuites/>\n")
    assert path.read_bytes() == b"<testsuites/>\n"
    assert [p.name for p in path.parent.iterdir()] == ["junit.xml"]


# -- determinism and properties ---------------------------------------------------------------


def test_the_same_report_gives_the_same_bytes_whatever_the_case_order() -> None:
    cases = [
        _case(p, s, sample=k, model=m, risk=r)
        for p, s, k, m, r in [
            ("b", "fail", 0, "x", 0.7),
            ("b", "fail", 1, "x", 0.7),
            ("a", "error", 0, "y", None),
            ("a", "error", 1, "y", None),
            ("a", "pass", 0, "x", 0.2),
            ("c", "fail", 0, "y", 0.9),
        ]
    ]
    first = report_junit(_report(cases))
    shuffled = cases[:]
    random.Random(7).shuffle(shuffled)
    assert report_junit(_report(shuffled)) == first
    assert report_junit(_report(cases)) == first


_STATUS = st.sampled_from(["pass", "fail", "error"])


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["p1", "p2", "p3", "p<4>"]),
            st.sampled_from([None, "m1", "m2"]),
            _STATUS,
            st.floats(0, 1),
            st.text(max_size=20),
        ),
        max_size=25,
    )
)
def test_random_reports_are_always_valid_with_consistent_counts(
    rows: list[tuple[str, str | None, str, float, str]],
) -> None:
    cases, samples = [], {}
    for probe, model, status, risk, text in rows:
        k = samples[probe, model] = samples.get((probe, model), -1) + 1
        cases.append(
            _case(
                probe,
                status,
                sample=k,
                model=model,
                risk=None if status == "error" else risk,
                category=f"cat-{probe[-1]}",
                explanation=text,
            )
        )
    root = _valid(report_junit(_report(cases)))
    groups: dict[tuple[str, str | None], list[str]] = {}
    for probe, model, status, _, _ in rows:
        groups.setdefault((probe, model), []).append(status)
    assert int(root.get("tests")) == len(groups)
    assert int(root.get("failures")) == sum("fail" in s for s in groups.values())
    assert int(root.get("errors")) == sum("error" in s and "fail" not in s for s in groups.values())
