"""Gates: parsing, and messages that show the numbers exactly enough to be checked."""

from __future__ import annotations

import pytest

from faultline.errors import UsageError
from faultline.report.gates import evaluate_gates, parse_gate

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
