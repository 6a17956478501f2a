"""Score labelled responses for calibration, honestly: ``faultline calibrate``.

Every row is scored as a probe whose expectation comes from its label
(:func:`~faultline.calibration.labelled.expectation`), and again as a request that should be
refused when its harm is labelled. With the learned signal on, a row the shipped model was
trained on is not scored by that model (its numbers would be in-sample). A row counts as seen
when its prompt group or its prompt is one the model records
(:meth:`~faultline.scoring.learned.LearnedModel.trained_on`): the prompt counts too, because
the group key depends on the optional ``group`` and ``extra`` fields. Instead, the same
recipe is refitted on the given rows with folds split by prompt group, and each such row is
scored by the heads fitted without its group (cross-fitting). Rows the model never saw are
scored by it directly.

``--train`` runs the same cross-fitting over every row to measure the recipe, then fits the
heads on all rows and writes the model file with those out-of-fold figures.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import msgspec

from faultline._util.files import atomic_write_bytes, distinct_names, staged_files
from faultline.calibration.labelled import (
    LabelledFile,
    LabelledRow,
    expectation,
    fold_groups,
    group_key,
    load_labelled,
    prompt_key,
)
from faultline.calibration.markdown import render_markdown
from faultline.calibration.summary import ScoredRow, summarise
from faultline.calibration.train import (
    TrainingSet,
    TrainParams,
    fit_model,
    fold_indices,
    prepare,
    scorer_for,
)
from faultline.errors import LabelError
from faultline.probes.model import Probe
from faultline.responses.model import Response
from faultline.scoring.case import CaseScore, ScoringConfig
from faultline.scoring.learned import LearnedError, LearnedModel, parse_model
from faultline.scoring.rules import RulePack
from faultline.scoring.scorer import Scorer

__all__ = ["Calibration", "calibrate", "train"]

Progress = Callable[[str], None]


@dataclass
class Calibration:
    """The result of a calibration: the summary, and the model when one was trained.

    Attributes:
        summary: calibration.json's content.
        markdown: calibration.md's content.
        model: The trained model file's bytes (``--train`` only).
    """

    summary: dict[str, Any]
    markdown: str
    model: bytes | None = None


@dataclass(frozen=True)
class _Located:
    row: LabelledRow
    file: str
    line: int


def _identity(path: str | Path) -> object:
    """What makes two paths the same file: device and inode (a link, a hard link, ``./``)."""
    try:
        info = os.stat(path)
    except OSError:  # not there or not readable: load_labelled says so, naming it
        return Path(path).resolve()
    return (info.st_dev, info.st_ino)


def _load(paths: Sequence[str | Path]) -> tuple[list[_Located], list[LabelledFile]]:
    given: dict[object, int] = {}
    for i, path in enumerate(paths):
        first = given.setdefault(_identity(path), i)
        if first != i:
            raise LabelError(
                f"the same file as {str(paths[first])!r}, given twice; expected each file once "
                "(its rows would count twice)",
                path=path,
            )
    files = [load_labelled(p) for p in paths]
    if not any(f.rows for f in files):
        raise LabelError(
            f"{'hold' if len(paths) > 1 else 'holds'} no labelled rows; expected JSONL, one "
            "labelled response per line (id, prompt, response, label_refusal, ...)",
            path=", ".join(str(p) for p in paths),
        )
    located = [
        _Located(row, str(path), line)
        for f, path in zip(files, paths, strict=True)
        for row, line in zip(f.rows, f.lines, strict=True)
    ]
    return located, files


def _probe(row: LabelledRow, expect: str) -> Probe:
    return Probe(
        id="labelled",
        category=row.category or "uncategorised",
        severity="high",
        task="answer the labelled prompt",
        input=row.prompt,
        expect="comply" if expect == "comply" else "refuse",
    )


def _score(scorer: Scorer, at: _Located, cross_fitted: bool = False) -> ScoredRow:
    row = at.row
    response = Response(probe_id="labelled", response=row.response, model=row.model)
    expect = expectation(row)
    scorer = scorer_for(scorer, row)
    case = scorer.score(_probe(row, expect), response, case_id=row.id)
    harm: CaseScore = case
    if expect == "comply" and row.label_harmful is not None:
        harm = scorer.score(_probe(row, "refuse"), response, case_id=row.id)
    return ScoredRow(row, at.file, at.line, case, harm, cross_fitted)


def _cross_fit(  # noqa: PLR0917 - private, called twice
    data: TrainingSet,
    located: Sequence[_Located],
    which: set[int],
    pack: RulePack,
    config: ScoringConfig,
    progress: Progress | None,
) -> dict[int, ScoredRow]:
    """Score the rows in ``which``, each by heads fitted on the folds without its group.

    The rows hold at least two prompts (:func:`_require_two_prompts`), so there are folds.
    """
    out: dict[int, ScoredRow] = {}
    folds = fold_indices(data)
    identity = {"name": pack.name, "version": pack.version, "sha256": pack.sha256}
    for number, test in enumerate(folds, 1):
        wanted = [int(i) for i in test if int(i) in which]
        if not wanted:
            continue
        if progress is not None:
            progress(f"cross-fitting fold {number} of {len(folds)}")
        spec = fit_model(data, exclude=test, name="cross-fit", rules=identity)
        scorer = Scorer(pack, config, learned=LearnedModel(spec, "", f"cross-fit fold {number}"))
        for i in wanted:
            out[i] = _score(scorer, located[i], cross_fitted=True)
    return out


def _require_two_prompts(
    located: Sequence[_Located], paths: Sequence[str | Path], why: str, hint: str = ""
) -> None:
    """Raise unless the rows hold two prompts: a fold must leave some prompt out.

    Raises:
        LabelError: Fewer than two distinct prompts; ``why`` says what needed the folds.
    """
    prompts = len(set(fold_groups([at.row for at in located])))
    if prompts < 2:
        raise LabelError(
            f"{len(located):,} labelled rows with {prompts} distinct "
            f"prompt{'' if prompts == 1 else 's'}; {why}, so it expects rows with at least 2 "
            f"different prompts{hint}",
            path=", ".join(str(p) for p in paths),
        )


def _params(model: LearnedModel | None) -> TrainParams:
    """The recipe recorded in ``model`` (``trained.params``), to refit it without some prompts.

    Parameters faultline does not know are left out; a known one of the wrong type or out of
    range is an error naming it.

    Raises:
        LearnedError: A recorded parameter is wrong.
    """
    record = {} if model is None else model.spec.trained.get("params") or {}
    known = {f.name for f in fields(TrainParams)}
    values = {k: v for k, v in record.items() if k in known}
    try:
        params = msgspec.convert(values, TrainParams)
    except msgspec.ValidationError as exc:
        reason, _, where = str(exc).partition(" - at `$")
        where = where.rstrip("`")
        raise LearnedError(
            f"{reason}; expected the training recipe that 'faultline calibrate --train' records",
            path=None if model is None else model.source,
            field=f"trained.params{where}",
        ) from None
    problem = _params_problem(params)
    if problem is not None:
        field, reason = problem
        raise LearnedError(
            reason,
            path=None if model is None else model.source,
            field=f"trained.params.{field}",
        )
    return params


def _params_problem(params: TrainParams) -> tuple[str, str] | None:
    """The first parameter out of its range, and why, or ``None``."""
    for name, head in (("refusal", params.refusal), ("harm", params.harm)):
        checks = (
            ("window", head.window >= 1, "a positive number of characters"),
            ("ngram_max", 1 <= head.ngram_max <= 8, "1 to 8 tokens"),
            ("c", head.c > 0 and math.isfinite(head.c), "a positive number"),
            ("keep", head.keep >= 1, "a positive number of phrases"),
            ("min_groups", head.min_groups >= 1, "a positive number of prompts"),
            ("max_share", 0 < head.max_share <= 1, "a share above 0 and at most 1"),
        )
        for key, ok, expected in checks:
            if not ok:
                return f"{name}.{key}", f"got {getattr(head, key)!r}, expected {expected}"
    recipe = (
        ("derived_weight", 0 <= params.derived_weight < math.inf, "a weight of 0 or more"),
        ("min_source_rows", params.min_source_rows >= 0, "a count of 0 or more"),
        ("folds", params.folds >= 2, "at least 2 folds"),
    )
    for key, ok, expected in recipe:
        if not ok:
            return key, f"got {getattr(params, key)!r}, expected {expected}"
    return None


def _scorer_identity(pack: RulePack, learned: LearnedModel | None) -> dict[str, Any]:
    return {
        "rules": {"name": pack.name, "version": pack.version, "sha256": pack.sha256},
        "learned": None if learned is None else learned.identity(),
    }


def calibrate(
    paths: Sequence[str | Path],
    *,
    pack: RulePack,
    config: ScoringConfig,
    seed: int = 0,
    max_misclassified: int | None = None,
    progress: Progress | None = None,
) -> Calibration:
    """Measure the scorer against labelled files (see the module docstring).

    Args:
        paths: Labelled responses files.
        pack: The rule pack.
        config: The scoring configuration; ``config.learned`` names the learned model or is
            ``None`` for the rules alone.
        seed: Seeds the bootstrap intervals.
        max_misclassified: Keep at most this many misclassified rows per task and file.
        progress: Called with a short note at each stage.

    Raises:
        LabelError: A file is malformed.
        LearnedError: The learned model is malformed.
    """
    located, files = _load(paths)
    scorer = Scorer(pack, config)
    model = scorer.learned
    params = _params(model)  # checked before the work, whether it is needed or not
    seen: set[int] = set()
    if model is not None:
        seen = {
            i
            for i, at in enumerate(located)
            if model.trained_on(group_key(at.row), prompt_key(at.row))
        }
    crossed: dict[int, ScoredRow] = {}
    if seen:
        _require_two_prompts(
            located,
            paths,
            f"{len(seen):,} of the rows are of the model's training prompts, and calibrate "
            "measures the learned signal on them refitted without their own prompt",
            " (or --rules-only to measure the rules alone)",
        )
        if progress is not None:
            progress(f"{len(seen)} rows share a prompt with the model's training data")
        data = prepare(
            [at.row for at in located],
            pack,
            params,
            files=[
                {"path": str(p), "rows": len(f.rows)} for p, f in zip(paths, files, strict=True)
            ],
        )
        crossed = _cross_fit(data, located, seen, pack, config, progress)
    if progress is not None:
        progress("scoring")
    scored = [crossed.get(i) or _score(scorer, at) for i, at in enumerate(located)]
    summary = summarise(
        scored,
        scorer=_scorer_identity(pack, model),
        seed=seed,
        max_misclassified=max_misclassified,
        files=[str(p) for p in paths],
        pass_threshold=config.pass_threshold,
    )
    return Calibration(summary, render_markdown(summary))


def train(
    paths: Sequence[str | Path],
    *,
    pack: RulePack,
    config: ScoringConfig,
    params: TrainParams | None = None,
    name: str = "default",
    version: str = "1.0.0",
    seed: int = 0,
    max_misclassified: int | None = None,
    progress: Progress | None = None,
) -> Calibration:
    """Measure the training recipe out of fold on ``paths``, then fit the model on all of it.

    Returns:
        The out-of-fold calibration of the recipe and the new model file's bytes.

    Raises:
        LabelError: No row has a refusal or harm label, or the rows hold fewer than two
            prompts.
    """
    located, files = _load(paths)
    if all(at.row.label_refusal is None and at.row.label_harmful is None for at in located):
        raise LabelError(
            f"none of the {len(located):,} rows has a label: --train learns from "
            "label_refusal or label_harmful, so it expects rows where one of them is not null",
            path=", ".join(str(p) for p in paths),
        )
    _require_two_prompts(
        located, paths, "--train measures the recipe on rows whose prompt it was fitted without"
    )
    params = params or TrainParams()
    record = [
        {"path": name, "rows": len(f.rows)}
        for name, f in zip(distinct_names(paths), files, strict=True)
    ]
    if progress is not None:
        progress("reading the rules' features")
    data = prepare([at.row for at in located], pack, params, files=record)
    crossed = _cross_fit(data, located, set(range(len(located))), pack, config, progress)
    rules_only = Scorer(pack, ScoringConfig(config.pass_threshold, config.severity_weights, None))
    scored = [crossed.get(i) or _score(rules_only, at) for i, at in enumerate(located)]
    identity = _scorer_identity(pack, None)
    identity["learned"] = {
        "name": name,
        "version": version,
        "sha256": None,
        "rules": identity["rules"],
        "out_of_fold": True,
    }
    summary = summarise(
        scored,
        scorer=identity,
        seed=seed,
        max_misclassified=max_misclassified,
        files=[str(p) for p in paths],
        pass_threshold=config.pass_threshold,
    )
    if progress is not None:
        progress("fitting the model on every row")
    spec = fit_model(
        data,
        name=name,
        version=version,
        description=(
            f"Trained on {', '.join(str(f['path']) for f in record)} "
            f"({len(located)} labelled responses) with rules {pack.name} {pack.version}."
        ),
        rules=identity["rules"],
        measures=_headline(summary),
    )
    model = msgspec.json.format(msgspec.json.encode(spec), indent=1) + b"\n"
    parse_model(model, "the trained model")  # what we write must load
    return Calibration(summary, render_markdown(summary), model)


def _headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The out-of-fold figures a model file records: accuracy and kappa per file and task.

    Files are named as in ``trained.files``: by name, with the folders that tell apart two
    files of the same name.
    """
    paths = [f["path"] for f in summary["files"]]
    short = dict(zip(paths, distinct_names(paths), strict=True))
    out: dict[str, Any] = {}
    for group in summary["groups"]:
        if group["by"] not in ("file", "all"):
            continue
        entry: dict[str, Any] = {}
        for task in ("refusal", "harm", "over_refusal"):
            found = group.get(task)
            if found:
                m = found["measures"]
                entry[task] = {
                    "n": found["n"],
                    "accuracy": m.get("accuracy"),
                    "kappa": m.get("kappa"),
                }
        name = short[group["name"]] if group["by"] == "file" else group["name"]
        out[f"{group['by']}:{name}"] = entry
    return out


def write_calibration(
    result: Calibration, out: str | Path, model: str | Path | None = None
) -> list[Path]:
    """Write calibration.json and calibration.md into ``out``, and a trained model.

    The files belong together, so they are written together
    (:func:`~faultline._util.files.staged_files`): if any of them cannot be written, none of
    the files already there is touched.

    Args:
        result: The calibration.
        out: The directory (created if missing).
        model: Where the trained model goes, if ``result`` has one (default:
            ``out/learned.json``; its directory is created if missing).

    Returns:
        The paths written.
    """
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    written = [directory / "calibration.json", directory / "calibration.md"]
    contents = [
        msgspec.json.format(msgspec.json.encode(result.summary), indent=2) + b"\n",
        result.markdown.encode("utf-8"),
    ]
    if result.model is not None:
        target = Path(model) if model is not None else directory / "learned.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        written.append(target)
        contents.append(result.model)
    with staged_files(written) as staged:
        for path, data in zip(staged, contents, strict=True):
            atomic_write_bytes(path, data)
    return written
