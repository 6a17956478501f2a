"""Writing a calibration's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultline.calibration.run import Calibration, write_calibration


def test_the_files_of_a_calibration_are_written_together_or_not_at_all(tmp_path: Path) -> None:
    # Before, calibration.json was replaced before calibration.md failed: the folder held
    # this calibration's JSON beside another's Markdown.
    (tmp_path / "calibration.json").write_text("earlier\n", encoding="utf-8")
    (tmp_path / "calibration.md").mkdir()
    with pytest.raises(IsADirectoryError, match=r"calibration\.md"):
        write_calibration(Calibration({"new": 1}, "# new\n"), tmp_path)
    assert (tmp_path / "calibration.json").read_text(encoding="utf-8") == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.json", "calibration.md"]


def test_a_trained_model_is_written_with_the_calibration(tmp_path: Path) -> None:
    result = Calibration({"new": 1}, "# new\n", model=b"{}\n")
    written = write_calibration(result, tmp_path / "cal", tmp_path / "models" / "mine.json")
    assert written[-1] == tmp_path / "models" / "mine.json"
    assert written[-1].read_bytes() == b"{}\n"
    assert write_calibration(result, tmp_path / "cal")[-1] == tmp_path / "cal" / "learned.json"
