"""calibration.md and the CLI's headline table, from a calibration summary.

Every string from the data (file, source and model names, prompts, responses, evidence) is
hostile text: calibration.md escapes it so it cannot inject tables, HTML, links or images.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from faultline._util.text import visible
from faultline.calibration.summary import NONE_NAME, TASKS
from faultline.report.markdown import escape_md, named_md
from faultline.report.mismatches import scorer_mismatches

__all__ = ["headline_rows", "render_markdown"]

_MIN_FIRED = 5  # rules that fired fewer times are listed after the worst ones

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
    if group["by"] == "all":
        return "all"
    return f"{group['by']}: {NONE_NAME if group['name'] is None else group['name']}"


def _md_group_name(group: Mapping[str, Any]) -> str:
    """The group's name, escaped; the rows without a source or model in italics.

    A source named "(none)" is escaped, never italic, so it is told apart from them. A file's
    path is never cut: two files of one name in folders of a long path would read the same.
    """
    if group["by"] != "all" and group["name"] is None:
        return f"{group['by']}: *{NONE_NAME}*"
    if group["by"] == "file":
        return f"file: {_whole(group['name'])}"
    return escape_md(_group_name(group), 80)


def _whole(text: str) -> str:
    """``text`` escaped as :func:`~faultline.report.markdown.escape_md` does, but never cut."""
    return escape_md(text, max(2, len(visible(text))))


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
    lines += [f"- {escape_md(str(k), 60)}: {escape_md(_plain(v), 320)}" for k, v in scorer.items()]
    if not scorer:
        lines.append("- not recorded")
    if (config := summary.get("config")) is not None:  # none in an older calibration.json
        lines.append(
            f"- config: pass threshold {_plain(config['pass_threshold'])}, "
            f"bootstrap seed {_plain(config['seed'])}"
        )
    for mismatch in scorer_mismatches(scorer, named_md):
        lines += ["", f"Warning: {mismatch.text}."]
    if summary["cross_fitted_rows"]:
        lines += [
            "",
            f"{summary['cross_fitted_rows']} row(s) were scored by a learned model retrained "
            "without the row's prompt group (cross-fitted).",
        ]
    files = [(_whole(f["path"]), str(f["rows"])) for f in summary["files"]]
    return [*lines, "", "## Files", "", *_table(["File", "Rows"], files)]


def _plain(value: Any) -> str:
    """A value of the scorer's identity as one line: mappings as ``key value, ...``."""
    if isinstance(value, Mapping):
        return ", ".join(
            f"{k} ({_plain(v)})" if isinstance(v, Mapping) else f"{k} {_plain(v)}"
            for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value)
    return "none" if value is None else str(value)


def _md_headline(summary: Mapping[str, Any]) -> list[str]:
    rows = [_headline(g, _md_group_name(g)) for g in summary["groups"]]
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
                [_md_group_name(g), task, str(entry["n"]), str(entry["unscored"])]
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
        lines += [f"### {_md_group_name(g)}", "", *_table(["", *t["labels"]], rows)]
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
    where = f"{_whole(w['file'])}:{w['line']}" + (" (cross-fitted)" if w["cross_fitted"] else "")
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
