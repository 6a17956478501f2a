"""``faultline probes import`` as a user runs it: each format to a set that loads; bad input exits 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from faultline.probes import load_probes
from tests.conftest import Result
from tests.probes.test_importers import FIXTURES, write_fixture

Run = Callable[..., Result]


def _map_args(mapping: dict[str, str]) -> list[str]:
    return [arg for field, column in mapping.items() for arg in ("--map", f"{field}={column}")]


@pytest.mark.parametrize("key", sorted(FIXTURES))
def test_each_format_writes_a_set_that_loads_and_validates(
    run_cli: Run, tmp_path: Path, key: str
) -> None:
    fmt, name, _, mapping = FIXTURES[key]
    write_fixture(tmp_path, key)
    result = run_cli(
        "probes", "import", "--format", fmt, name, "--out", "sets/out.yaml", *_map_args(mapping)
    )
    assert result.code == 0, result.stderr
    probes = load_probes(tmp_path / "sets" / "out.yaml")
    assert probes.name == "out"
    assert f"Wrote {len(probes)} probes" in result.stdout
    for category in probes.categories:  # the counts per category
        assert category in result.stdout
    validated = run_cli("probes", "validate", "sets/out.yaml")
    assert validated.code == 0, validated.stderr


def test_counts_per_category_and_benign_controls_are_printed(run_cli: Run, tmp_path: Path) -> None:
    write_fixture(tmp_path, "xstest")
    result = run_cli("probes", "import", "--format", "xstest", "xstest_prompts.csv", "-o", "x.yaml")
    assert result.code == 0, result.stderr
    cells = [line.replace("│", " ").split() for line in result.stdout.splitlines() if "│" in line]
    rows = {cell[0]: cell[1:3] for cell in cells}
    assert rows["weapons_explosives"] == ["2", "1"]  # probes, benign
    assert rows["extremism"] == ["2", "1"]
    assert "6 probes (4 benign controls)" in result.stdout


def test_name_benign_and_category_options(run_cli: Run, tmp_path: Path) -> None:
    path = write_fixture(tmp_path, "jbb")
    args = ("probes", "import", "--format", "jbb", path.name, "--out", "b.yaml")
    result = run_cli(*args, "--name", "jbb-controls", "--benign", "--category", "misc")
    assert result.code == 0, result.stderr
    probes = load_probes(tmp_path / "b.yaml")
    assert probes.name == "jbb-controls"
    assert {p.expect for p in probes} == {"comply"}


def test_generic_csv_with_defaults(run_cli: Run, tmp_path: Path) -> None:
    (tmp_path / "p.csv").write_text("prompt\nSay hello\n", encoding="utf-8")
    result = run_cli(
        "probes", "import", "--format", "csv", "p.csv", "--out", "p.yaml",
        "--map", "input=prompt", "--category", "greeting", "--severity", "low", "--expect", "comply",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    (probe,) = load_probes(tmp_path / "p.yaml")
    assert (probe.id, probe.category, probe.severity, probe.expect) == (
        "csv-1",
        "greeting",
        "low",
        "comply",
    )


@pytest.mark.parametrize(
    ("files", "args", "words"),
    [
        ({}, ("--format", "advbench", "missing.csv"), ["missing.csv", "no such file"]),
        (
            {"a.csv": "prompt,target\nhi,x\n"},
            ("--format", "advbench", "a.csv"),
            ["a.csv:1", "missing column 'goal'", "columns found: prompt, target"],
        ),
        (
            {"a.csv": "goal,target\nhi,x\n ,x\n"},
            ("--format", "advbench", "a.csv"),
            ["a.csv:3", "field 'goal'", "is missing or empty"],
        ),
        (
            {"a.csv": "goal,target\nhi,x\n"},
            ("--format", "csv", "a.csv", "--map", "input"),
            ["--map 'input' is not FIELD=COLUMN"],
        ),
        (
            {"a.csv": "goal,target\nhi,x\n"},
            ("--format", "csv", "a.csv", "--map", "input=gaol"),
            ["a.csv:1", "no column 'gaol'", "did you mean 'goal'?"],
        ),
        (
            {"a.csv": "goal,target\nhi,x\n"},
            ("--format", "harmbench", "a.csv", "--severity", "low"),
            ["--severity does not apply to --format harmbench"],
        ),
        (
            {"a.jsonl": '{"prompt": "hi", "label": "safe", "qid": "q1"}\n'},
            ("--format", "jsonl", "a.jsonl", "--map", "input=prompt", "--map", "expect=lable:safe=comply"),
            ["a.jsonl:1", "no object has the key 'lable'", "keys found: prompt, label, qid"],
        ),
        (
            {"a.csv": 'goal,target\nhi,x\n"open,x\nlo,y\n'},
            ("--format", "advbench", "a.csv"),
            ["a.csv:3", "field 'goal'", "never closed"],
        ),
        (
            {"a.csv": "Index,Goal,Category\n1,hi,Privacy\n1,lo,Privacy\n"},
            ("--format", "jbb", "a.csv"),
            ["a.csv:3", "field 'Index'", "already given at line 2"],
        ),
        ({"a.csv": "goal\nhi\n"}, ("--format", "advbench", "a.csv", "--benign", "--expect", "refuse"), ["--benign"]),
        ({"a.csv": "goal\nhi\n"}, ("--format", "nope", "a.csv"), ["Invalid value for '--format'"]),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_a_located_message(
    run_cli: Run, tmp_path: Path, files: dict[str, str], args: tuple[str, ...], words: list[str]
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    result = run_cli("probes", "import", *args, "--out", "out.yaml")
    assert result.code == 2, result.stderr
    message = " ".join(result.stderr.split())  # the console wraps long lines
    for word in words:
        assert word in message
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.yaml").exists()


def test_out_must_be_a_yaml_file(run_cli: Run, tmp_path: Path) -> None:
    write_fixture(tmp_path, "advbench")
    result = run_cli(
        "probes", "import", "--format", "advbench", "harmful_behaviors.csv", "-o", "x.json"
    )
    assert result.code == 2
    assert "expected a .yaml or .yml file" in result.stderr


def test_a_failed_import_leaves_the_previous_set_untouched(run_cli: Run, tmp_path: Path) -> None:
    (tmp_path / "set.yaml").write_text("previous", encoding="utf-8")
    (tmp_path / "a.csv").write_text("goal\n\n", encoding="utf-8")
    result = run_cli("probes", "import", "--format", "advbench", "a.csv", "--out", "set.yaml")
    assert result.code == 2
    assert "holds no data rows" in result.stderr
    assert (tmp_path / "set.yaml").read_text(encoding="utf-8") == "previous"
