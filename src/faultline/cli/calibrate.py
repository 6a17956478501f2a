"""``faultline calibrate``: measure the scorer against human labels; ``--train`` a new signal."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import click

from faultline.cli._console import err, out, shown
from faultline.cli._options import PASS_THRESHOLD, SEED, parse_config
from faultline.cli._render import render_warnings


@click.command("calibrate")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "-o",
    "out_dir",
    default="out/calibration",
    show_default=True,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Directory for calibration.json and calibration.md (created if missing).",
)
@click.option("--rules", default="default", show_default=True, metavar="PACK", help="Rule pack.")
@click.option("--rules-only", is_flag=True, help="Measure the rules without the learned signal.")
@click.option(
    "--learned",
    default="default",
    show_default=True,
    metavar="MODEL",
    help="Learned signal to measure: a built-in name or a model file.",
)
@click.option(
    "--train",
    is_flag=True,
    help="Fit a new learned signal on FILES: measure the recipe out of fold, then write the model.",
)
@click.option(
    "--model-out",
    default=None,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Where --train writes the model, named after the file: my_model.json is 'my_model' "
    "(default: DIR/learned.json).",
)
@click.option(
    "--max-misclassified",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="Misclassified rows kept per task and file in the outputs.",
)
@click.option(
    "--pass-threshold",
    type=PASS_THRESHOLD,
    default=0.5,
    show_default=True,
    help="A response passes when its risk score is below this.",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the bootstrap.")
def calibrate_command(  # noqa: PLR0917 - click passes every option
    files: tuple[str, ...],
    out_dir: str,
    rules: str,
    rules_only: bool,
    learned: str,
    train: bool,
    model_out: str | None,
    max_misclassified: int,
    pass_threshold: float,
    seed: int,
) -> int:
    """Measure the scorer's agreement with human-labelled responses.

    FILES are labelled responses (JSONL: id, prompt, response, label_refusal, label_harmful,
    prompt_should_be_refused, ...). For each file, source and model it measures refusal
    detection, harm and over-refusal (accuracy, precision, recall, F1, Cohen's kappa with 95%
    intervals), each rule's precision and the misclassified rows with their evidence, and
    writes DIR/calibration.json and DIR/calibration.md.

    The learned signal is measured only on rows it was not trained on: rows that share a
    prompt or a prompt group with its training data are scored by the same recipe refitted
    without their prompt group (folds split by prompt group). Exit 2 on bad input.
    """
    from faultline._util.files import check_writable_dir
    from faultline.calibration.markdown import headline_rows
    from faultline.calibration.run import calibrate, write_calibration
    from faultline.calibration.run import train as train_model
    from faultline.errors import UsageError
    from faultline.scoring.rules import load_rule_pack

    if train and rules_only:
        raise UsageError("--train fits a learned signal; it cannot be --rules-only")
    if model_out is not None and not train:
        raise UsageError("--model-out is where --train writes the model; add --train")
    if train and learned != "default":
        raise UsageError("--learned names a model to measure; --train fits a new one instead")
    config = parse_config(
        pass_threshold,
        None,
        rules_only=rules_only or train,
        learned="default" if train else learned,
    )
    pack = load_rule_pack(rules)
    # Where the results go is checked before the work: a bad path fails now, not after it.
    target = Path(model_out) if model_out is not None else Path(out_dir) / "learned.json"
    for where, option in ((Path(out_dir), "--out"), (target.parent, "--model-out")):
        problem = check_writable_dir(where)
        if problem is not None:
            raise UsageError(f"{option}: {problem}; expected a directory faultline can write to")
    _check_overwrites(files, out_dir, target if train else None)
    start = time.perf_counter()

    def note(message: str) -> None:
        err.print(shown(f"calibrate: {message}"))

    if train:
        result = train_model(
            files,
            pack=pack,
            config=config,
            name=target.stem,
            seed=seed,
            max_misclassified=max_misclassified,
            progress=note,
        )
    else:
        result = calibrate(
            files,
            pack=pack,
            config=config,
            seed=seed,
            max_misclassified=max_misclassified,
            progress=note,
        )
    written = write_calibration(result, out_dir, target)
    render_warnings(result.summary["scorer"])
    _print_table(headline_rows(result.summary), result.summary)
    out.print(
        shown(f"Wrote {', '.join(map(str, written))} in {time.perf_counter() - start:.1f} s.")
    )
    return 0


def _check_overwrites(files: tuple[str, ...], out_dir: str, model: Path | None) -> None:
    """Refuse an output that would overwrite an input file or another output (paths resolved).

    Raises:
        UsageError: DIR/calibration.json or .md is one of FILES, or ``model`` (the model
            ``--train`` writes) is one of FILES or of those two; or an output is a directory.
    """
    from faultline.errors import UsageError

    outputs = [Path(out_dir) / "calibration.json", Path(out_dir) / "calibration.md"]
    for path in [*outputs, *([model] if model is not None else [])]:
        if path.is_dir():
            option = "--out" if path in outputs else "--model-out"
            raise UsageError(
                f"{option}: {path}: a directory is in the way; expected a path faultline can "
                "write a file to"
            )
    taken = {Path(f).resolve(): f"the labelled file {f!r}" for f in files}
    for path in outputs:
        name = path.name
        if path.resolve() in taken:
            raise UsageError(
                f"--out: {path} is {taken[path.resolve()]}, which calibrate would overwrite; "
                f"expected a directory whose {name} is not among FILES"
            )
        taken[path.resolve()] = f"where --out writes {name}"
    if model is not None and model.resolve() in taken:
        raise UsageError(
            f"--model-out: {model} is {taken[model.resolve()]}; expected a file of its own for "
            "the model, such as my_model.json"
        )


_SHORT = ("group", "rows", "refusal acc", "kappa", "harm acc", "kappa", "over-refusal pred / label")
_INTERVAL = re.compile(r" \[[^\]]*\]$")


def _print_table(rows: list[list[str]], summary: dict[str, Any]) -> None:
    """The headline, compact: short file names (``distinct_names``), no intervals (see the .md).

    The rows without a source or model are shown in italics, apart from a source named
    "(none)".
    """
    from rich.table import Table
    from rich.text import Text

    from faultline._util.files import distinct_names

    files = [f["path"] for f in summary["files"]]
    short = dict(zip(files, distinct_names(files), strict=True))
    table = Table(show_edge=False, pad_edge=False)
    for name in _SHORT:
        table.add_column(Text(name), overflow="fold")
    for row, group in zip(rows[1:], summary["groups"], strict=True):
        by, name = group["by"], group["name"]
        if by == "all":
            first = shown(row[0])
        elif name is None:
            first = Text.assemble(f"{by}: ", (row[0].partition(": ")[2], "italic"))
        else:
            first = shown(f"{by}: {short[name] if by == 'file' else name}", one_line=True)
        cells = [_INTERVAL.sub("", cell) for cell in row[1:]]
        table.add_row(first, *(shown(cell) for cell in cells))  # names come from the data
    out.print(table)
