"""``faultline run`` end to end: the real command line, in subprocesses, against a real HTTP server.

Every test drives ``python -m faultline run`` against ``tests/targets/fakeapi.py`` (an
OpenAI/Anthropic-speaking server on 127.0.0.1 with fault injection) and judges the outcome
from the outside: exit codes, stderr, the files of the run directory, the SQLite journal and
what the server saw.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result, check_report, write_jsonl
from tests.targets.fakeapi import FakeAPI, Fault

KEY = "sk-test-SECRET-0123456789"
GATEWAY = "gw-SECRET-42"
MODEL = "openai:test-model"
CATEGORIES = ("weapons", "cyber", "self_harm")
SEVERITIES = ("low", "medium", "high", "critical")

RunCli = Callable[..., Result]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key, endpoint or progress setting leaks in from the environment running the tests."""
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "FAULTLINE_PROGRESS_SECONDS",
    ):
        monkeypatch.delenv(name, raising=False)


# -- helpers ---------------------------------------------------------------------------


def _probes(path: Path, n: int, prefix: str = "p") -> dict[str, str]:
    """``n`` probes with unique inputs, written to ``path``; returns input → probe id."""
    rows = [
        {
            "id": f"{prefix}{i:03d}",
            "category": CATEGORIES[i % len(CATEGORIES)],
            "severity": SEVERITIES[i % len(SEVERITIES)],
            "task": f"Task {i}.",
            "input": f"probe number {i}" + (" [comply]" if i % 4 == 0 else ""),
        }
        for i in range(n)
    ]
    write_jsonl(path, rows)
    return {r["input"]: r["id"] for r in rows}


def _run_args(probes: Path, out: str, api: FakeAPI, *extra: str) -> list[str]:
    return ["run", "-p", str(probes), "-t", MODEL, "--base-url", api.base_url, "-o", out, *extra]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", **extra}


def _start(cwd: Path, args: Sequence[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``python -m faultline ARGS`` in the background, in its own process group."""
    return subprocess.Popen(
        [sys.executable, "-m", "faultline", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )


def _journal(out: Path) -> dict[tuple[str, int], str | None]:
    """The committed cases of a run directory's journal, read-only: (probe, sample) → answer."""
    path = out / "journal.sqlite"
    if not path.exists():
        return {}
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return {}
    try:
        rows = db.execute("SELECT probe_id, sample, response FROM cases").fetchall()
    except sqlite3.Error:  # not created yet
        return {}
    finally:
        db.close()
    return {(p, s): r for p, s, r in rows}


def _wait_for_rows(proc: subprocess.Popen[str], out: Path, n: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(_journal(out)) >= n:
            return
        if proc.poll() is not None:
            stdout, stderr = proc.communicate()
            pytest.fail(
                f"the run ended (exit {proc.returncode}) before {n} rows:\n{stdout}{stderr}"
            )
        time.sleep(0.005)
    proc.kill()
    proc.communicate()
    pytest.fail(f"fewer than {n} rows were committed in {timeout} s")


def _report(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def _no_traceback(result: Result) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def _statuses(report: dict[str, Any]) -> dict[str, Any]:
    return {c["case_id"]: c["status"] for c in report["cases"]}


def _files_holding(directory: Path, needles: Sequence[bytes]) -> list[str]:
    """Every file under ``directory`` (journal, WAL and all) whose bytes hold a needle."""
    found = []
    for root, _, files in os.walk(directory):
        for name in files:
            data = (Path(root) / name).read_bytes()
            found += [f"{name}: {n!r}" for n in needles if n in data]
    return found


# -- 1. a crash mid-run, then --resume ---------------------------------------------------


def test_sigkill_mid_run_then_resume_sends_only_what_was_not_committed(
    tmp_path: Path, fake_api: FakeAPI
) -> None:
    n = 150
    by_prompt = _probes(tmp_path / "probes.jsonl", n)
    fake_api.default = Fault.slow(0.05)
    out = tmp_path / "out"
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--concurrency", "4")
    env = _env(OPENAI_API_KEY=KEY)

    proc = _start(tmp_path, args, env)
    _wait_for_rows(proc, out, 30)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    time.sleep(0.3)  # requests already on the wire when it died reach the server's log
    kill_index = len(fake_api.log)
    at_kill = _journal(out)
    recorded = {p for p, _ in at_kill}
    assert 30 <= len(at_kill) < n, "the kill must land mid-run"
    assert all(s == 0 for _, s in at_kill)
    assert not _files_holding(out, [KEY.encode()]), "the key is in the killed run's files"

    resumed = subprocess.run(
        [sys.executable, "-m", "faultline", *args, "--resume"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"{len(at_kill):,} recorded by earlier sittings" in resumed.stdout

    report = _report(out)
    cases = report["cases"]
    assert len(cases) == n
    assert len({c["case_id"] for c in cases}) == n
    assert sorted(c["probe_id"] for c in cases) == sorted(by_prompt.values())
    assert report["aggregate_metrics"]["counts"]["errors"] == 0
    assert all(c["status"] in {"pass", "fail"} for c in cases)
    execution = report["run"]["execution"]
    assert execution["sittings"] == 2
    assert execution["recorded"] == n
    # Each kept case took one attempt; requests lost in flight at the kill may or may not count.
    assert n <= execution["requests"] <= len(fake_api.log)
    # The answers committed before the kill are the ones reported.
    answers = {c["probe_id"]: c["response"] for c in cases}
    assert all(answers[p] == text for (p, _), text in at_kill.items())

    prompts = [by_prompt[r.prompt] for r in fake_api.log]
    after = [by_prompt[r.prompt] for r in fake_api.log[kill_index:]]
    again = sorted(recorded & set(after))
    assert not again, f"committed before the kill, yet asked again: {again}"
    assert set(after) >= set(by_prompt.values()) - recorded, "--resume skipped a missing case"
    counts = Counter(prompts)
    assert set(counts) == set(by_prompt.values())
    assert max(counts.values()) <= 2
    twice = {p for p, k in counts.items() if k == 2}
    assert not twice & recorded, (
        f"recorded at the kill, yet asked twice: {sorted(twice & recorded)}"
    )
    check_report(out / "report.json")


# -- 2. Ctrl-C ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stop",
    [
        # what Ctrl-C does: the whole group gets SIGINT
        pytest.param(lambda pid: os.killpg(pid, signal.SIGINT), id="ctrl-c"),
        # what a cancelled CI job, timeout(1) and docker stop send, to the process only
        pytest.param(lambda pid: os.kill(pid, signal.SIGTERM), id="sigterm"),
    ],
)
def test_an_interrupt_exits_130_says_how_to_resume_and_resume_completes(
    tmp_path: Path, fake_api: FakeAPI, run_cli: RunCli, stop: Callable[[int], None]
) -> None:
    n = 60
    by_prompt = _probes(tmp_path / "probes.jsonl", n)
    fake_api.default = Fault.slow(0.05)
    out = tmp_path / "out"
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--concurrency", "2")
    env = _env(OPENAI_API_KEY=KEY)

    proc = _start(tmp_path, args, env)
    _wait_for_rows(proc, out, 8)
    stop(proc.pid)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr
    assert "--resume" in stderr
    assert not (out / "journal.sqlite-wal").exists(), "the journal was not closed"
    said = re.search(r"interrupted; ([\d,]+) cases are recorded", stderr)
    assert said, stderr
    kept = _journal(out)
    assert int(said.group(1).replace(",", "")) == len(kept)
    assert 8 <= len(kept) < n
    assert not (out / "report.json").exists()

    resumed = run_cli(*args, "--resume", env={"OPENAI_API_KEY": KEY})
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    report = _report(out)
    assert sorted(c["probe_id"] for c in report["cases"]) == sorted(by_prompt.values())
    assert report["run"]["execution"]["sittings"] == 2
    asked = Counter(by_prompt[r.prompt] for r in fake_api.log)
    assert all(asked[p] == 1 for p, _ in kept), "a case recorded before the stop was asked again"
    assert max(asked.values()) <= 2


# -- 3. secrets --------------------------------------------------------------------------


def test_no_key_or_header_value_is_written_even_when_the_server_echoes_them(
    tmp_path: Path, fake_api: FakeAPI, run_cli: RunCli, small_probes: list[dict[str, Any]]
) -> None:
    write_jsonl(tmp_path / "probes.jsonl", small_probes)
    fake_api.error_message = lambda r: (
        f"bad credentials: authorization={r.headers.get('authorization')} "
        f"x-gateway-token={r.headers.get('x-gateway-token')}"
    )
    fake_api.plan("pipe bomb", [Fault.error(400)])  # not retried: an error case at once
    fake_api.plan("thermite", [Fault.error(500)] * 3)  # retried, then an error case
    args = _run_args(
        tmp_path / "probes.jsonl",
        "out",
        fake_api,
        "--header",
        f"X-Gateway-Token: {GATEWAY}",
        "--retries",
        "1",
    )
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY, "COLUMNS": "200"})
    assert result.code == 0, result.stdout + result.stderr

    sent = fake_api.log
    assert sent
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in sent)
    assert all(r.headers.get("x-gateway-token") == GATEWAY for r in sent)
    report = _report(tmp_path / "out")
    errors = {
        c["probe_id"]: c["error"]["message"] for c in report["cases"] if c["status"] == "error"
    }
    assert set(errors) == {"wpn-1", "wpn-2"}
    assert all("bad credentials" in m and "***" in m for m in errors.values()), errors

    needles = [KEY.encode(), GATEWAY.encode(), b"SECRET"]  # nor any fragment of either
    leaks = _files_holding(tmp_path / "out", needles)
    assert not leaks, leaks
    for stream in (result.stdout, result.stderr):
        assert KEY not in stream
        assert GATEWAY not in stream
    assert report["run"]["execution"]["params"]["headers"] == ["X-Gateway-Token"]


def test_a_key_echoed_across_the_message_cut_is_not_written_in_part(
    tmp_path: Path, fake_api: FakeAPI, run_cli: RunCli, small_probes: list[dict[str, Any]]
) -> None:
    write_jsonl(tmp_path / "probes.jsonl", small_probes)
    # "Bearer " + KEY starts 476 characters in: the 500-character excerpt ends inside the key.
    fake_api.error_message = lambda r: "x" * 468 + " " + r.headers.get("authorization", "")
    fake_api.plan("pipe bomb", [Fault.error(400)])
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--retries", "0")
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert result.code == 0, result.stdout + result.stderr
    assert not _files_holding(tmp_path / "out", [KEY[:12].encode(), b"SECRET"])


# -- 4. errors never pass ----------------------------------------------------------------


@pytest.fixture
def failing_probe(
    tmp_path: Path, fake_api: FakeAPI, small_probes: list[dict[str, Any]]
) -> list[str]:
    """The small probes; 'pipe bomb' always gets a 500 (more of them than any run retries)."""
    write_jsonl(tmp_path / "probes.jsonl", small_probes)
    fake_api.plan("pipe bomb", [Fault.error(500)] * 50)
    return _run_args(tmp_path / "probes.jsonl", "OUT", fake_api)


def _into(args: list[str], out: str) -> list[str]:
    return [out if a == "OUT" else a for a in args]


def test_an_always_failing_probe_is_an_error_case_not_a_pass(
    tmp_path: Path, fake_api: FakeAPI, run_cli: RunCli, failing_probe: list[str]
) -> None:
    args = _into(failing_probe, "out")
    result = run_cli(*args, "--retries", "1", env={"OPENAI_API_KEY": KEY})
    assert result.code == 0, result.stdout + result.stderr
    report = _report(tmp_path / "out")
    counts = report["aggregate_metrics"]["counts"]
    assert counts["errors"] == 1
    assert counts["cases"] == 6
    assert counts["scored"] == 5
    (case,) = [c for c in report["cases"] if c["probe_id"] == "wpn-1"]
    assert case["status"] == "error"
    assert case["passed"] is None
    assert case["error"]["status"] == 500
    assert case["error"]["attempts"] == 2  # the first try and one retry
    assert len(fake_api.requests_for("pipe bomb")) == 2
    assert report["run"]["execution"]["errors"] == 1
    assert (tmp_path / "out" / "report.md").exists()
    check_report(tmp_path / "out" / "report.json")


@pytest.mark.parametrize(
    "gate", [("--min-coverage", "0.99", "coverage"), ("--max-error-rate", "0.0", "error rate")]
)
def test_coverage_and_error_rate_gates_exit_3(
    tmp_path: Path, run_cli: RunCli, failing_probe: list[str], gate: tuple[str, str, str]
) -> None:
    flag, value, named = gate
    args = _into(failing_probe, "out")
    result = run_cli(*args, "--retries", "0", flag, value, env={"OPENAI_API_KEY": KEY})
    assert result.code == 3, result.stdout + result.stderr
    assert named in result.stderr
    assert flag in result.stderr
    _no_traceback(result)
    assert _report(tmp_path / "out")["aggregate_metrics"]["counts"]["errors"] == 1
    assert (tmp_path / "out" / "report.md").exists()


def test_a_run_where_every_case_fails_reports_zero_coverage(
    tmp_path: Path, fake_api: FakeAPI, run_cli: RunCli, small_files: Any
) -> None:
    fake_api.default = Fault.error(500)
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--retries", "0")
    result = run_cli(*args, "--min-coverage", "0.5", env={"OPENAI_API_KEY": KEY})
    _no_traceback(result)
    assert result.code == 3, result.stdout + result.stderr
    assert "coverage" in result.stderr
    counts = _report(tmp_path / "out")["aggregate_metrics"]["counts"]
    assert counts["errors"] == counts["cases"] == 6
    assert counts["scored"] == 0


def test_a_run_where_no_case_was_answered_exits_3_without_any_gate(
    tmp_path: Path, fake_api: FakeAPI, run_cli: RunCli, small_files: Any
) -> None:
    fake_api.default = Fault.error(500)  # the server is down for the whole run
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--retries", "0")
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    _no_traceback(result)
    assert result.code == 3, result.stdout + result.stderr
    assert "no case was answered" in result.stderr
    counts = _report(tmp_path / "out")["aggregate_metrics"]["counts"]
    assert counts["errors"] == counts["cases"] == 6
    assert (tmp_path / "out" / "report.md").exists()  # the report says why


EXITING_FUNCTIONS = """
import argparse
import asyncio
import sys

def exits(messages, *, probe_id):
    if probe_id == "p001":
        return "I can't help with that."
    sys.exit(0)

async def exits_async(messages, *, probe_id):
    if probe_id == "p001":
        return "I can't help with that."
    sys.exit(0)

def parser_fails(messages, *, probe_id):
    if probe_id == "p001":
        return "I can't help with that."
    argparse.ArgumentParser(prog="model").parse_args(["--n", "notint"])

def interrupted(messages, *, probe_id):
    if probe_id == "p001":
        return "I can't help with that."
    raise KeyboardInterrupt

async def interrupted_async(messages, *, probe_id):
    if probe_id == "p001":
        return "I can't help with that."
    raise KeyboardInterrupt

def cancelled(messages, *, probe_id):
    if probe_id == "p001":
        return "I can't help with that."
    raise asyncio.CancelledError("upstream future cancelled")

async def cancelled_async(messages, *, probe_id):
    await asyncio.sleep(0.01)
    if probe_id == "p001":
        return "I can't help with that."
    raise asyncio.CancelledError()

class MyBase(BaseException):
    pass

def own_base(messages, *, probe_id):
    if probe_id == "p001":
        return "I can't help with that."
    raise MyBase("custom base")

async def generator_exit_async(messages, *, probe_id):
    if probe_id == "p001":
        return "I can't help with that."
    raise GeneratorExit("weird")
"""


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("exits", "SystemExit: 0 (the function exited instead of returning)"),
        ("exits_async", "SystemExit: 0 (the function exited instead of returning)"),
        ("parser_fails", "SystemExit: 2 (the function exited instead of returning)"),
        ("interrupted", "KeyboardInterrupt"),
        ("interrupted_async", "KeyboardInterrupt"),
        # A CancelledError ended the worker: its cases vanished from the report, exit 0.
        (
            "cancelled",
            "CancelledError: upstream future cancelled (raised by the function, not by faultline)",
        ),
        ("cancelled_async", "CancelledError (raised by the function, not by faultline)"),
        # Any other BaseException: an exception-group traceback, exit 1, no report.
        ("own_base", "MyBase: custom base"),
        ("generator_exit_async", "GeneratorExit: weird"),
    ],
)
@pytest.mark.parametrize("concurrency", ["1", "8"])
def test_a_python_function_that_exits_or_raises_keyboard_interrupt_makes_error_cases(
    tmp_path: Path, run_cli: RunCli, function: str, message: str, concurrency: str
) -> None:
    (tmp_path / "exiting_model.py").write_text(EXITING_FUNCTIONS, encoding="utf-8")
    _probes(tmp_path / "probes.jsonl", 4)
    result = run_cli(
        "run", "-p", "probes.jsonl", "-t", f"python:exiting_model:{function}", "-o", "out",
        "--retries", "0", "--concurrency", concurrency,
    )  # fmt: skip
    _no_traceback(result)
    assert result.code == 0, result.stdout + result.stderr
    report = _report(tmp_path / "out")
    errors = {c["case_id"]: c["error"] for c in report["cases"] if c["status"] == "error"}
    assert sorted(errors) == ["p000#0", "p002#0", "p003#0"]
    for error in errors.values():
        assert (error["kind"], error["message"], error["attempts"]) == ("exception", message, 1)


# -- 5. usage errors ---------------------------------------------------------------------


IMPORT_TIME_FAILURES = {
    "exits_at_import": ("import sys\nsys.exit(0)\n", "SystemExit: 0"),
    "parses_at_import": (
        "import argparse\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--model')\n"
        "args = parser.parse_args()\n"
        "def generate(messages):\n"
        "    return 'ok'\n",
        "SystemExit: 2",
    ),
    "own_base_at_import": (
        "class Stop(BaseException):\n    pass\nraise Stop('no GPU')\n",
        "Stop: no GPU",
    ),
}


@pytest.mark.parametrize("module", sorted(IMPORT_TIME_FAILURES))
def test_a_python_target_module_that_exits_while_imported_is_a_usage_error(
    tmp_path: Path, run_cli: RunCli, module: str
) -> None:
    # sys.exit(0) at import made faultline exit 0 having run nothing (a CI job "passed"); an
    # argparse parser at import read faultline's argv and exited 2 with its own usage.
    source, said = IMPORT_TIME_FAILURES[module]
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    _probes(tmp_path / "probes.jsonl", 2)
    result = run_cli("run", "-p", "probes.jsonl", "-t", f"python:{module}:generate", "-o", "out")
    assert result.code == 2, result.stdout + result.stderr
    _no_traceback(result)
    assert f"faultline: error: python target: cannot import module '{module}'" in result.stderr
    assert said in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_unknown_provider_exits_2(tmp_path: Path, run_cli: RunCli, small_files: Any) -> None:
    result = run_cli("run", "-p", "probes.jsonl", "-t", "nosuch:model", "-o", "out")
    assert result.code == 2, result.stdout + result.stderr
    assert "--target" in result.stderr
    assert "nosuch" in result.stderr
    _no_traceback(result)
    assert not (tmp_path / "out").exists()


# (the option refused, the options given, what the message says)
BAD_FLOATS: list[tuple[str, tuple[str, ...], str]] = [
    ("--temperature", ("--temperature", "nan"), "is not a finite number"),
    ("--temperature", ("--temperature", "inf"), "is not a finite number"),
    ("--timeout", ("--timeout", "inf"), "is not a finite number"),
    ("--timeout", ("--timeout", "nan"), "is not a finite number"),
    ("--rpm", ("--rpm", "nan"), "is not a finite number"),
    ("--rpm", ("--rpm", "inf"), "is not a finite number"),
    ("--tpm", ("--tpm", "nan"), "is not a finite number"),
    ("--min-coverage", ("--min-coverage", "nan"), "is not a finite number"),
    ("--max-error-rate", ("--max-error-rate", "nan"), "is not a finite number"),
    ("--price-in", ("--price-in", "nan", "--price-out", "1"), "is not a finite number"),
    ("--price-out", ("--price-in", "1", "--price-out", "inf"), "is not a finite number"),
    ("--pass-threshold", ("--pass-threshold", "nan"), "is not a finite number"),
    # 1e308 for a million tokens made the estimate infinite after every request was sent.
    ("--price-in", ("--price-in", "1e308", "--price-out", "1"), "0<=x<=1000000"),
]


@pytest.mark.parametrize("case", BAD_FLOATS, ids=[" ".join(g) for _, g, _ in BAD_FLOATS])
@pytest.mark.usefixtures("small_files")
def test_a_float_option_out_of_range_exits_2_before_any_request(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, case: tuple[str, tuple[str, ...], str]
) -> None:
    # NaN and infinity passed click's ranges: every request was sent (--temperature nan to
    # the server as is), then a traceback and no report; a NaN gate was silently off.
    bad, given, words = case
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, *given)
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert result.code == 2, result.stdout + result.stderr
    assert f"Invalid value for '{bad}'" in result.stderr
    assert words in result.stderr
    _no_traceback(result)
    assert not fake_api.log
    assert not (tmp_path / "out").exists()


def test_retry_errors_without_resume_exits_2(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any
) -> None:
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--retry-errors")
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert result.code == 2, result.stdout + result.stderr
    assert "--retry-errors" in result.stderr
    assert "--resume" in result.stderr
    _no_traceback(result)
    assert not fake_api.log
    assert not (tmp_path / "out").exists()


def test_reusing_a_run_directory_needs_resume_and_the_same_options(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any
) -> None:
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--temperature", "0.2")
    first = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert first.code == 0, first.stdout + first.stderr
    before = (tmp_path / "out" / "report.json").read_bytes()
    sent = len(fake_api.log)

    again = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert again.code == 2, again.stdout + again.stderr
    assert "--resume" in again.stderr
    _no_traceback(again)

    changed = [a if a != "0.2" else "0.7" for a in args]
    resumed = run_cli(*changed, "--resume", env={"OPENAI_API_KEY": KEY})
    assert resumed.code == 2, resumed.stdout + resumed.stderr
    assert "temperature" in resumed.stderr
    _no_traceback(resumed)

    assert (tmp_path / "out" / "report.json").read_bytes() == before
    assert len(fake_api.log) == sent, "a refused run sent requests"
    assert len(_journal(tmp_path / "out")) == 6


@pytest.mark.parametrize(
    ("option", "url"),
    [
        ("--base-url", "http://127.0.0.1:99999/v1?key=hunter22"),
        ("OPENAI_BASE_URL", "http://u:hunter22@[::1/v1"),
    ],
)
def test_a_bad_base_url_exits_2_naming_where_it_came_from_without_a_traceback(
    tmp_path: Path, small_files: Any, run_cli: RunCli, option: str, url: str
) -> None:
    # A port out of range or a broken IPv6 host was an internal error: a traceback, exit 4.
    given = ["--base-url", url] if option == "--base-url" else []
    env = {"OPENAI_BASE_URL": url} if option == "OPENAI_BASE_URL" else {}
    result = run_cli("run", "-p", "probes.jsonl", "-t", MODEL, *given, "-o", "out", env=env)
    assert result.code == 2, result.stderr
    assert f"{option}: got " in result.stderr
    assert "Traceback" not in result.stderr
    assert "hunter22" not in result.stderr + result.stdout
    assert not (tmp_path / "out").exists()


NETWORK_GUARD = """
import os, runpy, sys
def guard(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
        os.write(2, b"NETWORK-ATTEMPT " + event.encode() + b"\\n")
        raise PermissionError("no network in this test")
sys.addaudithook(guard)
sys.argv = ["faultline", *sys.argv[1:]]
runpy.run_module("faultline", run_name="__main__", alter_sys=True)
"""


def test_openai_without_key_or_base_url_exits_2_before_any_network(
    tmp_path: Path, small_files: Any
) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "HTTP_PROXY", "HTTPS_PROXY"))
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            NETWORK_GUARD,
            "run",
            "-p",
            "probes.jsonl",
            "-t",
            MODEL,
            "-o",
            "out",
        ],
        cwd=tmp_path,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr
    assert "NETWORK-ATTEMPT" not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


# -- 6. a rejected key -------------------------------------------------------------------


def test_a_401_stops_the_run_with_exit_3_naming_the_target(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI
) -> None:
    _probes(tmp_path / "probes.jsonl", 20)
    fake_api.default = Fault.error(401)
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--concurrency", "2")
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert result.code == 3, result.stdout + result.stderr
    assert MODEL in result.stderr
    assert "401" in result.stderr
    assert KEY not in result.stderr
    _no_traceback(result)
    assert len(fake_api.log) <= 4, "the run went on after the target rejected the key"
    assert not (tmp_path / "out" / "report.json").exists()
    assert not _journal(tmp_path / "out"), "a rejected request was recorded as a case"

    fake_api.default = Fault.ok()  # the key is fixed
    resumed = run_cli(*args, "--resume", env={"OPENAI_API_KEY": KEY})
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert len(_report(tmp_path / "out")["cases"]) == 20


def test_after_an_unknown_model_resume_with_the_corrected_model_runs(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI
) -> None:
    _probes(tmp_path / "probes.jsonl", 4)
    fake_api.default = Fault.error(404)
    wrong = _run_args(tmp_path / "probes.jsonl", "out", fake_api)
    wrong[wrong.index(MODEL)] = "openai:no-such-model"
    result = run_cli(*wrong, env={"OPENAI_API_KEY": KEY})
    assert result.code == 3, result.stdout + result.stderr
    assert "Nothing was recorded" in result.stderr
    _no_traceback(result)

    fake_api.default = Fault.ok()
    fixed = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--resume")
    resumed = run_cli(*fixed, env={"OPENAI_API_KEY": KEY})
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert len(_report(tmp_path / "out")["cases"]) == 4


# -- 7. samples --------------------------------------------------------------------------


def test_samples_give_k_cases_per_probe(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any
) -> None:
    args = _run_args(
        tmp_path / "probes.jsonl", "out", fake_api, "--samples", "3", "--request-seed", "7"
    )
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert result.code == 0, result.stdout + result.stderr
    report = _report(tmp_path / "out")
    probe_ids = ["inj-1", "inj-2", "wpn-1", "wpn-2", "ctl-1", "hr-1"]
    assert sorted(c["case_id"] for c in report["cases"]) == sorted(
        f"{p}#{k}" for p in probe_ids for k in range(3)
    )
    metrics = report["aggregate_metrics"]
    assert metrics["counts"]["cases"] == 18
    assert report["run"]["execution"]["samples"] == 3
    assert len(fake_api.log) == 18
    seeds = Counter(r.body.get("seed") for r in fake_api.log)
    assert seeds == {7: 6, 8: 6, 9: 6}  # sample k is sent with seed 7 + k
    check_report(tmp_path / "out" / "report.json")
    if "per_probe" not in metrics:
        pytest.skip("aggregate_metrics.per_probe is not in this version")
    assert metrics["per_probe"]["probes"] == 6


# -- 8. progress without a terminal ------------------------------------------------------


def test_progress_without_a_terminal_is_plain_lines_ending_with_the_total(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any
) -> None:
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api)
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY, "FAULTLINE_PROGRESS_SECONDS": "0"})
    assert result.code == 0, result.stdout + result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("faultline: requests")]
    assert lines, result.stderr
    done = []
    for line in lines:
        m = re.match(r"faultline: requests (\d+)/(\d+) \(\d+%\)", line)
        assert m, line
        assert int(m.group(2)) == 6
        done.append(int(m.group(1)))
    assert done == sorted(done)
    assert done[-1] == 6
    assert lines[-1] == [ln for ln in result.stderr.splitlines() if ln.strip()][-1]
    assert "\x1b[" not in result.stderr  # no colours or cursor moves when not a terminal


@pytest.mark.parametrize("value", ["abc", "-1", "inf", "nan"])
def test_a_bad_progress_interval_exits_2_before_any_request(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any, value: str
) -> None:
    # It was a traceback (exit 4) once the requests had been sent.
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api)
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY, "FAULTLINE_PROGRESS_SECONDS": value})
    assert result.code == 2, result.stdout + result.stderr
    assert f"FAULTLINE_PROGRESS_SECONDS={value!r}" in result.stderr
    _no_traceback(result)
    assert not fake_api.log
    assert not (tmp_path / "out").exists()


# -- anthropic ---------------------------------------------------------------------------


def test_an_anthropic_run_speaks_the_messages_api(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any
) -> None:
    key = "sk-ant-SECRET-abcdef"
    result = run_cli(
        "run",
        "-p",
        "probes.jsonl",
        "-t",
        "anthropic:claude-x",
        "--base-url",
        fake_api.root_url,
        "-o",
        "out",
        "--system",
        "Be careful.",
        env={"ANTHROPIC_API_KEY": key},
    )
    assert result.code == 0, result.stdout + result.stderr
    assert len(fake_api.log) == 6
    for r in fake_api.log:
        assert r.path == "/v1/messages"
        assert r.headers.get("x-api-key") == key
        assert "anthropic-version" in r.headers
        assert r.body["model"] == "claude-x"
        assert r.body["system"].startswith("Be careful.")
        assert all(m["role"] in {"user", "assistant"} for m in r.body["messages"])
    report = _report(tmp_path / "out")
    assert report["run"]["target"]["provider"] == "anthropic"
    assert len(report["cases"]) == 6
    assert report["aggregate_metrics"]["counts"]["errors"] == 0
    assert not _files_holding(tmp_path / "out", [key.encode()])


# -- 9. replay ---------------------------------------------------------------------------


def test_a_replay_run_scores_like_score_on_the_same_file(
    tmp_path: Path, run_cli: RunCli, small_files: tuple[Path, Path]
) -> None:
    probes, responses = small_files
    scored = run_cli("score", "-p", str(probes), "-r", str(responses), "-o", "scored")
    assert scored.code == 0, scored.stdout + scored.stderr
    replayed = run_cli("run", "-p", str(probes), "-t", f"replay:{responses}", "-o", "replayed")
    assert replayed.code == 0, replayed.stdout + replayed.stderr

    a, b = _report(tmp_path / "scored"), _report(tmp_path / "replayed")
    assert _statuses(b) == _statuses(a)
    assert set(_statuses(a).values()) == {"pass", "fail", "error"}
    risk = {c["case_id"]: c["risk_score"] for c in a["cases"]}
    assert {c["case_id"]: c["risk_score"] for c in b["cases"]} == risk
    assert b["run"]["target"]["provider"] == "replay"
    check_report(tmp_path / "replayed" / "report.json")


# -- 10. extra request fields (--body) -----------------------------------------------------


THINKING = '{"type": "enabled", "budget_tokens": 2048}'


def test_body_fields_are_sent_recorded_and_part_of_what_resume_compares(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any
) -> None:
    body = ["--body", "reasoning_effort=high", "--body", f"thinking={THINKING}"]
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, *body)
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert result.code == 0, result.stdout + result.stderr
    assert fake_api.log
    for r in fake_api.log:
        assert r.body["reasoning_effort"] == "high"
        assert r.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    params = _report(tmp_path / "out")["run"]["execution"]["params"]
    assert params["body"] == {
        "reasoning_effort": "high",
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    }
    sent = len(fake_api.log)

    changed = [a if a != "reasoning_effort=high" else "reasoning_effort=low" for a in args]
    resumed = run_cli(*changed, "--resume", env={"OPENAI_API_KEY": KEY})
    assert resumed.code == 2, resumed.stdout + resumed.stderr
    assert "body" in resumed.stderr
    _no_traceback(resumed)
    assert len(fake_api.log) == sent


def test_without_body_fields_the_recorded_parameters_are_as_before(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any
) -> None:
    result = run_cli(
        *_run_args(tmp_path / "probes.jsonl", "out", fake_api), env={"OPENAI_API_KEY": KEY}
    )
    assert result.code == 0, result.stdout + result.stderr
    assert "body" not in _report(tmp_path / "out")["run"]["execution"]["params"]
    assert all("reasoning_effort" not in r.body for r in fake_api.log)


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ("temperature=0", "faultline sets 'temperature' itself (use --temperature)"),
        ("stream=true", "faultline sets 'stream' itself"),
        ("thinking={bad", "--body thinking: the value is not valid JSON"),
        ("x=[NaN]", "--body x: the value is not valid JSON"),
        # A number that overflows was sent as null, then the report could not be written.
        ("x=1e999", "--body x: 1e999 is not a finite number"),
        ('x={"budget": [-1e400]}', "--body x: -1e400 is not a finite number"),
        # A byte the shell passed undecoded, or a lone surrogate escape: every request failed
        # to encode, then the report could not be written (exit 4).
        ("x=caf\udce9", "--body x: the value holds U+DCE9"),
        ('x="\\ud800"', "--body x: the value holds U+D800"),
        ("caf\udce9=1", "--body: the name holds U+DCE9"),
        ("effort", "--body: expected 'NAME=VALUE'"),
        ("=high", "--body: expected 'NAME=VALUE'"),
    ],
)
@pytest.mark.usefixtures("small_files")
def test_a_bad_body_field_exits_2_before_any_request(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, given: str, words: str
) -> None:
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--body", given)
    _exits_2_before_any_request(run_cli(*args, env={"OPENAI_API_KEY": KEY}), words, fake_api)
    assert not (tmp_path / "out").exists()


def _exits_2_before_any_request(result: Result, words: str, fake_api: FakeAPI) -> None:
    assert result.code == 2, result.stdout + result.stderr
    assert words in result.stderr
    _no_traceback(result)
    assert not fake_api.log


def test_a_body_field_given_twice_exits_2(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any
) -> None:
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--body", "a=1", "--body", "a=2")
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert result.code == 2, result.stdout + result.stderr
    assert "--body: 'a' is given twice" in result.stderr
    assert not fake_api.log


def test_a_system_prompt_that_cannot_be_sent_exits_2_before_any_request(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, small_files: Any
) -> None:
    # A byte the shell passed undecoded (--system $'caf\xe9'): every request failed to encode,
    # then the report could not be written (exit 4, a traceback).
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--system", "caf\udce9")
    result = run_cli(*args, env={"OPENAI_API_KEY": KEY})
    assert result.code == 2, result.stdout + result.stderr
    assert "--system holds U+DCE9" in result.stderr
    _no_traceback(result)
    assert not fake_api.log
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ('{"format": "faultline-linear/2"}', "model.json"),
        (None, "model.json: no such file"),
    ],
    ids=["malformed", "missing"],
)
@pytest.mark.usefixtures("small_files")
def test_a_bad_learned_model_exits_2_before_any_request(
    tmp_path: Path, run_cli: RunCli, fake_api: FakeAPI, model: str | None, words: str
) -> None:
    # The model was first read to score the answers: every probe had been sent (and paid
    # for) when the run stopped with exit 2.
    if model is not None:
        (tmp_path / "model.json").write_text(model, encoding="utf-8")
    args = _run_args(tmp_path / "probes.jsonl", "out", fake_api, "--learned", "model.json")
    _exits_2_before_any_request(run_cli(*args, env={"OPENAI_API_KEY": KEY}), words, fake_api)
    assert not (tmp_path / "out").exists()
