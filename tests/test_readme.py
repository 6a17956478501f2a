"""The README's quickstart as a new user follows it: its files and its Python example run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [body for lang, body in _BLOCK.findall(text) if lang == language]


def test_the_python_example_runs_on_the_quickstart_files(tmp_path: Path) -> None:
    # probes.yaml and answers.jsonl are the README's first YAML and JSON blocks; the example
    # is its Python block, pasted as it is. The quickstart has 2 answers, under the 5 the
    # failure geometry needs, which is what the example must cope with.
    (tmp_path / "probes.yaml").write_text(_blocks("yaml")[0], encoding="utf-8")
    (tmp_path / "answers.jsonl").write_text(_blocks("json")[0], encoding="utf-8")
    (example,) = [b for b in _blocks("python") if "faultline.load_probes" in b]
    done = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "dict_keys(['benign_control', 'prompt_injection'])" in done.stdout
    assert (tmp_path / "out" / "report.json").is_file()
