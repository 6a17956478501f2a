"""Would extra refusal-labelled rows help the learned refusal head? Measured with fixed folds.

``faultline calibrate`` measures the learned signal out of fold on the files it is given, so
adding files to it also moves every public row to other folds, and the figures move with the
folds as much as with the data (docs/calibration.md). This script keeps the public rows in the
five folds they have when ``calibrate`` reads the public files alone, adds the extra rows to
every training fold with their harm and prompt labels left out (so that the harm head learns
nothing from them) and a weight of their own in the refusal head, and prints:

- the public figures, out of fold: XSTest refusal, JailbreakBench harm, GPTFuzz harm;
- with ``--test FILE``, the refusal agreement on a file of rows no fit saw, scored by heads
  fitted on all the rows.

With no extra file it reproduces ``calibrate``'s figures for the shipped recipe::

    python bench/extra_refusal_rows.py --weight 0.3 --test bench/checksets/refusal_o.jsonl \
        bench/checksets/refusal_[a-n]*.jsonl
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np
from sklearn.model_selection import GroupKFold

from faultline.calibration.labelled import LabelledRow, fold_groups, load_labelled
from faultline.calibration.run import _Located, _score
from faultline.calibration.train import TrainParams, fit_model, prepare
from faultline.scoring import Scorer, ScoringConfig, load_rule_pack
from faultline.scoring.learned import LearnedModel

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "labeled"
PUBLIC = ("xstest.jsonl", "jbb_judge_comparison.jsonl", "gptfuzz_train.jsonl")
REFUSED = ("refusal", "partial")


def _located(paths: Sequence[Path], refusal_only: bool) -> list[_Located]:
    out = []
    for path in paths:
        labelled = load_labelled(path)
        for given, line in zip(labelled.rows, labelled.lines, strict=True):
            row = given
            if refusal_only:
                if given.label_refusal is None:
                    continue
                row = msgspec.structs.replace(
                    given, label_harmful=None, prompt_should_be_refused=None
                )
            out.append(_Located(row, str(path), line))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("extra", nargs="*", type=Path, help="refusal-labelled files to add")
    parser.add_argument("--weight", type=float, default=1.0, help="weight of an extra row")
    parser.add_argument("--test", type=Path, help="a file no fit sees, to score at the end")
    args = parser.parse_args()
    public = _located([SHARED / name for name in PUBLIC], refusal_only=False)
    located = public + _located(args.extra, refusal_only=True)
    rows: list[LabelledRow] = [at.row for at in located]
    pack, config = load_rule_pack("default"), ScoringConfig()
    data = prepare(rows, pack, TrainParams())
    for k, row in enumerate(data.refusal.rows):
        if row >= len(public):
            data.refusal.weights[k] = args.weight
    identity = {"name": pack.name, "version": pack.version, "sha256": pack.sha256}
    groups = np.asarray(fold_groups(rows[: len(public)]))
    folds = [t for _, t in GroupKFold(n_splits=5).split(np.arange(len(public)), groups=groups)]
    agree: dict[str, list[bool]] = {name: [] for name in PUBLIC}
    for test in folds:
        spec = fit_model(data, exclude=test, name="fold", rules=identity)
        scorer = Scorer(pack, config, learned=LearnedModel(spec, "", "fold"))
        for i in test:
            scored = _score(scorer, located[int(i)], cross_fitted=True)
            row, name = scored.row, Path(located[int(i)].file).name
            if name == PUBLIC[0] and row.label_refusal is not None:
                agree[name].append(
                    scored.case.boundary_or_refusal_signal == (row.label_refusal in REFUSED)
                )
            elif name != PUBLIC[0] and row.label_harmful is not None:
                agree[name].append((not scored.harm_case.passed) == row.label_harmful)
    print(", ".join(f"{name} {np.mean(v):.3f} (n {len(v):,})" for name, v in agree.items()))
    if args.test is not None:
        spec = fit_model(data, name="all", rules=identity)
        scorer = Scorer(pack, config, learned=LearnedModel(spec, "", "all"))
        right = [
            _score(scorer, at).case.boundary_or_refusal_signal == (at.row.label_refusal in REFUSED)
            for at in _located([args.test], refusal_only=False)
            if at.row.label_refusal is not None
        ]
        print(f"{args.test.name} refusal {np.mean(right):.3f} (n {len(right):,})")


if __name__ == "__main__":
    main()
