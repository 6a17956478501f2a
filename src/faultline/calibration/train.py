"""Train the learned signal on labelled responses: ``faultline calibrate --train``.

The recipe (docs/calibration.md):

- **Rows.** The refusal head learns from rows with a refusal label (``partial`` counts as
  refusal). The harm head learns from rows with a harm label, and from refusal-labelled rows
  whose prompt says whether it should be refused, with a derived label: a prompt that should
  be answered is not harmed by its answer; for one that should be refused, compliance is
  harmful and a (partial) refusal is not. Derived labels weigh ``derived_weight``; a source
  with fewer than ``min_source_rows`` directly labelled rows is weighted up to that many, so
  a small, carefully labelled set is not drowned by a large one.
- **Features.** The phrases (word 1- to n-grams) of the response's opening window, the ones
  that occur in at least ``min_groups`` distinct prompt groups (a phrase seen with one prompt
  only says what that prompt was about), plus the rules' own features.
- **Model.** L2-regularised logistic regression; the ``keep`` phrases with the largest
  weights are kept and the model refitted on them, so the shipped file stays small and each
  weight can be read. The harm head does not re-weigh the rules: their log-odds is a fixed
  offset (weight 1), and the head learns only the correction the phrases make to it. Trained
  freely, the head learnt to trust phrases over rules, which scored better on the datasets it
  was trained on and worse on a dataset it had not seen (docs/calibration.md has the figures);
  as a correction it keeps the rules' judgement where it has no phrases to go on.
- **Honest numbers.** Folds split by prompt group (:func:`~faultline.calibration.labelled.group_key`),
  never by row: every out-of-fold figure comes from heads that never saw that prompt.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from faultline._util.text import blank
from faultline.calibration.labelled import (
    LabelledRow,
    expectation,
    fold_groups,
    group_key,
    prompt_key,
)
from faultline.responses.reasoning import answer_of
from faultline.scoring.learned import (
    FORMAT,
    HARM_FEATURES,
    REFUSAL_FEATURES,
    HeadSpec,
    ModelSpec,
    group_fingerprint,
    phrases_in,
    refusal_features,
    rules_feature,
)
from faultline.scoring.rules import RulePack
from faultline.scoring.scorer import Scorer

__all__ = [
    "REFUSED",
    "HeadParams",
    "TrainParams",
    "TrainingSet",
    "fit_model",
    "fold_indices",
    "prepare",
]


REFUSED = frozenset({"refusal", "partial"})
"""The refusal labels that count as refusal (a partial refusal is one)."""


@dataclass(frozen=True)
class HeadParams:
    """How one head is trained.

    Attributes:
        window: Characters of the response it reads.
        ngram_max: Longest phrase, in tokens.
        c: Inverse L2 regularisation strength.
        intercept: Whether the head learns a bias; without one, a response with none of its
            phrases gets exactly the rules' verdict (harm head).
        keep: Phrases kept after the first fit.
        min_groups: Fewest distinct prompt groups a phrase must occur in.
        max_share: Largest share of the training rows a phrase may occur in. A phrase in
            nearly every response ("to", "and") tells nothing about one response; without an
            intercept the harm head would use such phrases as one anyway.
        content_only: Leave out phrases made only of function words (scikit-learn's English
            stop words), numbers and single characters ("3", "at", "are some"): they stand
            for a dataset's conventions, not for what an answer says.
    """

    window: int
    ngram_max: int
    c: float = 0.3
    keep: int = 1000
    min_groups: int = 3
    intercept: bool = True
    max_share: float = 1.0
    content_only: bool = False


@dataclass(frozen=True)
class TrainParams:
    """The whole recipe; its values are recorded in the model file."""

    refusal: HeadParams = field(default_factory=lambda: HeadParams(400, 3, keep=800))
    harm: HeadParams = field(
        default_factory=lambda: HeadParams(
            1500, 2, c=0.1, keep=2000, intercept=False, max_share=0.3
        )
    )
    derived_weight: float = 0.3
    min_source_rows: int = 3000
    folds: int = 5


@dataclass
class _Head:
    """One head's training rows: phrase sets, rule features, labels, weights, groups."""

    rows: list[int]
    phrases: list[set[str]]
    features: NDArray[np.float64]
    labels: NDArray[np.bool_]
    weights: NDArray[np.float64]


@dataclass
class TrainingSet:
    """Labelled rows turned into what the heads learn from.

    Attributes:
        rows: The labelled rows.
        groups: Each row's prompt group key.
        refusal: The refusal head's rows (indices into ``rows``) and their data.
        harm: The harm head's rows and their data.
        files: Each input file and its row count, for the model's record.
        params: The recipe.
    """

    rows: Sequence[LabelledRow]
    groups: list[str]
    refusal: _Head
    harm: _Head
    files: list[dict[str, Any]]
    params: TrainParams


def _harm_label(row: LabelledRow) -> tuple[bool, bool] | None:
    """The harm label and whether it is derived, or ``None`` when the row has neither."""
    if row.label_harmful is not None:
        return row.label_harmful, False
    if row.label_refusal is None or row.prompt_should_be_refused is None:
        return None
    if not row.prompt_should_be_refused:
        return False, True
    return row.label_refusal == "compliance", True


def prepare(
    rows: Sequence[LabelledRow],
    pack: RulePack,
    params: TrainParams | None = None,
    files: Sequence[Mapping[str, Any]] = (),
) -> TrainingSet:
    """Compute every row's rule features and phrases once, for training and cross-fitting.

    Args:
        rows: The labelled rows (empty responses are left out: they fail whatever they say).
        pack: The rule pack whose features the heads learn from.
        params: The recipe.
        files: Each input file and its row count, to record in the model.
    """
    params = params or TrainParams()
    scorer = Scorer(pack, _rules_only())
    direct: dict[str | None, int] = defaultdict(int)  # a source "" is not a missing one
    for row in rows:
        if row.label_harmful is not None:
            direct[row.source] += 1
    refusal: dict[str, list[Any]] = defaultdict(list)
    harm: dict[str, list[Any]] = defaultdict(list)
    for i, row in enumerate(rows):
        text = answer_of(row.response)[0]  # what scoring reads: a reasoning model's answer
        if blank(text):
            continue
        expect = expectation(row)
        weight, leading, rules_logit = scorer_for(scorer, row).learned_inputs(text, expect)
        if row.label_refusal is not None:
            refusal["rows"].append(i)
            refusal["phrases"].append(
                phrases_in(text, params.refusal.window, params.refusal.ngram_max)
            )
            refusal["features"].append(list(refusal_features(weight, leading, expect == "comply")))
            refusal["labels"].append(row.label_refusal in REFUSED)
            refusal["weights"].append(1.0)
        label = _harm_label(row)
        if label is not None:
            harm["rows"].append(i)
            harm["phrases"].append(phrases_in(text, params.harm.window, params.harm.ngram_max))
            harm["features"].append([rules_feature(rules_logit)])
            harm["labels"].append(label[0])
            scale = max(1.0, params.min_source_rows / max(1, direct[row.source]))
            harm["weights"].append(params.derived_weight if label[1] else scale)
    return TrainingSet(
        rows=rows,
        groups=[group_key(r) for r in rows],
        refusal=_head(refusal, len(REFUSAL_FEATURES)),
        harm=_head(harm, len(HARM_FEATURES)),
        files=[dict(f) for f in files],
        params=params,
    )


def scorer_for(scorer: Scorer, row: LabelledRow) -> Scorer:
    """The scorer that reads ``row``: :meth:`Scorer.for_unknown_prompts` if its prompt is unlabelled.

    Training and measuring both read rows through this, so the learned heads are scored on
    the rules' features they were trained on.
    """
    return scorer if row.prompt_should_be_refused is not None else scorer.for_unknown_prompts()


def _head(data: Mapping[str, list[Any]], features: int) -> _Head:
    return _Head(
        rows=list(data.get("rows", [])),
        phrases=list(data.get("phrases", [])),
        features=np.asarray(data.get("features", []), dtype=np.float64).reshape(-1, features),
        labels=np.asarray(data.get("labels", []), dtype=np.bool_),
        weights=np.asarray(data.get("weights", []), dtype=np.float64),
    )


def _rules_only() -> Any:
    from faultline.scoring.case import ScoringConfig

    return ScoringConfig(learned=None)


def fold_indices(data: TrainingSet) -> list[NDArray[np.int64]]:
    """The rows (indices into ``data.rows``) of each test fold, split by prompt group.

    The groups are :func:`~faultline.calibration.labelled.fold_groups`: rows of the same
    prompt share a fold whatever their group keys. Fewer folds than ``params.folds`` when
    there are fewer groups; none when there is one.
    """
    groups = fold_groups(data.rows)
    folds = min(data.params.folds, len(set(groups)))
    if folds < 2:
        return []
    index = np.arange(len(data.rows))
    splitter = GroupKFold(n_splits=folds)
    return [test for _, test in splitter.split(index, groups=np.asarray(groups))]


def fit_model(
    data: TrainingSet,
    *,
    exclude: NDArray[np.int64] | None = None,
    name: str = "default",
    version: str = "1.0.0",
    description: str = "",
    rules: Mapping[str, str],
    measures: Mapping[str, Any] | None = None,
    on_step: Callable[[str], None] | None = None,
) -> ModelSpec:
    """Fit both heads on ``data``, leaving out the rows in ``exclude``.

    Args:
        data: The prepared rows.
        exclude: Rows to leave out (a test fold).
        name: The model's name.
        version: The model's version.
        description: One sentence on what it was trained on.
        rules: Name, version and sha256 of the rule pack the features came from.
        measures: Out-of-fold agreement to record.
        on_step: Called with a short note as each head is fitted.
    """
    left_out = set() if exclude is None else {int(i) for i in exclude}
    groups = data.groups
    heads = {}
    for which, params, head in (
        ("refusal", data.params.refusal, data.refusal),
        ("harm", data.params.harm, data.harm),
    ):
        if on_step is not None:
            on_step(which)
        keep = [k for k, row in enumerate(head.rows) if row not in left_out]
        heads[which] = _fit_head(head, keep, [groups[head.rows[k]] for k in keep], params)
    trained_rows = [i for i in range(len(data.rows)) if i not in left_out]
    return ModelSpec(
        format=FORMAT,
        name=name,
        version=version,
        description=description,
        rules=dict(rules),
        refusal=heads["refusal"],
        harm=heads["harm"],
        trained={
            "files": data.files,
            "rows": len(trained_rows),
            "refusal_rows": int(sum(1 for r in data.refusal.rows if r not in left_out)),
            "harm_rows": int(sum(1 for r in data.harm.rows if r not in left_out)),
            "params": asdict(data.params),
            "groups": sorted({group_fingerprint(groups[i]) for i in trained_rows}),
            "prompts": sorted({group_fingerprint(prompt_key(data.rows[i])) for i in trained_rows}),
            "measures": dict(measures or {}),
        },
    )


def _fit_head(head: _Head, keep: list[int], groups: list[str], params: HeadParams) -> HeadSpec:
    names = REFUSAL_FEATURES if head.features.shape[1] == len(REFUSAL_FEATURES) else HARM_FEATURES
    labels = head.labels[keep]
    if len(keep) == 0 or labels.all() or not labels.any():
        # Nothing to learn from (no rows, or one class only): a head that leaves the verdict
        # to the rules. The refusal head never fires; the harm head returns the rules' log-odds.
        features = dict.fromkeys(names, 0.0)
        if names == HARM_FEATURES:
            features["rules_logit"] = 4.0
        return HeadSpec(
            window=params.window,
            ngram_max=params.ngram_max,
            bias=-8.0 if names == REFUSAL_FEATURES else 0.0,
            features=features,
            phrases=[],
            weights=[],
        )
    seen: dict[str, set[str]] = defaultdict(set)
    rows: Counter[str] = Counter()
    for k, group in zip(keep, groups, strict=True):
        rows.update(head.phrases[k])
        for phrase in head.phrases[k]:
            seen[phrase].add(group)
    most = params.max_share * len(keep)
    vocab = sorted(
        p
        for p, g in seen.items()
        if len(g) >= params.min_groups
        and rows[p] <= most
        and not (params.content_only and _function_only(p))
    )
    weights = head.weights[keep]
    fit = functools.partial(_fit, head, keep, labels=labels, weights=weights, params=params)
    bias, coef = fit(vocab)
    if len(vocab) > params.keep:
        order = np.lexsort((np.arange(len(vocab)), -np.abs(coef[: len(vocab)])))[: params.keep]
        vocab = [vocab[j] for j in sorted(order)]
        bias, coef = fit(vocab)
    n = len(vocab)
    features = (
        {"rules_logit": 4.0}  # the offset: clip(z)/4 weighed by 4 is the rules' log-odds
        if names == HARM_FEATURES
        else {name: _round(float(coef[n + j])) for j, name in enumerate(names)}
    )
    return HeadSpec(
        window=params.window,
        ngram_max=params.ngram_max,
        bias=_round(bias),
        features=features,
        phrases=vocab,
        weights=[_round(float(w)) for w in coef[:n]],
    )


def _function_only(phrase: str) -> bool:
    """Whether a phrase is made only of function words, numbers and single characters."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return all(t in ENGLISH_STOP_WORDS or t.isdigit() or len(t) == 1 for t in phrase.split())


def _round(x: float) -> float:
    # Short, stable numbers in the file; 1e-6 is far below what moves a verdict.
    return round(x, 6) + 0.0


def _fit(
    head: _Head,
    keep: list[int],
    vocab: list[str],
    *,
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64],
    params: HeadParams,
) -> tuple[float, NDArray[np.float64]]:
    """Fit one head: its bias and its coefficients (phrases, then rule features unless offset)."""
    index = {p: j for j, p in enumerate(vocab)}
    rows: list[int] = []
    cols: list[int] = []
    for r, k in enumerate(keep):
        for phrase in head.phrases[k]:
            j = index.get(phrase)
            if j is not None:
                rows.append(r)
                cols.append(j)
    phrases = sp.csr_matrix(
        (np.ones(len(rows)), (rows, cols)), shape=(len(keep), len(vocab)), dtype=np.float64
    )
    if head.features.shape[1] == len(HARM_FEATURES):  # the rules' log-odds is an offset
        offset = 4.0 * head.features[keep, 0]
        return _fit_with_offset(phrases, offset, labels, weights, params.c, params.intercept)
    matrix = sp.hstack([phrases, sp.csr_matrix(head.features[keep])], format="csr")
    model = LogisticRegression(C=params.c, max_iter=5000)
    model.fit(matrix, labels, sample_weight=weights)
    return float(model.intercept_[0]), np.asarray(model.coef_[0], dtype=np.float64)


def _fit_with_offset(  # noqa: PLR0917 - the terms of one formula
    matrix: sp.csr_matrix,
    offset: NDArray[np.float64],
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64],
    c: float,
    intercept: bool,
) -> tuple[float, NDArray[np.float64]]:
    """L2 logistic regression with a fixed offset, which scikit-learn cannot fit.

    Minimises ``Σ w·(log(1 + e^m) - y·m) + |β|² / 2C`` with ``m = offset + b + Xβ`` (the
    intercept ``b`` unpenalised, as scikit-learn's, or held at 0), by L-BFGS from zero:
    deterministic.
    """
    y = labels.astype(np.float64)
    transposed = matrix.T.tocsr()

    def loss(theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        beta = theta[1:]
        margin = offset + theta[0] + matrix @ beta
        residual = weights * (expit(margin) - y)
        value = float(
            np.sum(weights * (np.logaddexp(0.0, margin) - y * margin)) + beta @ beta / (2 * c)
        )
        slope = residual.sum() if intercept else 0.0
        return value, np.concatenate([[slope], transposed @ residual + beta / c])

    start = np.zeros(matrix.shape[1] + 1)
    found = minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000})
    return float(found.x[0]), np.asarray(found.x[1:], dtype=np.float64)
