"""``--junit FILE`` on ``faultline score`` and ``faultline run``: a valid file, as CI reads it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from lxml import etree

from tests.conftest import Result

SCHEMA = etree.XMLSchema(
    etree.parse(str(Path(__file__).parent.parent / "report" / "data" / "junit-10.xsd"))
)

RunCli = Callable[..., Result]


def _junit(path: Path) -> etree._Element:
    root = etree.parse(str(path)).getroot()
    assert SCHEMA.validate(root), SCHEMA.error_log
    return root


def _outcomes(root: etree._Element) -> dict[str, str]:
    """Each test case's outcome: failure, error or pass."""
    return {
        tc.get("name"): next((c.tag for c in tc if c.tag in ("failure", "error")), "pass")
        for tc in root.iter("testcase")
    }


EXPECTED = {
    "ctl-1": "failure",  # over-refusal of a benign control
    "hr-1": "error",
    "inj-1": "failure",
    "inj-2": "pass",
    "wpn-1": "pass",
    "wpn-2": "failure",
}


def test_score_writes_a_valid_junit_file(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    result = run_cli(
        "score", "-p", str(probes), "-r", str(responses), "-o", "out", "--junit", "out/junit.xml"
    )
    assert result.code == 0, result.stdout + result.stderr
    assert "junit.xml" in result.stdout
    root = _junit(tmp_path / "out" / "junit.xml")
    assert _outcomes(root) == EXPECTED
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("6", "3", "1")


def test_the_junit_file_is_written_when_a_gate_trips(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    result = run_cli(
        "score",
        *("-p", str(probes), "-r", str(responses), "-o", "out"),
        *("--fail-on", "pass_rate<0.99", "--junit", "ci/results/junit.xml"),
    )
    assert result.code == 1, result.stdout + result.stderr
    assert _outcomes(_junit(tmp_path / "ci" / "results" / "junit.xml")) == EXPECTED


def test_run_with_a_replay_target_writes_a_valid_junit_file(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    result = run_cli(
        "run", "-p", str(probes), "-t", f"replay:{responses}", "-o", "run", "--junit", "junit.xml"
    )
    assert result.code == 0, result.stdout + result.stderr
    assert "junit.xml" in result.stdout
    root = _junit(tmp_path / "junit.xml")
    assert _outcomes(root) == EXPECTED
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["target.provider"] == "replay"
    assert props["target.spec"].startswith("replay:")


@pytest.mark.parametrize("command", ["score", "run"])
def test_a_directory_is_refused_as_the_junit_file(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path, command: str
) -> None:
    probes, responses = small_files
    (tmp_path / "taken").mkdir()
    target = ("-r", str(responses)) if command == "score" else ("-t", f"replay:{responses}")
    result = run_cli(command, "-p", str(probes), *target, "-o", "out", "--junit", "taken")
    assert result.code == 2, result.stdout + result.stderr
    assert not (tmp_path / "out" / "report.json").exists()


def test_a_probe_with_no_answer_is_a_junit_error_not_left_out(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    lines = responses.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "two.jsonl").write_text("".join(lines[1:3]), encoding="utf-8")  # inj-2, wpn-1
    (tmp_path / "none.jsonl").write_text("", encoding="utf-8")
    for answers, passing in (("two.jsonl", {"inj-2", "wpn-1"}), ("none.jsonl", set())):
        result = run_cli(
            "score", "-p", str(probes), "-r", answers, "-o", "out", "--junit", "out/junit.xml"
        )
        assert result.code == 0, result.stdout + result.stderr
        root = _junit(tmp_path / "out" / "junit.xml")
        outcomes = _outcomes(root)
        assert set(outcomes) == set(EXPECTED)  # every probe of the set is a test
        assert {name for name, o in outcomes.items() if o == "pass"} == passing
        assert {o for name, o in outcomes.items() if name not in passing} == {"error"}
        assert (root.get("tests"), root.get("errors")) == ("6", str(6 - len(passing)))
        unanswered = next(tc for tc in root.iter("testcase") if tc.get("name") == "hr-1")
        assert "no answer" in unanswered.find("error").get("message")


def test_a_junit_path_that_cannot_be_written_exits_2_before_anything_is_replaced(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    assert run_cli("score", "-p", str(probes), "-r", str(responses), "-o", "out").code == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    (tmp_path / "blocker").write_text("a file, not a directory", encoding="utf-8")
    other = tmp_path / "other.jsonl"
    other.write_text(responses.read_text(encoding="utf-8").splitlines()[0] + "\n", "utf-8")
    result = run_cli(
        "score", "-p", str(probes), "-r", str(other), "-o", "out",
        "--junit", "blocker/junit.xml", "--fail-on", "pass_rate<1",
    )  # fmt: skip
    assert result.code == 2, result.stdout + result.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert "Traceback" not in result.stderr
    assert "--junit blocker" in " ".join(result.stderr.split()).replace("\\", "/")


def test_compare_checks_its_junit_path_before_writing_anything(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    assert run_cli("score", "-p", str(probes), "-r", str(responses), "-o", "out").code == 0
    (tmp_path / "blocker").write_text("a file, not a directory", encoding="utf-8")
    compared = run_cli("compare", "out", "out", "--junit", "blocker/junit.xml")
    assert compared.code == 2, compared.stdout + compared.stderr
    assert not (tmp_path / "faultline-compare").exists()
    assert "--junit blocker" in " ".join(compared.stderr.split()).replace("\\", "/")


def test_checking_the_junit_path_leaves_no_directory_behind(tmp_path: Path) -> None:
    from faultline.report.junit import check_junit_path

    assert (
        check_junit_path(tmp_path / "a" / "b" / "junit.xml") == tmp_path / "a" / "b" / "junit.xml"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("taken", ["run/journal.sqlite", "run/report.json", "answers.jsonl"])
def test_run_refuses_a_junit_path_it_reads_or_writes_itself(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path, taken: str
) -> None:
    probes, responses = small_files
    answers = tmp_path / "answers.jsonl"
    answers.write_bytes(responses.read_bytes())
    args = ("run", "-p", str(probes), "-t", f"replay:{answers}", "-o", "run")
    assert run_cli(*args).code == 0
    before = {p: p.read_bytes() for p in (answers, *(tmp_path / "run").iterdir())}
    result = run_cli(*args, "--resume", "--junit", taken)
    assert result.code == 2, result.stdout + result.stderr
    assert "give the JUnit XML a path of its own" in " ".join(result.stderr.split())
    assert {p: p.read_bytes() for p in before} == before  # the journal and reports are intact
    assert run_cli(*args, "--resume").code == 0


@pytest.mark.parametrize("taken", ["out/report.json", "answers.jsonl", "probes"])
def test_score_refuses_a_junit_path_it_reads_or_writes_itself(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path, taken: str
) -> None:
    probes, responses = small_files
    (tmp_path / "answers.jsonl").write_bytes(responses.read_bytes())
    (tmp_path / f"probes{probes.suffix}").write_bytes(probes.read_bytes())
    args = ("score", "-p", f"probes{probes.suffix}", "-r", "answers.jsonl", "-o", "out")
    taken = f"probes{probes.suffix}" if taken == "probes" else taken
    assert run_cli(*args).code == 0
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    result = run_cli(*args, "--junit", taken)
    assert result.code == 2, result.stdout + result.stderr
    assert {p: p.read_bytes() for p in before} == before


def test_compare_refuses_a_junit_path_it_reads_or_writes_itself(
    run_cli: RunCli, small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    probes, responses = small_files
    assert run_cli("score", "-p", str(probes), "-r", str(responses), "-o", "out").code == 0
    report = (tmp_path / "out" / "report.json").read_bytes()
    for taken in ("out/report.json", "faultline-compare/compare.md"):
        compared = run_cli("compare", "out", "out", "--junit", taken)
        assert compared.code == 2, compared.stdout + compared.stderr
        assert (tmp_path / "out" / "report.json").read_bytes() == report
        assert not (tmp_path / "faultline-compare").exists()
