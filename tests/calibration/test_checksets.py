"""The check sets under bench/checksets: each reads as labelled responses, as its README says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from faultline.calibration.labelled import load_labelled

CHECKSETS = Path(__file__).resolve().parents[2] / "bench" / "checksets"
FILES = sorted(CHECKSETS.glob("*.jsonl"))


def _readme_rows() -> dict[str, int]:
    """Each file the README's table lists, with the rows it says the file has."""
    table = re.findall(
        r"^\| `([^`]+\.jsonl)` \| (\d+) \|", (CHECKSETS / "README.md").read_text(), re.M
    )
    return {name: int(rows) for name, rows in table}


def test_the_readme_lists_every_check_set_and_only_those() -> None:
    assert FILES, "no check sets found"
    assert sorted(_readme_rows()) == [f.name for f in FILES]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_check_set_reads_with_the_rows_its_readme_gives(path: Path) -> None:
    labelled = load_labelled(path)
    assert len(labelled.rows) == _readme_rows()[path.name]
    assert all(
        row.label_refusal is not None or row.label_harmful is not None for row in labelled.rows
    )
    assert len({row.id for row in labelled.rows}) == len(labelled.rows)
