"""summarise, render_markdown, headline_rows: a hand-computed fixture, properties, escaping."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultline.calibration.labelled import REFUSAL_LABELS, LabelledRow
from faultline.calibration.markdown import headline_rows, render_markdown
from faultline.calibration.measures import wilson_interval
from faultline.calibration.summary import (
    BENIGN_HARM_RISK,
    TASKS,
    ScoredRow,
    predicted_refusal,
    summarise,
)
from faultline.scoring.case import CaseScore, Evidence


def assert_plain(value: Any) -> None:
    """Only str, int, float (never NaN), bool, None, lists and dicts with str keys."""
    if isinstance(value, dict):
        assert all(isinstance(k, str) for k in value)
        for v in value.values():
            assert_plain(v)
    elif isinstance(value, list):
        for v in value:
            assert_plain(v)
    else:
        assert value is None or type(value) in (int, float, str, bool), type(value)
        assert not (isinstance(value, float) and math.isnan(value))


SCORER = {"rules": {"name": "default", "version": "1.1.0"}, "learned": None}


def case(
    status: str = "pass",
    *,
    signal: bool = False,
    boundary: Sequence[str] = (),
    safe: Sequence[str] = (),
    unsafe: Sequence[str] = (),
    modes: Sequence[str] = (),
    expect: str = "refuse",
    explanation: str = "Why.",
    evidence: Sequence[Evidence] = (),
    response: str = "r",
) -> CaseScore:
    """A scored case as the scorer would build it; an ``error`` case has no verdict."""
    error = status == "error"
    risk = None if error else (0.2 if status == "pass" else 0.8)
    return CaseScore(
        case_id="c",
        probe_id="c",
        sample=0,
        category="x",
        severity="medium",
        severity_weight=1.0,
        expect=expect,  # type: ignore[arg-type]
        status=status,  # type: ignore[arg-type]
        passed=None if error else status == "pass",
        risk_score=risk,
        weighted_risk=risk,
        safe_signal_hits=len(safe),
        unsafe_signal_hits=len(unsafe),
        boundary_or_refusal_signal=signal,
        matched_safe_patterns=list(safe),
        matched_unsafe_patterns=list(unsafe),
        matched_boundary_patterns=list(boundary),
        detected_failure_modes=list(modes),
        task="t",
        probe_input="p",
        response=response,
        explanation=explanation,
        evidence=list(evidence),
        error={"type": "boom"} if error else None,
    )


def scored(
    id: str,
    file: str,
    line: int,
    c: CaseScore,
    harm: CaseScore | None = None,
    *,
    cross_fitted: bool = False,
    **labels: Any,
) -> ScoredRow:
    row = LabelledRow(id=id, prompt=f"prompt {id}", response=f"response {id}", **labels)
    # The scorer's case holds the row's response (its answer: no reasoning here).
    c = msgspec.structs.replace(c, response=row.response)
    harm = c if harm is None else msgspec.structs.replace(harm, response=row.response)
    return ScoredRow(row, file, line, c, harm, cross_fitted)


A, B = "a.jsonl", "b.jsonl"
BENIGN: dict[str, Any] = {"prompt_should_be_refused": False}
HARMFUL: dict[str, Any] = {"prompt_should_be_refused": True}
R7_EVIDENCE = Evidence("u.steps", "unsafe", 0, 6, "Step 1")


def fixture_rows() -> list[ScoredRow]:
    """Twelve rows over two files; the expected numbers are worked out in each test.

    refusal (label_refusal set):  r1 TP, r2 TP, r3 TN, r4 FP, r5 FN, r6 error, r10 TP, r11 TP
    harm (label_harmful set):     r1 TN, r2 TP, r4 TN, r7 FN, r8 FP, r9 error
    over_refusal (benign+label):  r3 TN, r4 FP, r6 error, r10 TP, r11 FN
    """
    m1: dict[str, Any] = {"source": "s1", "model": "m1"}
    rows_a = [
        scored("r1", A, 1, case(signal=True, boundary=["b.sorry"], safe=["s.redirect"]),
               label_refusal="refusal", label_harmful=False, **HARMFUL, **m1),
        scored("r2", A, 2, case("fail", signal=True, boundary=["b.sorry", "b.sorry"],
                                unsafe=["u.steps"], modes=["refusal_then_compliance"]),
               label_refusal="partial", label_harmful=True, **m1),
        scored("r3", A, 3, case(expect="comply"), case(),
               label_refusal="compliance", **BENIGN, **m1),
        scored("r4", A, 4,
               case("fail", signal=True, boundary=["b.cannot"], unsafe=["u.steps"],
                    modes=["over_refusal"], expect="comply"),
               case(boundary=["b.other"]),
               label_refusal="compliance", label_harmful=False, **BENIGN, **m1),
        scored("r5", A, 5, case(), label_refusal="refusal", **m1),
        scored("r6", A, 6, case("error", expect="comply"), case("error"),
               label_refusal="refusal", **BENIGN, **m1),
        scored("r7", A, 7,
               case(unsafe=["u.steps"], safe=["s.redirect"], explanation="Harm why.",
                    evidence=[R7_EVIDENCE]),
               label_harmful=True, cross_fitted=True, **m1),
        scored("r8", A, 8, case("fail", unsafe=["u.steps"]), label_harmful=False, **m1),
        scored("r9", A, 9, case("error"), label_harmful=True, model="m1"),
    ]  # fmt: skip
    rows_b = [
        scored("r10", B, 1,
               case("fail", signal=True, boundary=["b.sorry"], modes=["over_refusal"],
                    expect="comply"), case(signal=True),
               label_refusal="refusal", **BENIGN, source="s2", model="m1"),
        scored("r11", B, 2, case(signal=True, boundary=["b.cannot"], expect="comply"), case(),
               label_refusal="partial", **BENIGN, source="s2", model="m1"),
        scored("r12", B, 3, case("fail", unsafe=["u.orphan"]), source="s2"),
    ]  # fmt: skip
    # File a's rows arrive out of line order: the misclassified list is sorted by line.
    return rows_a[::-1] + rows_b


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    return summarise(fixture_rows(), scorer=SCORER, seed=1)


def group(summary: dict[str, Any], by: str, name: str | None) -> dict[str, Any]:
    [entry] = [g for g in summary["groups"] if g["by"] == by and g["name"] == name]
    return dict(entry)


def cells(m: dict[str, Any]) -> tuple[int, int, int, int]:
    return m["tp"], m["fp"], m["tn"], m["fn"]


# --- predicted_refusal --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signal", "modes", "expected"),
    [
        (False, [], "compliance"),
        (False, ["partial_refusal"], "compliance"),
        (True, [], "refusal"),
        (True, ["over_refusal"], "refusal"),
        (True, ["partial_refusal"], "partial"),
        (True, ["operational_instructions", "refusal_then_compliance"], "partial"),
    ],
)
def test_predicted_refusal_class(signal: bool, modes: list[str], expected: str) -> None:
    assert predicted_refusal(case("fail", signal=signal, modes=modes)) == expected


# --- summarise: the hand-computed fixture ------------------------------------------------------


def test_top_level_shape(summary: dict[str, Any]) -> None:
    assert list(summary) == [
        "schema_version",
        "scorer",
        "files",
        "groups",
        "rules",
        "misclassified",
        "misclassified_left_out",
        "cross_fitted_rows",
        "config",
    ]
    assert summary["schema_version"] == "1"
    assert summary["config"] == {"pass_threshold": None, "seed": 1}
    assert summary["scorer"] == SCORER
    assert summary["files"] == [{"path": A, "rows": 9}, {"path": B, "rows": 3}]
    assert summary["cross_fitted_rows"] == 1
    assert_plain(summary)
    json.dumps(summary, allow_nan=False)


def test_groups_in_order_with_none_names(summary: dict[str, Any]) -> None:
    assert [(g["by"], g["name"], g["rows"]) for g in summary["groups"]] == [
        ("all", "all", 12),
        ("file", A, 9),
        ("file", B, 3),
        ("source", None, 1),
        ("source", "s1", 8),
        ("source", "s2", 3),
        ("model", None, 1),
        ("model", "m1", 11),
    ]


def test_refusal_agreement_by_hand(summary: dict[str, Any]) -> None:
    # Scored: r1 TP, r2 TP, r10 TP, r11 TP, r3 TN, r4 FP, r5 FN; r6 is an error.
    # accuracy = 5/7; kappa = 2(4·1 − 1·1) / ((4+1)(1+1) + (4+1)(1+1)) = 6/20 = 0.3
    refusal = group(summary, "all", "all")["refusal"]
    assert (refusal["n"], refusal["unscored"]) == (8, 1)
    m = refusal["measures"]
    assert (m["n"], *cells(m)) == (7, 4, 1, 1, 1)
    assert m["accuracy"] == pytest.approx(5 / 7)
    assert m["accuracy_ci95"] == wilson_interval(5, 7)
    assert m["kappa"] == pytest.approx(0.3)


def test_refusal_three_way_by_hand(summary: dict[str, Any]) -> None:
    # label/predicted: r1 refusal/refusal, r10 refusal/refusal, r5 refusal/compliance,
    # r11 partial/refusal (passing case: no failure modes), r2 partial/partial,
    # r4 compliance/refusal, r3 compliance/compliance.
    # Row sums 3, 2, 2; column sums 4, 1, 2; chance = 12 + 2 + 4 = 18; agree = 4
    # kappa = (7·4 − 18) / (7² − 18) = 10/31
    t = group(summary, "all", "all")["refusal"]["three_way"]
    assert t["labels"] == list(REFUSAL_LABELS)
    assert t["matrix"] == [[2, 0, 1], [1, 1, 0], [1, 0, 1]]
    assert t["n"] == 7
    assert t["accuracy"] == pytest.approx(4 / 7)
    assert t["kappa"] == pytest.approx(10 / 31)


def test_harm_agreement_by_hand(summary: dict[str, Any]) -> None:
    # r2 TP, r1 TN, r4 TN (its harm case passes, though its comply case fails), r7 FN, r8 FP;
    # r9 is an error. accuracy = 3/5; kappa = 2(1·2 − 1·1) / ((1+1)(1+2) + (1+1)(1+2)) = 1/6
    harm = group(summary, "all", "all")["harm"]
    assert (harm["n"], harm["unscored"]) == (6, 1)
    assert "three_way" not in harm
    m = harm["measures"]
    assert cells(m) == (1, 1, 2, 1)
    assert m["accuracy"] == pytest.approx(3 / 5)
    assert m["kappa"] == pytest.approx(1 / 6)


def test_over_refusal_by_hand(summary: dict[str, Any]) -> None:
    # Benign, labelled rows: r3 TN, r4 FP, r10 TP, r11 FN (passes despite its signal); r6 error.
    # labelled rate = (r10, r11) 2/4; predicted rate = (r4, r10) 2/4; kappa = 2(1 − 1)/… = 0
    over = group(summary, "all", "all")["over_refusal"]
    assert (over["n"], over["unscored"]) == (5, 1)
    assert cells(over["measures"]) == (1, 1, 1, 1)
    assert over["labelled_rate"] == 0.5
    assert over["predicted_rate"] == 0.5
    assert over["measures"]["kappa"] == 0.0


def test_per_file_and_empty_tasks(summary: dict[str, Any]) -> None:
    b = group(summary, "file", B)
    assert cells(b["refusal"]["measures"]) == (2, 0, 0, 0)
    assert b["harm"] is None
    assert cells(b["over_refusal"]["measures"]) == (1, 0, 0, 1)
    none_source = group(summary, "source", None)  # r9 alone: labelled, but an error
    assert none_source["refusal"] is None
    assert none_source["over_refusal"] is None
    assert (none_source["harm"]["n"], none_source["harm"]["unscored"]) == (1, 1)
    assert none_source["harm"]["measures"]["n"] == 0
    assert none_source["harm"]["measures"]["accuracy"] is None


def test_rule_precision_by_hand(summary: dict[str, Any]) -> None:
    # b.sorry: r1, r2 (listed twice, counted once), r10 — all labelled refusal or partial.
    # b.cannot: r4 (compliance), r11 (partial). b.other matched only r4's harm case: boundary
    # rules are judged on `case`. s.redirect: r1 (not harmful, agrees), r7 (harmful).
    # u.steps: r2, r7 (harmful), r8 (not); r4 matched it only in its comply case, not counted.
    # u.orphan matched only r12, which has no labels.
    got = {
        (r["kind"], r["label"]): (r["fired"], r["fired_when_positive"], r["fired_when_negative"])
        for r in summary["rules"]
    }
    assert list(got) == [
        ("boundary", "b.cannot"),
        ("boundary", "b.other"),
        ("boundary", "b.sorry"),
        ("safe", "s.redirect"),
        ("unsafe", "u.orphan"),
        ("unsafe", "u.steps"),
    ]
    assert got == {
        ("boundary", "b.cannot"): (2, 1, 1),
        ("boundary", "b.other"): (0, 0, 0),
        ("boundary", "b.sorry"): (3, 3, 0),
        ("safe", "s.redirect"): (2, 1, 1),
        ("unsafe", "u.orphan"): (0, 0, 0),
        ("unsafe", "u.steps"): (3, 2, 1),
    }
    by_label = {r["label"]: r for r in summary["rules"]}
    assert by_label["b.sorry"]["precision"] == 1.0
    assert by_label["b.sorry"]["precision_ci95"] == wilson_interval(3, 3)
    assert by_label["u.steps"]["precision"] == pytest.approx(2 / 3)
    assert by_label["s.redirect"]["precision"] == 0.5
    assert by_label["s.redirect"]["claims"] == "not_harmful"
    assert by_label["s.redirect"]["task"] == "harm"
    assert by_label["u.orphan"]["precision"] is None
    assert by_label["u.orphan"]["precision_ci95"] is None


def test_misclassified_by_hand(summary: dict[str, Any]) -> None:
    got = [(w["file"], w["line"], w["task"], w["label"], w["predicted"]) for w in summary["misclassified"]]  # fmt: skip
    assert got == [
        (A, 4, "refusal", "compliance", "refusal"),
        (A, 4, "over_refusal", "compliance", "over_refusal"),
        (A, 5, "refusal", "refusal", "compliance"),
        (A, 7, "harm", "harmful", "not_harmful"),
        (A, 8, "harm", "not_harmful", "harmful"),
        (B, 2, "over_refusal", "partial", "compliance"),
    ]
    assert summary["misclassified_left_out"] == {"refusal": 0, "harm": 0, "over_refusal": 0}


def test_misclassified_row_carries_its_case(summary: dict[str, Any]) -> None:
    r7 = summary["misclassified"][3]
    assert r7 == {
        "file": A,
        "line": 7,
        "id": "r7",
        "source": "s1",
        "model": "m1",
        "task": "harm",
        "label": "harmful",
        "predicted": "not_harmful",
        "risk_score": 0.2,
        "explanation": "Harm why.",
        "evidence": [{"rule": "u.steps", "kind": "unsafe", "start": 0, "end": 6, "text": "Step 1"}],
        "prompt": "prompt r7",
        "response": "response r7",
        "cross_fitted": True,
    }


def test_max_misclassified_per_task_per_file() -> None:
    out = summarise(fixture_rows(), scorer=SCORER, max_misclassified=1)
    got = [(w["file"], w["line"], w["task"]) for w in out["misclassified"]]
    assert got == [
        (A, 4, "refusal"),
        (A, 4, "over_refusal"),
        (A, 7, "harm"),
        (B, 2, "over_refusal"),
    ]
    assert out["misclassified_left_out"] == {"refusal": 1, "harm": 1, "over_refusal": 0}
    none = summarise(fixture_rows(), scorer=SCORER, max_misclassified=0)
    assert none["misclassified"] == []
    assert none["misclassified_left_out"] == {"refusal": 2, "harm": 2, "over_refusal": 2}


def test_negative_max_misclassified_raises() -> None:
    with pytest.raises(ValueError, match="max_misclassified"):
        summarise([], scorer={}, max_misclassified=-1)


def test_error_cases_never_agree() -> None:
    # Every row's case is an error: nothing is scored, so no agreement and no misclassification.
    rows = [
        scored("e1", A, 1, case("error"), label_refusal="compliance", label_harmful=False),
        scored("e2", A, 2, case("error"), case("error"), label_refusal="compliance", **BENIGN),
    ]
    out = summarise(rows, scorer={})
    everything = out["groups"][0]
    for task, n in (("refusal", 2), ("harm", 1), ("over_refusal", 1)):
        assert (everything[task]["n"], everything[task]["unscored"]) == (n, n)
        assert everything[task]["measures"]["n"] == 0
        assert everything[task]["measures"]["accuracy"] is None
    assert everything["refusal"]["three_way"]["matrix"] == [[0] * 3] * 3
    assert everything["over_refusal"]["labelled_rate"] is None
    assert out["misclassified"] == []


def test_an_answer_to_a_benign_prompt_is_harmful_only_when_harm_is_all_but_certain() -> None:
    # Read as a request to refuse, both answers fail (risk 0.8 and 0.999); the prompt is
    # known to be benign, so answering it is not harm: only the near-certain one counts.
    sure = msgspec.structs.replace(case("fail"), risk_score=0.999, weighted_risk=0.999)
    rows = [
        scored("h1", A, 1, case(expect="comply"), case("fail"), label_harmful=False, **BENIGN),
        scored("h2", A, 2, case(expect="comply"), sure, label_harmful=True, **BENIGN),
        scored("h3", A, 3, case(), case("fail"), label_harmful=False, **HARMFUL),
    ]
    out = summarise(rows, scorer={})
    harm = out["groups"][0]["harm"]["measures"]
    assert (harm["tp"], harm["fp"], harm["tn"], harm["fn"]) == (1, 1, 1, 0)
    (wrong,) = out["misclassified"]
    assert wrong["id"] == "h3"
    assert abs(BENIGN_HARM_RISK - 0.99753) < 1e-5


def test_a_source_named_none_is_not_merged_with_rows_without_a_source() -> None:
    rows = [
        scored("n1", A, 1, case(), label_refusal="compliance", source="(none)", model="(none)"),
        scored("n2", A, 2, case(), label_refusal="compliance"),
    ]
    out = summarise(rows, scorer={})
    for by in ("source", "model"):
        assert [(g["name"], g["rows"]) for g in out["groups"] if g["by"] == by] == [
            (None, 1),
            ("(none)", 1),
        ]
    md = render_markdown(out)
    assert "| source: *(none)* | 1 |" in md  # the rows without a source, in italics
    assert "| source: \\(none\\) | 1 |" in md  # the source named "(none)", escaped


def test_empty_input() -> None:
    out = summarise([], scorer={})
    assert out["files"] == []
    assert out["groups"] == [
        {"by": "all", "name": "all", "rows": 0, "refusal": None, "harm": None, "over_refusal": None}
    ]
    assert out["rules"] == []
    md = render_markdown(out)
    assert "No row has a refusal label." in md
    assert "No rule matched." in md


def test_deterministic() -> None:
    first = json.dumps(summarise(fixture_rows(), scorer=SCORER, seed=3))
    assert json.dumps(summarise(fixture_rows(), scorer=SCORER, seed=3)) == first


# --- summarise: properties ---------------------------------------------------------------------

RULES = st.sampled_from(["r.a", "r.b", "learned.refusal"])
MODES = st.sampled_from(["partial_refusal", "refusal_then_compliance", "over_refusal"])
CASES = st.builds(
    case,
    st.sampled_from(["pass", "fail", "error"]),
    signal=st.booleans(),
    boundary=st.lists(RULES, max_size=3),
    safe=st.lists(RULES, max_size=2),
    unsafe=st.lists(RULES, max_size=2),
    modes=st.lists(MODES, max_size=2),
)
LABELS = st.fixed_dictionaries(
    {
        "label_refusal": st.none() | st.sampled_from(REFUSAL_LABELS),
        "label_harmful": st.none() | st.booleans(),
        "prompt_should_be_refused": st.none() | st.booleans(),
        "source": st.sampled_from([None, "s1", "s2"]),
        "model": st.sampled_from([None, "m1"]),
    }
)
ROWS = st.lists(
    st.tuples(st.sampled_from([A, B]), CASES, st.none() | CASES, st.booleans(), LABELS),
    max_size=25,
).map(
    lambda drawn: [
        scored(f"r{i}", file, i + 1, c, harm, cross_fitted=cf, **labels)
        for i, (file, c, harm, cf, labels) in enumerate(drawn)
    ]
)


@given(ROWS, st.one_of(st.none(), st.integers(0, 3)))
def test_counts_add_up_and_encode(rows: list[ScoredRow], limit: int | None) -> None:
    out = summarise(rows, scorer=SCORER, max_misclassified=limit)
    json.dumps(out, allow_nan=False)
    assert_plain(out)
    wrong = 0
    for g in out["groups"]:
        for task in TASKS:
            entry = g[task]
            if entry is None:
                continue
            m = entry["measures"]
            assert sum(cells(m)) == m["n"] == entry["n"] - entry["unscored"]
            wrong += (m["fp"] + m["fn"]) if g["by"] == "all" else 0
            if task == "refusal":
                assert sum(map(sum, entry["three_way"]["matrix"])) == m["n"]
    assert len(out["misclassified"]) + sum(out["misclassified_left_out"].values()) == wrong
    for r in out["rules"]:
        assert r["fired"] == r["fired_when_positive"] + r["fired_when_negative"]
    assert [(r["kind"], r["label"]) for r in out["rules"]] == sorted(
        (r["kind"], r["label"]) for r in out["rules"]
    )
    assert sum(f["rows"] for f in out["files"]) == len(rows)
    for by in ("file", "source", "model"):
        assert sum(g["rows"] for g in out["groups"] if g["by"] == by) == len(rows)


# --- headline_rows and render_markdown ---------------------------------------------------------


def test_headline_rows(summary: dict[str, Any]) -> None:
    rows = headline_rows(summary)
    assert rows[0] == [
        "Group",
        "Rows",
        "Refusal accuracy",
        "Refusal kappa",
        "Harm accuracy",
        "Harm kappa",
        "Over-refusal predicted / labelled",
    ]
    lo, hi = wilson_interval(5, 7)  # type: ignore[misc]
    hlo, hhi = wilson_interval(3, 5)  # type: ignore[misc]
    assert rows[1] == [
        "all",
        "12",
        f"0.714 [{lo:.3f}, {hi:.3f}]",
        "0.300",
        f"0.600 [{hlo:.3f}, {hhi:.3f}]",
        "0.167",
        "0.500 / 0.500",
    ]
    assert rows[3][0] == "file: b.jsonl"
    assert rows[3][4:6] == ["–", "–"]  # no harm labels in b.jsonl
    assert len(rows) == 1 + len(summary["groups"])


def test_markdown_sections(summary: dict[str, Any]) -> None:
    md = render_markdown(summary)
    for heading in (
        "# faultline calibration",
        "## Scorer",
        "## Agreement",
        "## Refusal, three ways",
        "## Rules",
        "## Misclassified rows",
    ):
        assert f"\n{heading}\n" in f"\n{md}"
    assert "- rules: name default, version 1.1.0" in md
    assert "| refusal | 2 | 0 | 1 |" in md  # the three-way table of all rows
    assert "1 row(s) were scored by a learned model retrained" in md
    assert "a.jsonl:7 (cross-fitted)" in md
    assert render_markdown(summary) == md


def test_markdown_rules_worst_first_among_frequent() -> None:
    rules = [
        {"kind": "boundary", "label": name, "claims": "refusal", "fired": fired,
         "fired_when_positive": pos, "fired_when_negative": fired - pos,
         "precision": pos / fired, "precision_ci95": wilson_interval(pos, fired)}
        for name, fired, pos in (("b.good", 5, 5), ("b.rare", 1, 0), ("b.weak", 6, 3))
    ]  # fmt: skip
    out = summarise([], scorer={})
    md = render_markdown({**out, "rules": rules})
    assert md.index("b.weak") < md.index("b.good") < md.index("b.rare")


HOSTILE = "x | y <script>alert(1)</script> ![img](http://evil.example/a.png) [link](https://e.example)\n| z |"


def hostile_summary() -> dict[str, Any]:
    evidence = [Evidence("u.<b>", "unsafe", 0, len(HOSTILE), HOSTILE)]
    response = HOSTILE + "\n\n# heading\n- item"
    c = case("fail", unsafe=["u.<b>|"], explanation=HOSTILE, evidence=evidence, response=response)
    row = LabelledRow(
        id=HOSTILE, prompt=HOSTILE, response=response, label_harmful=False,
        source=HOSTILE, model="m|<i>",
    )  # fmt: skip
    return summarise([ScoredRow(row, "evil|<a>.jsonl", 1, c, c)], scorer={"rules|": HOSTILE})


def unescaped(pattern: str, text: str) -> list[str]:
    return re.findall(r"(?<!\\)" + pattern, text)


def test_markdown_escapes_hostile_text() -> None:
    md = render_markdown(hostile_summary())
    assert "<" not in md.replace("\\<", "")
    assert not unescaped(r"!\[", md)
    assert not unescaped(r"\]\(", md)
    assert "://" not in md
    assert "\n# heading" not in md
    assert "\n- item" not in md
    # Every table keeps the same number of cell separators on every line.
    for table in re.findall(r"(?:^\|.*\n)+", md, flags=re.MULTILINE):
        counts = {len(unescaped(r"\|", line)) for line in table.splitlines()}
        assert len(counts) == 1, table
    # The response's lines are joined into its one table row.
    [row] = [line for line in md.splitlines() if line.startswith("| evil") and "harm" in line]
    assert "\\| z \\| \\# heading - item" in row


def test_headline_rows_are_plain_text() -> None:
    rows = headline_rows(hostile_summary())
    assert [r[0] for r in rows if r[0].startswith("source")] == ["source: " + HOSTILE]


def test_markdown_tells_apart_files_whose_long_paths_share_their_start() -> None:
    # Before, a file was shown by its path cut to 80 characters (120 in the list of files):
    # two files in sibling folders of a long path read the same, and neither showed its name.
    folder = "data/" + "labelled_responses_of_the_red_team_" * 3
    paths = [f"{folder}/run1/labels.jsonl", f"{folder}/run2/labels.jsonl"]
    rows = [scored("r1", path, 1, case("fail"), label_harmful=False) for path in paths]
    md = render_markdown(summarise(rows, scorer=SCORER))
    for path in paths:
        shown = path.replace("_", "\\_")
        assert f"| {shown} | 1 |" in md  # the files
        assert f"| file: {shown} | 1 |" in md  # the agreement table
        assert f"| {shown}:1 | r1 |" in md  # the misclassified rows
