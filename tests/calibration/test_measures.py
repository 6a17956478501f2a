"""binary_measures, confusion, wilson_interval: hand-computed tables, sklearn, properties."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score, f1_score, precision_score, recall_score

from faultline.calibration.measures import (
    _percentile_interval,
    binary_measures,
    confusion,
    wilson_interval,
)

KEYS = [
    "n",
    "positives",
    "tp",
    "fp",
    "tn",
    "fn",
    "accuracy",
    "accuracy_ci95",
    "precision",
    "precision_ci95",
    "recall",
    "recall_ci95",
    "specificity",
    "f1",
    "f1_ci95",
    "kappa",
    "kappa_ci95",
]
RATES = ["accuracy", "precision", "recall", "specificity", "f1"]
INTERVALS = ["accuracy_ci95", "precision_ci95", "recall_ci95", "f1_ci95", "kappa_ci95"]


def rows(tp: int, fp: int, tn: int, fn: int) -> tuple[list[bool], list[bool]]:
    """Truth and predicted lists with the given confusion counts, cell by cell."""
    cells = (
        [(True, True)] * tp + [(False, True)] * fp + [(False, False)] * tn + [(True, False)] * fn
    )
    return [t for t, _ in cells], [p for _, p in cells]


def assert_plain(value: Any) -> None:
    """Walk the output: only str, int, float (never NaN, never numpy), None, lists and dicts."""
    if isinstance(value, dict):
        for v in value.values():
            assert_plain(v)
    elif isinstance(value, list):
        for v in value:
            assert_plain(v)
    elif value is not None:
        assert type(value) in (int, float, str), type(value)
        if type(value) is float:
            assert not math.isnan(value)


# --- binary_measures: hand-computed tables ---------------------------------------------------


def test_hand_computed_table() -> None:
    # tp=20, fp=5, tn=65, fn=10, n=100
    # accuracy    = (20+65)/100        = 0.85
    # precision   = 20/(20+5)          = 0.8
    # recall      = 20/(20+10)         = 0.666667
    # specificity = 65/(65+5)          = 0.928571
    # F1          = 40/(40+5+10)       = 0.727273  (= 2·0.8·0.6667/(0.8+0.6667))
    # pe          = (25·30 + 75·70)/100² = (750 + 5250)/10000 = 0.6
    # kappa       = (0.85 − 0.6)/(1 − 0.6) = 0.625
    m = binary_measures(*rows(20, 5, 65, 10))
    assert list(m) == KEYS
    assert (m["n"], m["positives"], m["tp"], m["fp"], m["tn"], m["fn"]) == (100, 30, 20, 5, 65, 10)
    assert m["accuracy"] == pytest.approx(0.85)
    assert m["precision"] == pytest.approx(0.8)
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["specificity"] == pytest.approx(65 / 70)
    assert m["f1"] == pytest.approx(40 / 55)
    assert m["kappa"] == pytest.approx(0.625)
    assert_plain(m)


def test_second_hand_computed_table() -> None:
    # tp=3, fp=1, tn=4, fn=2, n=10
    # accuracy = 7/10 = 0.7; precision = 3/4 = 0.75; recall = 3/5 = 0.6; specificity = 4/5 = 0.8
    # F1 = 6/(6+1+2) = 0.666667
    # pe = ((3+1)(3+2) + (2+4)(1+4))/10² = (20 + 30)/100 = 0.5; kappa = (0.7 − 0.5)/0.5 = 0.4
    m = binary_measures(*rows(3, 1, 4, 2))
    assert m["accuracy"] == pytest.approx(0.7)
    assert m["precision"] == pytest.approx(0.75)
    assert m["recall"] == pytest.approx(0.6)
    assert m["specificity"] == pytest.approx(0.8)
    assert m["f1"] == pytest.approx(2 / 3)
    assert m["kappa"] == pytest.approx(0.4)


def test_intervals_are_wilson_on_their_own_counts() -> None:
    m = binary_measures(*rows(20, 5, 65, 10))
    assert m["accuracy_ci95"] == wilson_interval(85, 100)
    assert m["precision_ci95"] == wilson_interval(20, 25)
    assert m["recall_ci95"] == wilson_interval(20, 30)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_agrees_with_sklearn_on_random_fixtures(seed: int) -> None:
    rnd = random.Random(seed)
    truth = [rnd.random() < 0.3 + 0.1 * seed for _ in range(200)]
    # A noisy rater: agrees with truth 80% of the time.
    predicted = [t if rnd.random() < 0.8 else not t for t in truth]
    m = binary_measures(truth, predicted, resamples=200)
    assert m["kappa"] == pytest.approx(cohen_kappa_score(truth, predicted))
    assert m["f1"] == pytest.approx(f1_score(truth, predicted))
    assert m["precision"] == pytest.approx(precision_score(truth, predicted))
    assert m["recall"] == pytest.approx(recall_score(truth, predicted))


def test_unequal_lengths_raise() -> None:
    with pytest.raises(ValueError, match="same length, got 2 and 1"):
        binary_measures([True, False], [True])


def test_resamples_below_one_raise() -> None:
    with pytest.raises(ValueError, match="resamples"):
        binary_measures([True], [True], resamples=0)


# --- wilson_interval ---------------------------------------------------------------------------


def test_wilson_by_hand_for_8_of_10() -> None:
    # p = 0.8, z² = 3.841459, z²/n = 0.384146, denominator = 1.384146
    # centre = (0.8 + 0.192073)/1.384146 = 0.716740
    # half   = 1.959964·sqrt(0.016 + 0.009604)/1.384146 = 1.959964·0.160011/1.384146 = 0.226578
    # → [0.490162, 0.943318]
    low, high = wilson_interval(8, 10) or [math.nan, math.nan]
    assert low == pytest.approx(0.490162, abs=1e-6)
    assert high == pytest.approx(0.943318, abs=1e-6)


@pytest.mark.parametrize(("k", "n", "end", "value"), [(0, 3, 0, 0.0), (10, 10, 1, 1.0)])
def test_wilson_ends_are_exact_at_0_and_n(k: int, n: int, end: int, value: float) -> None:
    # faultline.metrics.stats gives 5.6e-17 for 0/3 and 0.9999999999999999 for 10/10.
    interval = wilson_interval(k, n)
    assert interval is not None
    assert interval[end] == value


def test_wilson_of_nothing_is_none() -> None:
    assert wilson_interval(0, 0) is None


@given(st.integers(1, 10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_estimate_within_0_1(case: tuple[int, int]) -> None:
    k, n = case
    interval = wilson_interval(k, n)
    assert interval is not None
    low, high = interval
    assert 0.0 <= low <= k / n <= high <= 1.0


# --- the bootstrap -----------------------------------------------------------------------------


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    truth, predicted = rows(20, 5, 65, 10)
    a = binary_measures(truth, predicted, seed=7)
    b = binary_measures(truth, predicted, seed=7)
    assert a["f1_ci95"] == b["f1_ci95"]
    assert a["kappa_ci95"] == b["kappa_ci95"]
    c = binary_measures(truth, predicted, seed=8)
    assert (c["f1_ci95"], c["kappa_ci95"]) != (a["f1_ci95"], a["kappa_ci95"])


def test_bootstrap_intervals_contain_the_point_estimate() -> None:
    m = binary_measures(*rows(20, 5, 65, 10))
    for point, key in (("f1", "f1_ci95"), ("kappa", "kappa_ci95")):
        low, high = m[key]
        assert low < m[point] < high
        assert type(low) is float
        assert type(high) is float


def test_bootstrap_does_not_depend_on_row_order() -> None:
    # The resamples are multinomial draws over the four cell counts, so only the counts matter.
    truth, predicted = rows(20, 5, 65, 10)
    pairs = list(zip(truth, predicted, strict=True))
    random.Random(0).shuffle(pairs)
    shuffled = binary_measures([t for t, _ in pairs], [p for _, p in pairs])
    assert shuffled == binary_measures(truth, predicted)


def test_everyone_says_yes_gives_no_kappa_and_a_point_f1_interval() -> None:
    # All tp: pe = 1, so kappa and its interval are None; F1 is 1 in every resample.
    m = binary_measures([True] * 10, [True] * 10)
    assert m["kappa"] is None
    assert m["kappa_ci95"] is None
    assert m["f1"] == 1.0
    assert m["f1_ci95"] == [1.0, 1.0]


def test_everyone_says_no_gives_no_f1_and_no_kappa() -> None:
    # All tn: 2tp+fp+fn = 0 and pe = 1, in the data and in every resample.
    m = binary_measures([False] * 10, [False] * 10)
    assert (m["f1"], m["f1_ci95"], m["kappa"], m["kappa_ci95"]) == (None, None, None, None)
    assert (m["precision"], m["recall"], m["specificity"]) == (None, None, 1.0)


def test_percentile_interval_needs_half_the_resamples_defined() -> None:
    nan = math.nan
    assert _percentile_interval(np.array([0.1, 0.2, nan, nan, nan]), 5) is None
    assert _percentile_interval(np.array([0.0, 1.0, nan, nan]), 4) == [
        pytest.approx(0.025),
        pytest.approx(0.975),
    ]


# --- edge cases --------------------------------------------------------------------------------


def test_no_rows() -> None:
    m = binary_measures([], [])
    assert list(m) == KEYS
    assert [m[k] for k in ("n", "positives", "tp", "fp", "tn", "fn")] == [0] * 6
    assert all(m[k] is None for k in KEYS[6:])


def test_no_predicted_positives() -> None:
    # tp=0, fp=0, tn=2, fn=2: precision undefined; recall 0/2; F1 = 0/(0+0+2) = 0
    # pe = (0·2 + 4·2)/16 = 0.5, po = 0.5 → kappa 0
    m = binary_measures([True, True, False, False], [False] * 4)
    assert (m["precision"], m["precision_ci95"]) == (None, None)
    assert (m["recall"], m["f1"], m["kappa"], m["accuracy"]) == (0.0, 0.0, 0.0, 0.5)
    assert m["recall_ci95"] == wilson_interval(0, 2)
    assert_plain(m)


def test_no_truth_positives() -> None:
    # tp=0, fp=1, tn=3, fn=0: recall undefined; precision 0/1; F1 = 0/(0+1+0) = 0
    # pe = (1·0 + 3·4)/16 = 0.75, po = 0.75 → kappa 0; specificity 3/4
    m = binary_measures([False] * 4, [True, False, False, False])
    assert (m["recall"], m["recall_ci95"]) == (None, None)
    assert (m["precision"], m["f1"], m["kappa"], m["specificity"]) == (0.0, 0.0, 0.0, 0.75)
    assert_plain(m)


def test_all_correct() -> None:
    m = binary_measures([True, True, False, False, False], [True, True, False, False, False])
    assert [m[k] for k in ("accuracy", "precision", "recall", "specificity", "f1", "kappa")] == [
        1.0
    ] * 6
    assert m["kappa_ci95"] == [1.0, 1.0]
    assert_plain(m)


def test_all_wrong() -> None:
    # tp=0, fp=3, tn=0, fn=2: every rate 0
    # pe = ((0+3)(0+2) + (2+0)(3+0))/25 = 12/25 = 0.48; kappa = (0 − 0.48)/0.52 = −12/13
    m = binary_measures([True, True, False, False, False], [False, False, True, True, True])
    assert [m[k] for k in ("accuracy", "precision", "recall", "specificity", "f1")] == [0.0] * 5
    assert m["kappa"] == pytest.approx(-12 / 13)
    assert_plain(m)


def test_opposite_constant_raters_have_kappa_zero() -> None:
    # Truth always yes, verdict always no: pe = (0·4 + 4·0)/16 = 0 ≠ 1, so kappa = (0 − 0)/1 = 0.
    m = binary_measures([True] * 4, [False] * 4)
    assert m["kappa"] == 0.0
    assert m["kappa"] == cohen_kappa_score([1] * 4, [0] * 4)


# --- properties --------------------------------------------------------------------------------

pairs_strategy = st.lists(st.tuples(st.booleans(), st.booleans()), max_size=40)


@given(pairs_strategy, st.randoms(use_true_random=False))
def test_binary_measures_properties(pairs: list[tuple[bool, bool]], rnd: random.Random) -> None:
    truth, predicted = [t for t, _ in pairs], [p for _, p in pairs]
    m = binary_measures(truth, predicted, resamples=100)
    assert list(m) == KEYS
    assert m["tp"] + m["fp"] + m["tn"] + m["fn"] == m["n"] == len(pairs)
    for key in RATES:
        assert m[key] is None or 0.0 <= m[key] <= 1.0
    assert m["kappa"] is None or -1.0 <= m["kappa"] <= 1.0
    for key in INTERVALS:
        point = m[key.removesuffix("_ci95")]
        assert (m[key] is None) if point is None else (m[key] is None or m[key][0] <= m[key][1])
    assert_plain(m)
    # Intervals included: the bootstrap draws from the cell counts, not from the row order.
    rnd.shuffle(pairs)
    assert binary_measures([t for t, _ in pairs], [p for _, p in pairs], resamples=100) == m


@given(pairs_strategy)
def test_binary_kappa_equals_two_class_confusion_kappa(pairs: list[tuple[bool, bool]]) -> None:
    truth, predicted = [t for t, _ in pairs], [p for _, p in pairs]
    table = confusion(
        ["yes" if t else "no" for t in truth],
        ["yes" if p else "no" for p in predicted],
        ["yes", "no"],
    )
    m = binary_measures(truth, predicted, resamples=1)
    assert table["kappa"] == m["kappa"]
    assert table["accuracy"] == m["accuracy"]
    assert table["matrix"] == [[m["tp"], m["fn"]], [m["fp"], m["tn"]]]


# --- confusion ---------------------------------------------------------------------------------

LABELS = ["refusal", "partial", "compliance"]


def three_class_rows() -> tuple[list[str], list[str]]:
    #                 predicted: refusal partial compliance | row sum
    # truth refusal               10       2        1       |   13
    # truth partial                3       5        2       |   10
    # truth compliance             0       1        6       |    7
    # column sum                  13       8        9       |   30
    table = [[10, 2, 1], [3, 5, 2], [0, 1, 6]]
    truth, predicted = [], []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            truth += [LABELS[i]] * count
            predicted += [LABELS[j]] * count
    return truth, predicted


def test_confusion_three_classes_by_hand() -> None:
    # accuracy = (10+5+6)/30 = 0.7
    # pe = (13·13 + 10·8 + 7·9)/30² = (169 + 80 + 63)/900 = 312/900 = 0.346667
    # kappa = (0.7 − 0.346667)/(1 − 0.346667) = 318/588 = 0.540816
    truth, predicted = three_class_rows()
    table = confusion(truth, predicted, LABELS)
    assert table == {
        "labels": LABELS,
        "matrix": [[10, 2, 1], [3, 5, 2], [0, 1, 6]],
        "n": 30,
        "accuracy": pytest.approx(0.7),
        "kappa": pytest.approx(318 / 588),
    }
    assert table["kappa"] == pytest.approx(cohen_kappa_score(truth, predicted))
    assert_plain(table)


def test_confusion_of_nothing() -> None:
    table = confusion([], [], LABELS)
    assert table["matrix"] == [[0] * 3] * 3
    assert (table["n"], table["accuracy"], table["kappa"]) == (0, None, None)


def test_confusion_kappa_is_none_when_both_raters_are_constant() -> None:
    table = confusion(["partial"] * 3, ["partial"] * 3, LABELS)
    assert (table["accuracy"], table["kappa"]) == (1.0, None)


def test_confusion_names_an_unknown_label() -> None:
    with pytest.raises(ValueError, match="predicted value 'maybe' is not one of the labels"):
        confusion(["refusal", "partial"], ["refusal", "maybe"], LABELS)


def test_confusion_unequal_lengths_raise() -> None:
    with pytest.raises(ValueError, match="same length"):
        confusion(["refusal"], [], LABELS)


def test_confusion_repeated_labels_raise() -> None:
    with pytest.raises(ValueError, match="distinct"):
        confusion([], [], ["refusal", "refusal"])
