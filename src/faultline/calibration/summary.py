"""The summary of ``faultline calibrate``: the scorer's agreement with human labels; pure.

:func:`summarise` takes rows that have already been scored (:class:`ScoredRow`) and returns
a JSON-ready summary: agreement on three tasks for the whole input, each file, each source
and each model; the precision of each rule; and the rows the scorer got wrong.
:func:`render_markdown` renders calibration.md from it and :func:`headline_rows` the CLI's
table. Three tasks are measured, each on the rows labelled for it:

- ``refusal``: rows with a ``label_refusal``. The verdict is ``boundary_or_refusal_signal``
  of ``case``; the label is positive for ``refusal`` and ``partial``.
- ``harm``: rows with a ``label_harmful``. The verdict is "harmful" when ``harm_case``
  (the row scored as a probe that should be refused) fails.
- ``over_refusal``: rows whose prompt is benign (``prompt_should_be_refused`` false) and
  that have a ``label_refusal``. The verdict is "over-refused" when ``case`` (scored as a
  benign control) fails; the label is positive for ``refusal`` and ``partial``.

A row whose case is an ``error`` has no verdict: it is counted as ``unscored`` for the task
and never as agreement or disagreement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from faultline.calibration.labelled import REFUSAL_LABELS, LabelledRow, RefusalLabel
from faultline.calibration.measures import binary_measures, confusion, wilson_interval
from faultline.metrics.stats import rate
from faultline.report.markdown import escape_md
from faultline.scoring.case import CaseScore

__all__ = [
    "NONE_NAME",
    "SCHEMA_VERSION",
    "TASKS",
    "ScoredRow",
    "Task",
    "headline_rows",
    "predicted_refusal",
    "render_markdown",
    "summarise",
]

SCHEMA_VERSION = "1"
Task = Literal["refusal", "harm", "over_refusal"]
TASKS: tuple[Task, ...] = ("refusal", "harm", "over_refusal")
NONE_NAME = "(none)"
"""The group name of rows whose ``source`` or ``model`` is not recorded."""

_POSITIVE_REFUSAL = frozenset({"refusal", "partial"})
_PARTIAL_MODES = frozenset({"partial_refusal", "refusal_then_compliance"})
# Each rule kind, the task it speaks to, and the label it claims (its "right" direction).
_KINDS: dict[str, tuple[Task, str]] = {
    "boundary": ("refusal", "refusal"),
    "safe": ("harm", "not_harmful"),
    "unsafe": ("harm", "harmful"),
}
_MIN_FIRED = 5  # rules that fired fewer times are listed after the worst ones in the Markdown


@dataclass(frozen=True)
class ScoredRow:
    """One labelled row with the scorer's verdicts on it.

    Attributes:
        row: The labelled row.
        file: The file it comes from, as the user gave the path.
        line: Its 1-based line in that file.
        case: The row scored with its expectation: ``comply`` when
            ``prompt_should_be_refused`` is false, else ``refuse``.
        harm_case: The row scored as a ``refuse`` probe; the same object as ``case`` when
            the expectation is ``refuse``.
        cross_fitted: Whether a learned model retrained without the row's prompt group
            scored it.
    """

    row: LabelledRow
    file: str
    line: int
    case: CaseScore
    harm_case: CaseScore
    cross_fitted: bool = False


@dataclass(frozen=True, slots=True)
class _Verdict:
    """The scorer's verdict on one task for one row, next to the row's label."""

    task: Task
    case: CaseScore  # the case the verdict is read from
    truth: bool
    label: str  # the label as text
    predicted: bool | None  # None: the case is an error, so the row is unscored
    shown: str  # the verdict as text


def predicted_refusal(case: CaseScore) -> RefusalLabel:
    """The three-way refusal class the scorer gives a case.

    ``compliance`` when the case has no refusal or boundary signal; ``partial`` when it has
    one and its ``detected_failure_modes`` include ``partial_refusal`` or
    ``refusal_then_compliance`` (the answer refuses, then helps anyway); else ``refusal``.
    The scorer records failure modes only on failing cases, so a passing case with a signal
    is always a ``refusal``.

    Args:
        case: A scored case.
    """
    if not case.boundary_or_refusal_signal:
        return "compliance"
    return "partial" if _PARTIAL_MODES.intersection(case.detected_failure_modes) else "refusal"


def summarise(
    scored: Sequence[ScoredRow],
    *,
    scorer: Mapping[str, Any],
    seed: int = 0,
    max_misclassified: int | None = None,
) -> dict[str, Any]:
    """Measure the scorer's agreement with the human labels of scored rows.

    Args:
        scored: The rows with their verdicts, in the order of the files given.
        scorer: The identity of the scorer (rule pack, learned model), copied as it is.
        seed: The seed of the bootstraps behind the F1 and kappa intervals.
        max_misclassified: The most misclassified rows to keep per task per file; ``None``
            keeps all.

    Returns:
        A JSON-ready dict, the same for the same input: ``schema_version``; ``scorer``;
        ``files`` (``{path, rows}`` in input order); ``groups`` (everything, then each file,
        source and model: ``{by, name, rows, refusal, harm, over_refusal}``, where a task is
        ``None`` when no row of the group is labelled for it, else ``{n, unscored,
        measures}`` plus ``three_way`` for refusal and ``labelled_rate`` and
        ``predicted_rate`` for over-refusal); ``rules`` (per kind and label: ``task``,
        ``claims``, ``fired``, ``fired_when_positive``, ``fired_when_negative``,
        ``precision``, ``precision_ci95``); ``misclassified`` (each wrong verdict with its
        row and evidence, by file, line and task); ``misclassified_left_out`` (per task);
        and ``cross_fitted_rows``.

    Raises:
        ValueError: If ``max_misclassified`` is negative.
    """
    if max_misclassified is not None and max_misclassified < 0:
        raise ValueError(f"max_misclassified must be at least 0, got {max_misclassified}")
    verdicts = [_verdicts(s) for s in scored]
    files = list(dict.fromkeys(s.file for s in scored))
    misclassified, left_out = _misclassified(scored, verdicts, files, max_misclassified)
    return {
        "schema_version": SCHEMA_VERSION,
        "scorer": dict(scorer),
        "files": [{"path": f, "rows": sum(s.file == f for s in scored)} for f in files],
        "groups": _groups(scored, verdicts, files, seed),
        "rules": _rules(scored, verdicts),
        "misclassified": misclassified,
        "misclassified_left_out": left_out,
        "cross_fitted_rows": sum(s.cross_fitted for s in scored),
    }


def _verdicts(s: ScoredRow) -> list[_Verdict]:
    """The verdicts on every task the row is labelled for, in the order of :data:`TASKS`."""
    row, case, harm = s.row, s.case, s.harm_case
    out: list[_Verdict] = []
    if row.label_refusal is not None:
        truth = row.label_refusal in _POSITIVE_REFUSAL
        signal = None if _unscored(case) else case.boundary_or_refusal_signal
        out.append(
            _Verdict("refusal", case, truth, row.label_refusal, signal, predicted_refusal(case))
        )
    if row.label_harmful is not None:
        failed = None if _unscored(harm) else harm.status == "fail"
        label, shown = _harm_text(row.label_harmful), _harm_text(bool(failed))
        out.append(_Verdict("harm", harm, row.label_harmful, label, failed, shown))
    if row.prompt_should_be_refused is False and row.label_refusal is not None:
        truth = row.label_refusal in _POSITIVE_REFUSAL
        failed = None if _unscored(case) else case.status == "fail"
        shown = "over_refusal" if failed else "compliance"
        out.append(_Verdict("over_refusal", case, truth, row.label_refusal, failed, shown))
    return out


def _unscored(case: CaseScore) -> bool:
    return case.status == "error" or case.passed is None


def _harm_text(harmful: bool) -> str:
    return "harmful" if harmful else "not_harmful"


def _groups(
    scored: Sequence[ScoredRow], verdicts: Sequence[list[_Verdict]], files: list[str], seed: int
) -> list[dict[str, Any]]:
    """The entries for everything, each file, each source and each model, in that order."""
    members: list[tuple[str, str, list[int]]] = [("all", "all", list(range(len(scored))))]
    for by in ("file", "source", "model"):
        index: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(scored):
            key = s.file if by == "file" else getattr(s.row, by)
            index[NONE_NAME if key is None else key].append(i)
        names = files if by == "file" else sorted(index)
        members += [(by, name, index[name]) for name in names]
    return [_group(by, name, [verdicts[i] for i in rows], seed) for by, name, rows in members]


def _group(by: str, name: str, verdicts: list[list[_Verdict]], seed: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"by": by, "name": name, "rows": len(verdicts)}
    for task in TASKS:
        entry[task] = _task([v for vs in verdicts for v in vs if v.task == task], seed)
    return entry


def _task(verdicts: list[_Verdict], seed: int) -> dict[str, Any] | None:
    """Agreement on one task, or ``None`` when no row is labelled for it."""
    if not verdicts:
        return None
    scored = [v for v in verdicts if v.predicted is not None]
    truth, predicted = [v.truth for v in scored], [bool(v.predicted) for v in scored]
    entry: dict[str, Any] = {
        "n": len(verdicts),
        "unscored": len(verdicts) - len(scored),
        "measures": binary_measures(truth, predicted, seed=seed),
    }
    if verdicts[0].task == "refusal":
        labels, shown = [v.label for v in scored], [v.shown for v in scored]
        entry["three_way"] = confusion(labels, shown, REFUSAL_LABELS)
    elif verdicts[0].task == "over_refusal":
        entry["labelled_rate"] = rate(sum(truth), len(scored))
        entry["predicted_rate"] = rate(sum(predicted), len(scored))
    return entry


def _rules(scored: Sequence[ScoredRow], verdicts: Sequence[list[_Verdict]]) -> list[dict[str, Any]]:
    """How often each rule's claim agrees with the label of the rows it fired on.

    A boundary rule is judged on ``case`` against ``label_refusal``; safe and unsafe rules
    on ``harm_case`` against ``label_harmful``. A rule fires on a row once, however often
    it matched; rows whose case is an error or lacks the label do not count.
    """
    fired: dict[tuple[str, str], list[int]] = {}  # (kind, label) -> [when positive, when negative]
    for s, vs in zip(scored, verdicts, strict=True):
        for case in (s.case, s.harm_case):
            for kind, labels in _matched(case):
                for label in labels:
                    fired.setdefault((kind, label), [0, 0])
        by_task = {v.task: v for v in vs if v.predicted is not None}
        for kind, (task, _) in _KINDS.items():
            verdict = by_task.get(task)
            if verdict is not None:
                for label in set(dict(_matched(verdict.case))[kind]):
                    fired[kind, label][0 if verdict.truth else 1] += 1
    return [_rule(kind, label, *fired[kind, label]) for kind, label in sorted(fired)]


def _matched(case: CaseScore) -> list[tuple[str, list[str]]]:
    return [
        ("boundary", case.matched_boundary_patterns),
        ("safe", case.matched_safe_patterns),
        ("unsafe", case.matched_unsafe_patterns),
    ]


def _rule(kind: str, label: str, positive: int, negative: int) -> dict[str, Any]:
    task, claims = _KINDS[kind]
    agree, fired = (negative if claims == "not_harmful" else positive), positive + negative
    return {
        "kind": kind,
        "label": label,
        "task": task,
        "claims": claims,
        "fired": fired,
        "fired_when_positive": positive,
        "fired_when_negative": negative,
        "precision": rate(agree, fired),
        "precision_ci95": wilson_interval(agree, fired),
    }


def _misclassified(
    scored: Sequence[ScoredRow],
    verdicts: Sequence[list[_Verdict]],
    files: list[str],
    limit: int | None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every wrong verdict by (file, line, task), at most ``limit`` per task per file."""
    order = {f: i for i, f in enumerate(files)}
    wrong = [
        (order[s.file], s.line, TASKS.index(v.task), s.row.id, s, v)
        for s, vs in zip(scored, verdicts, strict=True)
        for v in vs
        if v.predicted is not None and v.predicted != v.truth
    ]
    wrong.sort(key=lambda w: w[:4])
    kept: list[dict[str, Any]] = []
    taken: dict[tuple[int, Task], int] = defaultdict(int)
    left_out: dict[str, int] = dict.fromkeys(TASKS, 0)
    for file_index, _, _, _, s, v in wrong:
        if limit is not None and taken[file_index, v.task] >= limit:
            left_out[v.task] += 1
            continue
        taken[file_index, v.task] += 1
        kept.append(_wrong_row(s, v))
    return kept, left_out


def _wrong_row(s: ScoredRow, v: _Verdict) -> dict[str, Any]:
    return {
        "file": s.file,
        "line": s.line,
        "id": s.row.id,
        "source": s.row.source,
        "model": s.row.model,
        "task": v.task,
        "label": v.label,
        "predicted": v.shown,
        "risk_score": v.case.risk_score,
        "explanation": v.case.explanation,
        "evidence": [
            {"rule": e.rule, "kind": e.kind, "start": e.start, "end": e.end, "text": e.text}
            for e in v.case.evidence
        ],
        "prompt": s.row.prompt,
        "response": s.row.response,
        "cross_fitted": s.cross_fitted,
    }


# --- views -------------------------------------------------------------------------------------

_HEADLINE = [
    "Group",
    "Rows",
    "Refusal accuracy",
    "Refusal kappa",
    "Harm accuracy",
    "Harm kappa",
    "Over-refusal predicted / labelled",
]


def headline_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    """The headline table, header first: one row per group of the summary.

    The cells are plain text, not escaped: group names come from the input files.

    Args:
        summary: What :func:`summarise` returned (or its JSON, read back).
    """
    return [list(_HEADLINE)] + [_headline(g, _group_name(g)) for g in summary["groups"]]


def _headline(group: Mapping[str, Any], name: str) -> list[str]:
    cells = [name, str(group["rows"])]
    for task in ("refusal", "harm"):
        m = (group[task] or {}).get("measures", {})
        cells += [_num(m.get("accuracy")) + _ci(m.get("accuracy_ci95")), _num(m.get("kappa"))]
    over = group["over_refusal"] or {}
    cells.append(f"{_num(over.get('predicted_rate'))} / {_num(over.get('labelled_rate'))}")
    return cells


def _group_name(group: Mapping[str, Any]) -> str:
    return "all" if group["by"] == "all" else f"{group['by']}: {group['name']}"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _ci(interval: Sequence[float] | None) -> str:
    return "" if interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}]"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return [*lines, *("| " + " | ".join(row) + " |" for row in rows), ""]


def render_markdown(summary: Mapping[str, Any]) -> str:
    """Render calibration.md: agreement, rule precision and misclassified rows, for people.

    Every text from the input (paths, ids, names, prompts, responses, explanations, rule
    labels) is escaped with :func:`~faultline.report.markdown.escape_md`: it renders as one
    line of text and never as a table, HTML, a link or an image.

    Args:
        summary: What :func:`summarise` returned (or its JSON, read back).
    """
    sections: list[Callable[[Mapping[str, Any]], list[str]]] = [
        _md_identity,
        _md_headline,
        _md_details,
        _md_three_way,
        _md_rules,
        _md_misclassified,
    ]
    lines = ["# faultline calibration", ""]
    for section in sections:
        lines += section(summary)
    return "\n".join(lines).rstrip() + "\n"


def _md_identity(summary: Mapping[str, Any]) -> list[str]:
    scorer = summary["scorer"]
    lines = ["## Scorer", ""]
    lines += [f"- {escape_md(str(k), 60)}: {escape_md(_plain(v), 200)}" for k, v in scorer.items()]
    if not scorer:
        lines.append("- not recorded")
    if summary["cross_fitted_rows"]:
        lines += [
            "",
            f"{summary['cross_fitted_rows']} row(s) were scored by a learned model retrained "
            "without the row's prompt group (cross-fitted).",
        ]
    files = [(escape_md(f["path"], 120), str(f["rows"])) for f in summary["files"]]
    return [*lines, "", "## Files", "", *_table(["File", "Rows"], files)]


def _plain(value: Any) -> str:
    """A value of the scorer's identity as one line: mappings as ``key value, ...``."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_plain(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value)
    return "none" if value is None else str(value)


def _md_headline(summary: Mapping[str, Any]) -> list[str]:
    rows = [_headline(g, escape_md(_group_name(g), 80)) for g in summary["groups"]]
    return [
        "## Agreement",
        "",
        "Accuracy with its 95% interval, and Cohen's kappa. Refusal: the refusal or boundary "
        "signal against a label of refusal or partial. Harm: a failing verdict as a harmful "
        "probe against the harmful label. Over-refusal, on benign prompts: the share the "
        "scorer fails as over-refused, and the share labelled refusal or partial.",
        "",
        *_table(_HEADLINE, rows),
    ]


def _md_details(summary: Mapping[str, Any]) -> list[str]:
    header = ["Group", "Task", "Labelled", "Unscored", "TP", "FP", "TN", "FN"]
    header += ["Precision", "Recall", "F1", "Kappa"]
    rows = []
    for g in summary["groups"]:
        for task in TASKS:
            if (entry := g[task]) is None:
                continue
            m = entry["measures"]
            rows.append(
                [escape_md(_group_name(g), 80), task, str(entry["n"]), str(entry["unscored"])]
                + [str(m[k]) for k in ("tp", "fp", "tn", "fn")]
                + [_num(m[k]) + _ci(m[f"{k}_ci95"]) for k in ("precision", "recall", "f1", "kappa")]
            )
    return ["## Agreement in detail", "", *_table(header, rows)]


def _md_three_way(summary: Mapping[str, Any]) -> list[str]:
    lines = ["## Refusal, three ways", "", "Rows: the label. Columns: the scorer's class.", ""]
    for g in summary["groups"]:
        if g["refusal"] is None:
            continue
        t = g["refusal"]["three_way"]
        rows = [
            [label, *map(str, counts)]
            for label, counts in zip(t["labels"], t["matrix"], strict=True)
        ]
        lines += [f"### {escape_md(_group_name(g), 80)}", "", *_table(["", *t["labels"]], rows)]
        lines += [f"Accuracy {_num(t['accuracy'])}, kappa {_num(t['kappa'])}.", ""]
    return lines if len(lines) > 4 else [*lines[:2], "No row has a refusal label.", ""]


def _md_rules(summary: Mapping[str, Any]) -> list[str]:
    rules = summary["rules"]
    if not rules:
        return ["## Rules", "", "No rule matched.", ""]
    ranked = sorted((r for r in rules if r["fired"] >= _MIN_FIRED), key=lambda r: r["precision"])
    ranked += [r for r in rules if r["fired"] < _MIN_FIRED]
    header = ["Rule", "Kind", "Claims", "Fired", "Label positive", "Label negative", "Precision"]
    rows = [
        [
            escape_md(r["label"], 80),
            r["kind"],
            r["claims"],
            *(str(r[k]) for k in ("fired", "fired_when_positive", "fired_when_negative")),
            _num(r["precision"]) + _ci(r["precision_ci95"]),
        ]
        for r in ranked
    ]
    intro = (
        "How often each rule's claim agrees with the label of the rows it fired on; "
        f"worst first among rules that fired at least {_MIN_FIRED} times."
    )
    return ["## Rules", "", intro, "", *_table(header, rows)]


def _md_misclassified(summary: Mapping[str, Any]) -> list[str]:
    wrong = summary["misclassified"]
    lines = ["## Misclassified rows", ""]
    left = {k: v for k, v in summary["misclassified_left_out"].items() if v}
    if left:
        note = ", ".join(f"{v} {k}" for k, v in left.items())
        lines += [f"Left out (over the limit per task per file): {note}.", ""]
    if not wrong:
        return [*lines, "None.", ""]
    header = ["Row", "Id", "Task", "Label", "Predicted", "Risk", "Prompt", "Response", "Why"]
    rows = [_md_wrong(w) for w in wrong]
    return [*lines, *_table([*header, "Evidence"], rows)]


def _md_wrong(w: Mapping[str, Any]) -> list[str]:
    where = f"{escape_md(w['file'], 80)}:{w['line']}" + (
        " (cross-fitted)" if w["cross_fitted"] else ""
    )
    evidence = "; ".join(f"{e['rule']} ({e['kind']}): “{e['text']}”" for e in w["evidence"])
    return [
        where,
        escape_md(w["id"], 60),
        w["task"],
        w["label"],
        w["predicted"],
        _num(w["risk_score"]),
        escape_md(w["prompt"], 160),
        escape_md(w["response"], 240),
        escape_md(w["explanation"], 200),
        escape_md(evidence, 240) or "–",
    ]
