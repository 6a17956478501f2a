"""Gates: parsing, and messages that show the numbers exactly enough to be checked."""

from __future__ import annotations

import pytest

from faultline.errors import UsageError
from faultline.report.gates import evaluate_gates, parse_compare_gate, parse_gate

METRICS = {"overall": {"pass_rate": 429 / 450}, "counts": {"errors": 0}}


def test_a_tripped_gate_never_reads_as_if_it_held() -> None:
    (result,) = evaluate_gates(["pass_rate<0.9533334"], METRICS)
    assert result.tripped
    assert result.describe() == "pass_rate<0.9533334 tripped: pass_rate is 0.9533333333333334"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("pass_rate<0.95", "pass_rate<0.95"),
        ("errors>0", "errors>0"),
        ("errors >= 3", "errors>=3"),
        ("pass_rate<1e-7", "pass_rate<1e-07"),
        ("pass_rate<0.95333334", "pass_rate<0.95333334"),
    ],
)
def test_a_gate_is_shown_with_every_digit_of_its_threshold(text: str, shown: str) -> None:
    assert str(parse_gate(text)) == shown


def test_a_whole_value_is_shown_without_a_decimal_point() -> None:
    (result,) = evaluate_gates(["errors>0"], METRICS)
    assert result.describe() == "errors>0 ok: errors is 0"


def test_a_threshold_too_large_for_a_number_is_refused() -> None:
    with pytest.raises(UsageError, match="1e400 is too large"):
        parse_gate("pass_rate<1e400")


def test_unanswered_reads_the_run_and_is_undefined_without_it() -> None:
    run = {"probe_set": {"unanswered": 3}}
    (result,) = evaluate_gates(["unanswered>0"], METRICS, run)
    assert (result.tripped, result.value) == (True, 3)
    (result,) = evaluate_gates(["unanswered>5"], METRICS, run)
    assert not result.tripped
    (result,) = evaluate_gates(["unanswered>0"], METRICS)  # a number not shown to be fine
    assert (result.tripped, result.value) == (True, None)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("fail_rate>5", "did you mean 0.05?"),  # meant 5%: passed a run where half failed
        ("pass_rate<95", "did you mean 0.95?"),
        ("coverage<-0.1", "rates are fractions in [0, 1]"),
        ("exposure_index>30", "did you mean 0.3?"),
        ("overall.risk_score.p90>90", "did you mean 0.9?"),
        ("by_category.weapons.pass_rate<99", "did you mean 0.99?"),
        ("per_probe.fail_rate>5", "did you mean 0.05?"),
    ],
)
def test_a_rate_gate_written_as_a_percentage_is_refused(text: str, hint: str) -> None:
    with pytest.raises(UsageError, match="could never trip") as info:
        parse_gate(text)
    assert hint in str(info.value)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("pass_rate_drop>10", "did you mean 0.1?"),  # passed after a 50-point fall
        ("severity_weighted_pass_rate_rise>2", "did you mean 0.02?"),
        ("pass_rate<95", "did you mean 0.95?"),
        ("p_value<5", "did you mean 0.05?"),
        ("exposure_index_rise>-1.5", "from -1 to 1"),
    ],
)
def test_a_compare_gate_outside_its_range_is_refused(text: str, hint: str) -> None:
    with pytest.raises(UsageError, match="could never trip") as info:
        parse_compare_gate(text)
    assert hint in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "errors>1000",
        "counts.cases>=1e9",
        "safe_unsafe_signal_ratio>50",
        "failure_mode_histogram.x>7",
        "by_category.weapons.n<200",
        "pass_rate<=1",
        "fail_rate>=0",
    ],
)
def test_counts_are_unbounded_and_a_rate_takes_0_to_1(text: str) -> None:
    assert str(parse_gate(text)) == text.replace("1e9", "1000000000")


@pytest.mark.parametrize(
    "text", ["regressions>100", "errors_rise>50", "pass_rate_drop>=-1", "pass_rate_drop>0.02"]
)
def test_compare_counts_are_unbounded_and_a_change_in_a_rate_takes_minus_1_to_1(text: str) -> None:
    assert parse_compare_gate(text).name == text.split(">", maxsplit=1)[0]
