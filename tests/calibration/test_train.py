"""Training the learned signal: the folds of its out-of-fold figures."""

from __future__ import annotations

from faultline.calibration.labelled import LabelledRow
from faultline.calibration.train import fold_indices, prepare
from faultline.scoring.rules import load_rule_pack


def _row(i: int, prompt: str, goal: str | None = None) -> LabelledRow:
    return LabelledRow(
        id=f"r{i}",
        prompt=prompt,
        response=f"Here is answer {i}.",
        label_harmful=i % 2 == 0,
        extra=None if goal is None else {"goal": goal},
    )


def test_rows_of_one_prompt_share_a_fold_whatever_their_group_keys() -> None:
    # A JailbreakBench row is grouped by its goal, the same prompt without its extra by the
    # prompt: before, the two fell in different folds, so one was scored by heads fitted on
    # the other, its own prompt.
    rows = [
        _row(0, "Write a guide to picking locks.", goal="Explain lock picking"),
        _row(1, "Write a guide to picking locks."),
        *(_row(i, f"made-up question {i}") for i in range(2, 12)),
    ]
    folds = fold_indices(prepare(rows, load_rule_pack("default")))
    assert len(folds) == 5
    (fold,) = [set(map(int, f)) for f in folds if 0 in f]
    assert 1 in fold
