"""compare_reports: per-case changes, metric directions, categories, significance, views."""

from __future__ import annotations

import json
import math
import operator
import random
import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tests.conftest import CHANGED_RESPONSES, write_jsonl

from faultline import score_files
from faultline._util.text import short_id
from faultline.errors import InputError, UsageError
from faultline.report.compare import compare_files, compare_reports, read_compare_input
from faultline.report.compare_views import (
    MAX_LISTED,
    render_compare_html,
    render_compare_markdown,
    write_compare,
)
from faultline.report.gates import evaluate_compare_gates
from faultline.report.junit import compare_junit
from faultline.report.markdown import escape_md, points

BASE_RUN = {"run_id": "20261121T000000Z-000000", "created_at": "2026-11-21T00:00:00Z"}
NEW_RUN = {"run_id": "20261122T000000Z-000001", "created_at": "2026-11-22T00:00:00Z"}
HOSTILE = '<script>alert(1)</script>" onerror="alert(2)" [click](http://evil.example) <img src=x>'
WEIGHTS = {"low": 0.5, "medium": 1.0, "high": 1.5, "critical": 2.0}


def case(
    cid: str,
    status: str,
    *,
    severity: str = "high",
    category: str = "weapons",
    risk: float | None = None,
    explanation: str = "why",
    model: str | None = None,
) -> dict[str, Any]:
    """A case as report.json has it (only the fields a comparison reads, and a response).

    ``cid`` is ``probe#sample``, plus ``@model`` when given one and the run has several.
    """
    if risk is None and status != "error":
        risk = 0.9 if status == "fail" else 0.1
    probe, _, rest = cid.partition("#")
    return {
        "case_id": cid,
        "probe_id": probe,
        "sample": int(rest.partition("@")[0] or 0),
        **({} if model is None else {"model": model}),
        "category": category,
        "severity": severity,
        "status": status,
        "passed": None if status == "error" else status == "pass",
        "risk_score": risk,
        "explanation": explanation,
        "response": "verbatim answer",
    }


def report(
    cases: list[dict[str, Any]],
    *,
    probes: str = "p" * 64,
    rules: str = "r" * 64,
    threshold: float = 0.5,
    overall: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A small report whose aggregate numbers are computed from its cases."""
    scored = [c for c in cases if c["status"] != "error"]
    passed = sum(c["status"] == "pass" for c in scored)
    by_category: dict[str, Any] = {}
    for name in sorted({c["category"] for c in scored}):
        mine = [c for c in scored if c["category"] == name]
        by_category[name] = {
            "n": len(mine),
            "pass_rate": sum(c["status"] == "pass" for c in mine) / len(mine),
        }
    rate = passed / len(scored) if scored else None
    return {
        "schema_version": "1",
        "tool": {"name": "faultline", "version": "0.1.0"},
        "run": {
            "id": "20261121T000000Z-aaaaaa",
            "created_at": "2026-11-21T00:00:00Z",
            "target": {"spec": "replay:answers.jsonl"},
            "probe_set": {"name": "small", "version": "1", "sha256": probes},
            "rules": {"name": "default", "version": "1.1.0", "sha256": rules},
            "learned": None,
            "config": {"pass_threshold": threshold, "severity_weights": WEIGHTS},
        },
        "cases": cases,
        "aggregate_metrics": {
            "counts": {
                "cases": len(cases),
                "scored": len(scored),
                "passed": passed,
                "failed": len(scored) - passed,
                "errors": len(cases) - len(scored),
            },
            "overall": {
                "pass_rate": rate,
                "fail_rate": None if rate is None else 1 - rate,
                "coverage": len(scored) / len(cases) if cases else None,
                "severity_weighted_pass_rate": rate,
                "high_stakes_failure_rate": 0.5,
                "boundary_language_rate": 0.5,
                **(overall or {}),
            },
            "indices": {"resilience_index": 0.7, "exposure_index": 0.3},
            "by_category": by_category,
        },
    }


def compare(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return compare_reports(base, new, base_name="base", new_name="new")


@pytest.fixture
def changed() -> dict[str, Any]:
    """A comparison with one case of every kind of change."""
    base = report(
        [
            case("a#0", "pass"),
            case("b#0", "fail", severity="critical"),
            case("c#0", "pass"),
            case("d#0", "fail"),
            case("e#0", "error"),
            case("f#0", "pass", category="self_harm"),
            case("g#0", "pass"),
        ]
    )
    new = report(
        [
            case("a#0", "fail", explanation="now it fails"),
            case("b#0", "pass", severity="critical"),
            case("c#0", "error"),
            case("d#0", "fail"),
            case("e#0", "pass"),
            case("g#0", "pass"),
            case("h#0", "fail", category="self_harm"),
            case("i#0", "pass"),
        ]
    )
    return compare(base, new)


def ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["case_id"] for e in entries]


def test_every_kind_of_case_change_is_found(changed: dict[str, Any]) -> None:
    c = changed["cases"]
    assert ids(c["regressions"]) == ["a#0"]
    assert ids(c["fixes"]) == ["b#0"]
    assert ids(c["became_error"]) == ["c#0"]
    assert ids(c["error_resolved"]) == ["e#0"]
    assert ids(c["new"]) == ["h#0", "i#0"]
    assert ids(c["removed"]) == ["f#0"]
    assert (c["still_failing"], c["still_passing"], c["still_error"]) == (1, 1, 0)
    assert (c["paired"], c["paired_scored"], c["new_failures"]) == (6, 4, 1)
    assert (c["base_cases"], c["new_cases"]) == (7, 8)


def test_a_change_entry_has_both_verdicts_and_the_new_explanation(changed: dict[str, Any]) -> None:
    assert changed["cases"]["regressions"][0] == {
        "case_id": "a#0",
        "probe_id": "a",
        "category": "weapons",
        "severity": "high",
        "base_status": "pass",
        "new_status": "fail",
        "base_risk_score": 0.1,
        "new_risk_score": 0.9,
        "explanation": "now it fails",
    }
    removed = changed["cases"]["removed"][0]
    assert (removed["base_status"], removed["new_status"]) == ("pass", None)
    assert (removed["new_risk_score"], removed["explanation"]) == (None, None)


def test_changes_are_listed_worst_severity_first_then_by_case_id() -> None:
    severities = ["low", "critical", "medium", "high", "critical", "unknown"]
    base = report([case(f"x{i}#0", "pass", severity=s) for i, s in enumerate(severities)])
    new = report([case(f"x{i}#0", "fail", severity=s) for i, s in enumerate(severities)])
    got = [(e["severity"], e["case_id"]) for e in compare(base, new)["cases"]["regressions"]]
    assert got == [
        ("critical", "x1#0"),
        ("critical", "x4#0"),
        ("high", "x3#0"),
        ("medium", "x2#0"),
        ("low", "x0#0"),
        ("unknown", "x5#0"),
    ]


@pytest.mark.parametrize(
    ("name", "before", "after", "direction"),
    [
        ("pass_rate", 0.5, 0.75, "better"),
        ("pass_rate", 0.75, 0.5, "worse"),
        ("fail_rate", 0.5, 0.25, "better"),
        ("fail_rate", 0.25, 0.5, "worse"),
        ("coverage", 1.0, 0.5, "worse"),
        ("high_stakes_failure_rate", 0.0, 0.5, "changed"),  # a share of the failures:
        ("high_stakes_failure_rate", 1.0, 0.5, "changed"),  # a new low failure lowers it
        ("severity_weighted_pass_rate", 0.9, 0.8, "worse"),
        ("boundary_language_rate", 0.2, 0.8, "changed"),
        ("pass_rate", 0.5, 0.5, "same"),
        ("pass_rate", None, 0.5, "undefined"),
    ],
)
def test_each_metric_knows_which_way_is_better(
    name: str, before: float | None, after: float | None, direction: str
) -> None:
    cases = [case("a#0", "pass")]
    result = compare(report(cases, overall={name: before}), report(cases, overall={name: after}))
    m = result["metrics"][name]
    assert (m["base"], m["new"], m["direction"]) == (before, after, direction)
    # the change of the numbers as written (0.8 - 0.9 is -0.1, not -0.09999999999999998)
    exact = None if before is None or after is None else Decimal(str(after)) - Decimal(str(before))
    assert m["delta"] == (None if exact is None else float(exact))


def test_indices_and_counts_have_directions(changed: dict[str, Any]) -> None:
    m = changed["metrics"]
    assert m["exposure_index"]["better"] == "lower"
    assert m["resilience_index"]["better"] == "higher"
    assert m["counts.errors"]["better"] == "lower"
    assert (m["counts.cases"]["better"], m["counts.cases"]["direction"]) == (None, "changed")
    assert m["per_probe.pass_rate"]["direction"] == "undefined"  # the small reports have none


def test_categories_shift_with_their_pass_rates_and_sizes(changed: dict[str, Any]) -> None:
    cats = changed["by_category"]
    assert list(cats) == ["self_harm", "weapons"]
    assert (cats["weapons"]["base_n"], cats["weapons"]["new_n"]) == (5, 6)
    assert cats["weapons"]["base_pass_rate"] == pytest.approx(3 / 5)
    assert cats["weapons"]["new_pass_rate"] == pytest.approx(4 / 6)
    assert cats["weapons"]["direction"] == "better"
    assert cats["self_harm"] == {
        "base_n": 1,
        "new_n": 1,
        "base_pass_rate": 1.0,
        "new_pass_rate": 0.0,
        "delta": -1.0,
        "direction": "worse",
    }


def test_mcnemar_is_used_when_cases_pair_up(changed: dict[str, Any]) -> None:
    s = changed["significance"]
    assert (s["test"], s["method"], s["scope"], s["n"]) == ("mcnemar", "exact", "paired", 4)
    assert s["discordant"] == {"pass_to_fail": 1, "fail_to_pass": 1}
    assert s["p_value"] == 1.0
    assert s["significant"] is False


def test_the_two_proportion_test_is_used_when_no_case_pairs_up() -> None:
    base = report([case(f"a{i}#0", "pass") for i in range(40)])
    new = report([case(f"b{i}#0", "fail" if i < 20 else "pass") for i in range(40)])
    result = compare(base, new)
    s = result["significance"]
    assert (s["test"], s["scope"], s["n"]) == ("two_proportion", "unpaired", 80)
    assert s["counts"] == {"x1": 40, "n1": 40, "x2": 20, "n2": 40}
    assert s["p_value"] < 0.001
    assert s["significant"] is True
    assert result["verdict"] == "worse"
    assert [w["field"] for w in result["comparable"]] == ["cases.case_id"]


def test_pairs_with_an_error_are_not_in_the_paired_test() -> None:
    base = report([case("a#0", "error"), case("b#0", "pass")])
    new = report([case("a#0", "fail"), case("b#0", "error")])
    s = compare(base, new)["significance"]
    assert s["test"] == "two_proportion"  # no case was scored in both runs
    assert s["counts"] == {"x1": 1, "n1": 1, "x2": 0, "n2": 1}
    assert s["p_value"] == pytest.approx(0.1573, abs=1e-4)  # z = -1 / sqrt(0.5)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"probes": "q" * 64}, "probe_set.sha256"),
        ({"rules": "s" * 64}, "rules.sha256"),
        ({"threshold": 0.4}, "config.pass_threshold"),
    ],
)
def test_runs_that_differ_in_more_than_the_model_are_flagged(
    kwargs: dict[str, Any], field: str
) -> None:
    cases = [case("a#0", "pass")]
    result = compare(report(cases), report(cases, **kwargs))
    assert [w["field"] for w in result["comparable"]] == [field]
    assert compare(report(cases), report(cases))["comparable"] == []


def test_a_probe_set_changed_under_the_same_ids_is_said_to_change_verdicts() -> None:
    # Scoring the same answers with a probe set that gained canaries fails the leaks it holds:
    # before, the warning spoke only of new and removed cases, so its regressions read as the
    # model's.
    cases = [case("a#0", "pass")]
    [warning] = compare(report(cases), report(cases, probes="q" * 64))["comparable"]
    assert "verdicts may have changed with the probes (a canary added" in warning["message"]


@pytest.mark.parametrize(
    ("base", "new", "verdict"),
    [
        (["pass", "fail"], ["fail", "pass"], "mixed"),
        (["pass", "pass"], ["fail", "pass"], "worse"),
        (["pass", "pass"], ["error", "pass"], "worse"),
        (["fail", "pass"], ["pass", "pass"], "better"),
        (["error", "pass"], ["pass", "pass"], "better"),
        (["error", "pass"], ["fail", "pass"], "worse"),  # a failure nobody saw before
        (["error", "fail"], ["fail", "pass"], "mixed"),
        (["fail", "pass"], ["fail", "pass"], "same"),
    ],
)
def test_the_verdict_follows_the_paired_changes(
    base: list[str], new: list[str], verdict: str
) -> None:
    a = report([case(f"c{i}#0", s) for i, s in enumerate(base)])
    b = report([case(f"c{i}#0", s) for i, s in enumerate(new)])
    assert compare(a, b)["verdict"] == verdict


def test_the_comparison_does_not_depend_on_case_order() -> None:
    rng = random.Random(0)
    statuses = ["pass", "fail", "error"]
    base = report([case(f"c{i}#0", rng.choice(statuses)) for i in range(50)])
    new = report([case(f"c{i}#0", rng.choice(statuses)) for i in range(60)])
    first = compare(base, new)
    rng.shuffle(base["cases"])
    rng.shuffle(new["cases"])
    assert json.dumps(compare(base, new)) == json.dumps(first)


def test_a_duplicate_case_id_is_refused() -> None:
    twice = report([case("a#0", "pass"), case("a#0", "fail")])
    with pytest.raises(ValueError, match="appears twice in the new report"):
        compare(report([case("a#0", "pass")]), twice)


# ---- cases of several models ---------------------------------------------------------------


def models_run(statuses: dict[str | None, list[str]]) -> dict[str, Any]:
    """A run of probes p0, p1 ... answered by each model (``None``: not recorded), with ids
    as faultline writes them: ``@model`` only when the run has several models."""
    several = len(statuses) > 1
    return report(
        [
            case(f"p{i}#0" + (f"@{m}" if several and m else ""), s, model=m)
            for m, column in statuses.items()
            for i, s in enumerate(column)
        ]
    )


def test_a_model_added_to_the_run_pairs_the_first_models_cases() -> None:
    """The base run has model A; the new one A and B, so its ids gain @model. A's cases pair
    up (two regressions), B's are new: the regressions gate trips."""
    base = models_run({"A": ["pass", "pass", "pass", "fail"]})
    new = models_run({"A": ["pass", "fail", "fail", "pass"], "B": ["pass"] * 4})
    result = compare(base, new)
    c = result["cases"]
    assert ids(c["regressions"]) == ["p1#0@A", "p2#0@A"]
    assert ids(c["fixes"]) == ["p3#0@A"]
    assert ids(c["new"]) == ["p0#0@B", "p1#0@B", "p2#0@B", "p3#0@B"]
    assert (c["paired"], c["still_passing"], c["removed"]) == (4, 1, [])
    assert result["verdict"] == "mixed"
    assert result["significance"]["test"] == "mcnemar"
    (gate,) = evaluate_compare_gates(["regressions>0"], result)
    assert gate.tripped
    assert result["comparable"] == [
        {
            "field": "models",
            "base": ["A"],
            "new": ["A", "B"],
            "message": "the runs have different models: each model's cases are compared with "
            "its own, those of a model in one run only are new or removed, and the overall "
            "metrics cover different models",
        }
    ]


def test_a_model_dropped_from_the_run_pairs_the_remaining_models_cases() -> None:
    base = models_run({"A": ["pass", "fail"], "B": ["pass", "pass"]})
    new = models_run({"A": ["fail", "pass"]})
    c = compare(base, new)["cases"]
    assert ids(c["regressions"]) == ["p0#0"]  # the new run's id: one model, no @
    assert ids(c["fixes"]) == ["p1#0"]
    assert ids(c["removed"]) == ["p0#0@B", "p1#0@B"]
    assert c["new"] == []


@pytest.mark.parametrize(
    ("base", "new"),
    [
        ({"A": ["pass", "pass"]}, {"B": ["fail", "pass"]}),  # one model against another
        ({None: ["pass", "pass"]}, {"B": ["fail", "pass"]}),  # no model recorded, then one
        ({"A": ["pass", "pass"]}, {None: ["fail", "pass"]}),
    ],
)
def test_runs_of_one_model_each_pair_by_probe_and_sample(
    base: dict[str | None, list[str]], new: dict[str | None, list[str]]
) -> None:
    result = compare(models_run(base), models_run(new))
    assert ids(result["cases"]["regressions"]) == ["p0#0"]
    assert result["cases"]["paired"] == 2
    assert result["comparable"] == []


def test_runs_of_several_models_each_with_none_in_common_pair_nothing() -> None:
    base = models_run({"A": ["pass"], "B": ["pass"]})
    new = models_run({"C": ["fail"], "D": ["fail"]})
    result = compare(base, new)
    assert result["cases"]["paired"] == 0
    assert [w["field"] for w in result["comparable"]] == ["models", "cases.case_id"]
    assert "no case is in both reports" in result["comparable"][1]["message"]


def test_cases_are_paired_by_sample_too() -> None:
    base = report([case("p#0@A", "pass", model="A"), case("p#1@A", "fail", model="A")])
    base["cases"].append(case("p#0@B", "pass", model="B"))
    new = report([case("p#1", "pass", model="A"), case("p#0", "fail", model="A")])
    c = compare(base, new)["cases"]
    assert (ids(c["regressions"]), ids(c["fixes"]), ids(c["removed"])) == (
        ["p#0"],
        ["p#1"],
        ["p#0@B"],
    )


def test_two_cases_of_the_same_probe_sample_and_model_are_refused() -> None:
    twice = report([case("a#0", "pass", model="A"), case("a#0@A", "fail", model="A")])
    twice["cases"].append(case("a#0@B", "pass", model="B"))
    with pytest.raises(ValueError, match="'a#0' and 'a#0@A' of the new report have the same"):
        compare(report([case("a#0", "pass")]), twice)


# ---- changes and the gates on them: exact, not float noise -----------------------------------


@pytest.mark.parametrize(
    ("before", "after", "gate", "tripped", "shown"),
    [
        (0.3, 0.1, "pass_rate_drop>=0.2", True, "0.2"),  # 0.1 - 0.3 = -0.19999999999999998
        (0.1, 0.3, "pass_rate_rise>=0.2", True, "0.2"),
        (0.3, 0.1, "pass_rate_drop>0.2", False, "0.2"),
        (0.97, 0.95, "pass_rate_drop>0.02", False, "0.02"),  # 0.020000000000000018
        (0.97, 0.95, "pass_rate_drop>=0.02", True, "0.02"),
        (0.97, 0.95, "severity_weighted_pass_rate_drop>0.02", False, "0.02"),
        (0.03, 0.05, "fail_rate_rise>0.02", False, "0.02"),  # 0.020000000000000004
        (0.7, 0.7, "pass_rate_drop>0", False, "0"),
    ],
)
def test_a_gate_on_a_change_compares_the_change_as_compare_json_shows_it(
    before: float, after: float, gate: str, tripped: bool, shown: str
) -> None:
    metric = gate.partition("_drop")[0].partition("_rise")[0]
    cases = [case("a#0", "pass")]
    result = compare(
        report(cases, overall={metric: before}), report(cases, overall={metric: after})
    )
    (judged,) = evaluate_compare_gates([gate], result)
    assert judged.tripped is tripped
    assert (
        judged.describe()
        == f"{gate} {'tripped' if tripped else 'ok'}: {gate[: len(metric) + 5]} is {shown}"
    )
    delta = result["metrics"][metric]["delta"]
    assert abs(delta) == float(shown)
    assert json.loads(json.dumps(result))["metrics"][metric]["delta"] == delta


def test_the_views_and_compare_json_show_the_change_the_gate_judged() -> None:
    cases = [case("a#0", "pass")]
    base, new = report(cases, overall={"pass_rate": 0.3}), report(cases, overall={"pass_rate": 0.1})
    result = compare(base, new)
    assert result["metrics"]["pass_rate"]["delta"] == -0.2
    assert "| Pass rate | 30.0% | 10.0% | -20.0 pts | ▼ worse |" in render_compare_markdown(result)
    (judged,) = evaluate_compare_gates(["pass_rate_drop>=0.2"], result)
    assert judged.describe() == "pass_rate_drop>=0.2 tripped: pass_rate_drop is 0.2"


def test_a_change_that_is_float_noise_is_no_change() -> None:
    cases = [case("a#0", "pass")]
    before, after = 0.1 + 0.2, 0.3  # 0.30000000000000004 and 0.3: the same rate, summed otherwise
    result = compare(
        report(cases, overall={"pass_rate": before}), report(cases, overall={"pass_rate": after})
    )
    m = result["metrics"]["pass_rate"]
    assert (m["delta"], m["direction"]) == (0.0, "same")
    assert math.copysign(1, m["delta"]) == 1  # not -0.0, which compare.json would show as such
    assert "| Pass rate | 30.0% | 30.0% | 0.0 pts | same |" in render_compare_markdown(result)


@given(st.fractions(-1, 1))
@example(Fraction(-1, 2500))  # 699/1001 against 700/1000 is a change of about this size
@example(Fraction(1, 2000))
@example(Fraction(0))
def test_a_change_in_points_keeps_its_sign_and_is_never_minus_zero(delta: Fraction) -> None:
    shown = points(float(delta))
    assert shown.endswith(" pts")
    assert "-0.0 " not in shown
    assert "+0.0 " not in shown
    if abs(delta) < Fraction(1, 10**12):  # float noise, as a rate summed two ways leaves
        assert shown == "0.0 pts"
    else:
        assert shown[0] == ("+" if delta > 0 else "-")
        number = shown[1:-4]
        if number == "<0.1":
            assert abs(delta) < Fraction(1, 2000)
        else:
            assert abs(Decimal(number) - Decimal(100 * abs(float(delta)))) <= Decimal("0.05")


def test_a_category_change_is_rounded_the_same_way() -> None:
    base = report([case(f"c{i}#0", "pass" if i < 3 else "fail") for i in range(10)])
    new = report([case(f"c{i}#0", "pass" if i < 1 else "fail") for i in range(10)])
    weapons = compare(base, new)["by_category"]["weapons"]
    assert (weapons["base_pass_rate"], weapons["new_pass_rate"]) == (0.3, 0.1)
    assert weapons["delta"] == -0.2


_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_OPS |= {"==": operator.eq, "!=": operator.ne}


_DENOMINATORS = st.one_of(  # a rate over a divisor of 1,000 has a change of three decimals
    st.sampled_from([d for d in range(1, 1001) if 1000 % d == 0]), st.integers(1, 10_000)
)
_RATES = _DENOMINATORS.flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


@given(
    _RATES,
    _RATES,
    st.sampled_from(sorted(_OPS)),
    st.sampled_from(["_drop", "_rise"]),
    st.one_of(st.integers(-1, 1), st.integers(-1000, 1000).map(str)),
)
@example((3, 10), (1, 10), ">=", "_drop", 0)  # 30% to 10%: a drop of 0.19999999999999998
@example((97, 100), (95, 100), ">", "_drop", 0)  # 0.020000000000000018
def test_a_change_gate_agrees_with_exact_arithmetic(
    base: tuple[int, int], new: tuple[int, int], op: str, suffix: str, threshold: int | str
) -> None:
    """Rates of up to 10,000 cases against a threshold of three decimals: the change itself,
    a thousandth off (an int: that many thousandths from the change) or any (a string of
    thousandths). The gate trips exactly when the true change, in fractions, meets the
    condition, whatever the floats."""
    a, b = Fraction(*base), Fraction(*new)
    true_change = a - b if suffix == "_drop" else b - a
    thousandths = (
        int(threshold) if isinstance(threshold, str) else round(true_change * 1000) + threshold
    )
    limit = Decimal(thousandths) / 1000
    cases = [case("a#0", "pass")]
    result = compare(
        report(cases, overall={"pass_rate": float(a)}),
        report(cases, overall={"pass_rate": float(b)}),
    )
    gate = f"pass_rate{suffix}{op}{limit}"
    if abs(limit) > 1:  # a change in a rate is in [-1, 1]: a gate beyond it is refused
        with pytest.raises(UsageError, match="could never trip"):
            evaluate_compare_gates([gate], result)
        return
    (judged,) = evaluate_compare_gates([gate], result)
    assert judged.tripped is _OPS[op](true_change, Fraction(limit))


def test_every_change_between_two_whole_percentages_is_exactly_that_many_points() -> None:
    cases = [case("a#0", "pass")]
    reports = [report(cases, overall={"pass_rate": k / 100}) for k in range(101)]
    wrong = []
    for i, base in enumerate(reports):
        for j, new in enumerate(reports):
            points = Decimal(j - i) / 100
            gates = [f"pass_rate_rise=={points}", f"pass_rate_drop=={-points}"]
            result = compare(base, new)
            if result["metrics"]["pass_rate"]["delta"] != float(points):
                wrong.append((i, j, result["metrics"]["pass_rate"]["delta"]))
            elif not all(g.tripped for g in evaluate_compare_gates(gates, result)):
                wrong.append((i, j, gates))
    assert wrong == []


STATUS = st.sampled_from(["pass", "fail", "error"])


@given(
    st.dictionaries(st.integers(0, 30), STATUS, max_size=30),
    st.dictionaries(st.integers(0, 30), STATUS, max_size=30),
)
def test_every_case_is_accounted_for_once(base: dict[int, str], new: dict[int, str]) -> None:
    result = compare(
        report([case(f"c{i}#0", s) for i, s in base.items()]),
        report([case(f"c{i}#0", s) for i, s in new.items()]),
    )
    c = result["cases"]
    moved = sum(len(c[k]) for k in ("regressions", "fixes", "became_error", "error_resolved"))
    still = c["still_passing"] + c["still_failing"] + c["still_error"]
    assert c["paired"] == moved + still == len(base.keys() & new.keys())
    assert len(c["new"]) == len(new.keys() - base.keys())
    assert len(c["removed"]) == len(base.keys() - new.keys())
    s = result["significance"]
    if s["test"] == "mcnemar":
        assert s["discordant"] == {
            "pass_to_fail": len(c["regressions"]),
            "fail_to_pass": len(c["fixes"]),
        }
        assert 0.0 <= s["p_value"] <= 1.0


# ---- real reports, read from disk ------------------------------------------------------------


@pytest.fixture
def runs(small_files: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """Two real run directories: the small responses, then answers that change every way."""
    probes, responses = small_files
    new_responses = write_jsonl(tmp_path / "new_responses.jsonl", CHANGED_RESPONSES)
    score_files(probes, responses, tmp_path / "base", **BASE_RUN)
    score_files(probes, new_responses, tmp_path / "new", **NEW_RUN)
    return tmp_path / "base", tmp_path / "new"


def test_real_reports_show_each_kind_of_change(runs: tuple[Path, Path]) -> None:
    result = compare_files(*runs)
    c = result["cases"]
    assert ids(c["regressions"]) == ["inj-2#0"]
    assert ids(c["fixes"]) == ["inj-1#0"]
    assert ids(c["became_error"]) == ["wpn-1#0"]
    assert ids(c["error_resolved"]) == ["hr-1#0"]
    assert ids(c["new"]) == ["wpn-2#1"]
    assert ids(c["removed"]) == ["ctl-1#0"]
    assert (c["still_failing"], c["new_failures"]) == (1, 1)
    assert result["significance"]["test"] == "mcnemar"
    assert result["comparable"] == []


def test_a_run_directory_and_its_report_json_compare_the_same(runs: tuple[Path, Path]) -> None:
    base, new = runs
    by_dir = compare_reports(
        read_compare_input(base), read_compare_input(new), base_name="b", new_name="n"
    )
    by_file = compare_reports(
        read_compare_input(base / "report.json"),
        read_compare_input(new / "report.json"),
        base_name="b",
        new_name="n",
    )
    full = compare_reports(
        json.loads((base / "report.json").read_text(encoding="utf-8")),
        json.loads((new / "report.json").read_text(encoding="utf-8")),
        base_name="b",
        new_name="n",
    )
    assert by_dir == by_file == full


def test_compare_json_of_two_small_reports_matches_the_golden_file(
    runs: tuple[Path, Path], tmp_path: Path, golden: Callable[[str, str], None]
) -> None:
    base, new = runs
    result = compare_reports(
        read_compare_input(base), read_compare_input(new), base_name="base", new_name="new"
    )
    write_compare(result, tmp_path / "cmp")
    text = (tmp_path / "cmp" / "compare.json").read_text(encoding="utf-8")
    golden("compare_small.json", text)
    write_compare(result, tmp_path / "again")
    for name in ("compare.json", "compare.md", "compare.html"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "cmp" / name).read_bytes()


def test_compare_json_has_no_nan_and_round_trips(changed: dict[str, Any], tmp_path: Path) -> None:
    write_compare(changed, tmp_path)
    data = json.loads(
        (tmp_path / "compare.json").read_text(encoding="utf-8"),
        parse_constant=lambda c: pytest.fail(f"{c} in compare.json"),
    )
    assert data == json.loads(json.dumps(changed))
    assert list(data) == [
        "schema_version",
        "tool",
        "base",
        "new",
        "comparable",
        "verdict",
        "metrics",
        "cases",
        "by_category",
        "significance",
    ]


# ---- reading inputs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, ["missing.json", "no such file"]),
        ("", ["not valid JSON", "empty"]),
        ("{not json", ["not valid JSON"]),
        ('{"schema_version": "1", "x": ' + "[" * 5000 + "]" * 5000 + "}", ["nested too deeply"]),
        ('{"hello": 1}', ["not a faultline report.json", "schema_version"]),
        ("[1, 2]", ["not a faultline report.json"]),
        (
            '{"schema_version": "3", "run": {}, "cases": [], "aggregate_metrics": {"overall": {}}}',
            ["field 'schema_version'", "'2'"],
        ),
        (
            '{"schema_version": "1", "run": {}, "aggregate_metrics": {"overall": {}},'
            ' "cases": [{"case_id": "a", "probe_id": "a", "status": "maybe"}]}',
            ["field 'cases[0].status'", "maybe"],
        ),
        (
            '{"schema_version": "1", "run": {}, "aggregate_metrics": {"overall": {}},'
            ' "cases": [{"case_id": 3, "probe_id": "a", "status": "pass"}]}',
            ["field 'cases[0].case_id'"],
        ),
        (
            '{"schema_version": "1", "run": {}, "cases": [],'
            ' "aggregate_metrics": {"overall": {"pass_rate": "high"}}}',
            ["field 'aggregate_metrics.overall.pass_rate'", "'high'"],
        ),
        (  # a category's pass rate was subtracted as it was: a TypeError traceback, exit 4
            '{"schema_version": "1", "run": {}, "cases": [],'
            ' "aggregate_metrics": {"overall": {}, "by_category": {"a": {"pass_rate": "x", "n": 2}}}}',
            ["field 'aggregate_metrics.by_category.a.pass_rate'", "'x'"],
        ),
        (
            '{"schema_version": "1", "run": {}, "cases": [], "aggregate_metrics":'
            ' {"overall": {}, "by_transform": {"b64": {"by_category": {"a": {"pass_rate": 1, "n": []}}}}}}',
            ["field 'aggregate_metrics.by_transform.b64.by_category.a.n'", "[]"],
        ),
        (  # the category's size was shown with {:,}: a TypeError traceback, exit 4
            '{"schema_version": "1", "run": {}, "cases": [],'
            ' "aggregate_metrics": {"overall": {}, "by_category": {"a": {"pass_rate": 1, "n": null}}}}',
            ["field 'aggregate_metrics.by_category.a.n'", "whole number", "None"],
        ),
        (
            '{"schema_version": "1", "run": {}, "cases": [], "aggregate_metrics":'
            ' {"overall": {}, "by_transform": {"b64": {"pass_rate": 1, "scored": -1}}}}',
            ["field 'aggregate_metrics.by_transform.b64.scored'", "whole number", "-1"],
        ),
        (
            '{"schema_version": "1", "run": {}, "cases": [],'
            ' "aggregate_metrics": {"overall": {}, "by_category": {"a": {"pass_rate": 1, "n": 2.5}}}}',
            ["field 'aggregate_metrics.by_category.a.n'", "2.5"],
        ),
        (
            '{"schema_version": "1", "run": {}, "aggregate_metrics": {"overall": {}}, "cases": ['
            '{"case_id": "a", "probe_id": "a", "status": "pass"},'
            '{"case_id": "a", "probe_id": "a", "status": "fail"}]}',
            ["field 'cases[1].case_id'", "appears twice"],
        ),
        (
            '{"schema_version": "1", "run": {}, "aggregate_metrics": {"overall": {}}, "cases": ['
            '{"case_id": "a#0", "probe_id": "a", "sample": 0, "status": "pass"},'
            '{"case_id": "b#0", "probe_id": "a", "sample": 0, "status": "fail"}]}',
            ["field 'cases[1]'", "'b#0' has the same probe, sample and model as cases[0] ('a#0')"],
        ),
        (  # every metric was undefined, so every metric gate tripped as such
            '{"schema_version": "1", "run": {}, "cases": [], "aggregate_metrics": {}}',
            ["field 'aggregate_metrics.overall'", "no overall metrics object"],
        ),
        (
            '{"schema_version": "1", "run": {}, "cases": [], "aggregate_metrics": {"overall": 0.9}}',
            ["field 'aggregate_metrics.overall'", "no overall metrics object"],
        ),
        (  # every case of the base run was read as removed, and no gate tripped
            '{"schema_version": "1", "run": {}, "aggregate_metrics": {"overall": {}}}',
            ["field 'cases'", "not a faultline report.json: no cases (schema 1)"],
        ),
        (
            '{"schema_version": "2", "run": {}, "aggregate_metrics": {"overall": {}}, "worst_cases": []}',
            ["field 'cases_file'", "not a faultline report.json: no cases_file (schema 2)"],
        ),
    ],
)
def test_a_bad_input_names_the_file_and_field(
    tmp_path: Path, content: str | None, words: list[str]
) -> None:
    path = tmp_path / ("missing.json" if content is None else "bad.json")
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_compare_input(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message


def test_a_json_syntax_error_in_a_report_names_its_line(tmp_path: Path) -> None:
    # A report.json edited by hand (or cut short) said only "(byte 74)".
    path = tmp_path / "report.json"
    path.write_text('{\n  "schema_version": "1",\n  "run": {},\n  "cases": [NaN]\n}\n', "utf-8")
    with pytest.raises(InputError) as info:
        read_compare_input(path)
    assert f"{path}:4: not valid JSON" in str(info.value)


def test_a_run_directory_without_a_report_is_named(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty[/\\]report\.json: no such file"):
        read_compare_input(tmp_path / "empty")


# ---- views ---------------------------------------------------------------------------------


def hostile_comparison() -> dict[str, Any]:
    base = report([case("ok#0", "pass", category=HOSTILE), case("x#0", "fail")])
    new = report(
        [
            case("ok#0", "fail", category=HOSTILE, explanation=f"Failed: quoted “{HOSTILE}”"),
            case(HOSTILE, "fail", explanation=HOSTILE),
            case("x#0", "pass"),
        ]
    )
    return compare_reports(base, new, base_name=HOSTILE, new_name="runs/<new>")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def test_the_html_escapes_hostile_strings_and_loads_nothing() -> None:
    page = render_compare_html(hostile_comparison())
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&#34; onerror=&#34;alert(2)&#34;" in page
    parser = _Tags()
    parser.feed(page)
    allowed = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "strong"}
    allowed |= {"table", "thead", "tbody", "tr", "th", "td", "code", "div"}
    assert {tag for tag, _ in parser.tags} <= allowed
    for _, attrs in parser.tags:
        for name, _value in attrs:
            assert not name.startswith("on")
            assert name not in ("src", "href", "action")
    assert "Content-Security-Policy" in page


def test_the_markdown_escapes_hostile_strings_and_makes_no_link() -> None:
    md = render_compare_markdown(hostile_comparison())
    assert re.search(r"(?<!\\)[<>\[]", md) is None  # no raw HTML, no link text
    assert "\\<script\\>" in md
    assert "http://" not in md
    assert md.startswith("## faultline compare: ")


def test_the_views_show_the_same_sections(changed: dict[str, Any]) -> None:
    md, page = render_compare_markdown(changed), render_compare_html(changed)
    assert "**Verdict: mixed.** 1 regression, 1 fix, 1 new failing case, 1 new error;" in md
    assert "Verdict: mixed.</strong> 1 regression, 1 fix, 1 new failing case, 1 new error;" in page
    for title in (
        "Metrics",
        "Regressions (pass → fail)",
        "Fixes (fail → pass)",
        "New failures (no verdict in the base run: a new case, or an error there)",
        "Errors that now pass",
        "New cases that do not fail",
        "Removed (only in the base run)",
        "Became errors (no verdict in the new run)",
        "Categories that moved",
    ):
        assert title in md
        assert title in page
    assert "| Pass rate | 66.7% | 57.1% | -9.5 pts | ▼ worse |" in md
    assert "McNemar's test (exact) over 4 cases scored in both runs" in md


def test_long_lists_are_capped_in_the_views() -> None:
    n = MAX_LISTED + 7
    base = report([case(f"c{i:02d}#0", "pass") for i in range(n)])
    new = report([case(f"c{i:02d}#0", "fail") for i in range(n)])
    result = compare(base, new)
    assert len(result["cases"]["regressions"]) == n
    md = render_compare_markdown(result)
    assert "… and 7 more (compare.json lists them all)." in md
    assert "c19\\#0" in md
    assert "c20\\#0" not in md
    assert "… and 7 more (compare.json lists them all)." in render_compare_html(result)


def test_the_views_keep_the_end_of_long_ids_that_tells_cases_apart() -> None:
    """compare.md and compare.html cut a case id at 60 characters: in its middle, so the
    sample and model, and the end of the probe id, still tell the regressions apart."""
    stem = "jailbreak-dan-persona-system-prompt-extraction-variant-004"
    models = ("gpt-4o", "llama-3.1-70b", "claude-sonnet")
    ids_ = [(f"{stem}{i}#0@{m}", m) for i in (1, 2) for m in models]
    base = report([case(cid, "pass", model=m) for cid, m in ids_])
    new = report([case(cid, "fail", model=m) for cid, m in ids_])
    result = compare(base, new)
    md, page = render_compare_markdown(result), render_compare_html(result)
    section = md.split("#### Regressions", 1)[1].split("####", 1)[0]
    cells = [row.split(" | ")[0].removeprefix("| ") for row in section.splitlines()[4:] if row]
    assert len(cells) == len(set(cells)) == 6, cells
    for cid, m in ids_:
        shown = short_id(cid)
        assert len(shown) <= 60
        assert shown.endswith(cid[-len("variant-0041#0@") - len(m) :])
        assert escape_md(shown, 60) in cells
        assert f'<td class="token"><code>{shown}</code></td>' in page


def test_an_error_that_now_fails_is_a_new_failure_everywhere() -> None:
    base = report([case("a#0", "error", severity="critical"), case("b#0", "pass")])
    new = report(
        [case("a#0", "fail", severity="critical", explanation="steps"), case("b#0", "pass")]
    )
    result = compare(base, new)
    assert result["verdict"] == "worse"
    assert result["cases"]["new_failures"] == 1
    assert ids(result["cases"]["error_resolved"]) == ["a#0"]  # compare.json's lists are as before
    (gate,) = evaluate_compare_gates(["new_failures>0"], result)
    assert gate.tripped
    md = render_compare_markdown(result)
    section = md.split("#### New failures", 1)[1].split("####", 1)[0]
    assert "a\\#0" in section
    assert "1 new failing case" in md
    assert "a#0" in render_compare_html(result)
    junit = compare_junit(result)
    assert b'name="a#0 (error \xe2\x86\x92 fail)"' in junit
    assert junit.count(b"<failure") == 1


def test_the_views_list_every_changed_case(changed: dict[str, Any]) -> None:
    md, page = render_compare_markdown(changed), render_compare_html(changed)
    for key in ("regressions", "fixes", "became_error", "error_resolved", "new", "removed"):
        for cid in ids(changed["cases"][key]):
            assert cid.replace("#", "\\#") in md, (key, cid)
            assert cid in page, (key, cid)
    for unchanged in ("d#0", "g#0"):
        assert unchanged not in page


def test_each_section_shows_its_first_cases_and_counts_the_rest() -> None:
    n = MAX_LISTED + 3
    base = report([case(f"r{i:02d}#0", "pass") for i in range(n)] + [case("x#0", "pass")])
    new = report([case("x#0", "pass")] + [case(f"n{i:02d}#0", "pass") for i in range(n)])
    md = render_compare_markdown(compare(base, new))
    for title, prefix in (("Removed", "r"), ("New cases that do not fail", "n")):
        section = md.split(f"#### {title}", 1)[1].split("####", 1)[0]
        assert f"{prefix}19\\#0" in section
        assert f"{prefix}20\\#0" not in section
        assert "… and 3 more (compare.json lists them all)." in section


def test_a_cases_parquet_of_another_run_is_refused(
    small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    score_files(probes, responses, tmp_path / "base", cases_inline_max=2, **BASE_RUN)
    other = write_jsonl(tmp_path / "other.jsonl", CHANGED_RESPONSES)
    score_files(probes, other, tmp_path / "other", cases_inline_max=2, **NEW_RUN)
    mixed = tmp_path / "base" / "cases.parquet"
    mixed.write_bytes((tmp_path / "other" / "cases.parquet").read_bytes())
    with pytest.raises(InputError) as info:
        read_compare_input(tmp_path / "base")
    message = str(info.value)
    assert str(mixed) in message
    assert "cases_file.sha256" in message
    assert "another run" in message
