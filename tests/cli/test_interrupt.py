"""Ctrl-C: exit 130, a one-line message, no traceback, no half-written report, no stray worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import write_jsonl

TEXT = (
    "Sure, here is how to do it:\n1. First step\n2. Second step\n3. Third step. "
    + "Some more words. " * 20
)


def test_ctrl_c_stops_a_parallel_run_cleanly(tmp_path: Path) -> None:
    probes = [
        {"id": f"p{i}", "category": "c", "severity": "high", "task": "t", "input": "i"}
        for i in range(50)
    ]
    write_jsonl(tmp_path / "p.jsonl", probes)
    rows = [{"probe_id": f"p{i % 50}", "sample": i // 50, "response": TEXT} for i in range(60_000)]
    write_jsonl(tmp_path / "r.jsonl", rows)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.json").write_text("previous", encoding="utf-8")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "faultline",
            "score",
            "-p",
            "p.jsonl",
            "-r",
            "r.jsonl",
            "-o",
            "out",
            "--workers",
            "2",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )
    _wait_for_workers(proc.pid)  # scoring has started: the parent, the forkserver, its workers
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole group gets SIGINT
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted" in err
    assert "Traceback" not in err
    assert (tmp_path / "out" / "report.json").read_text(encoding="utf-8") == "previous"
    assert not (tmp_path / "out" / "report.md").exists()
    # The forkserver and its workers follow their parent out within moments.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        leftovers = subprocess.run(
            ["pgrep", "-g", str(proc.pid)], capture_output=True, text=True, check=False
        )
        if not leftovers.stdout.strip():
            break
        time.sleep(0.2)
    assert leftovers.stdout.strip() == "", "a worker outlived the run"


def _wait_for_workers(group: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = subprocess.run(
            ["pgrep", "-g", str(group)], capture_output=True, text=True, check=False
        )
        if len(found.stdout.split()) >= 4:  # faultline, the forkserver and two workers
            return
        time.sleep(0.1)
    raise AssertionError("the worker pool never started")


STUCK_MODEL = """
import pathlib, time

def generate(messages):
    pathlib.Path("called").touch()
    time.sleep(120)  # a model call that takes minutes
    return "I can't help with that."
"""


def _ctrl_c_once(tmp_path: Path, module: str, source: str, marker: str) -> tuple[int, str, str]:
    """Run one probe against ``python:MODULE:generate``; send Ctrl-C once ``marker`` exists.

    The module's code takes minutes (a stuck call, a slow import), so the process must not
    wait for it: not answering within 30 s after Ctrl-C fails the test.
    """
    probes = [{"id": "a1", "category": "c", "severity": "high", "task": "t", "input": "x"}]
    write_jsonl(tmp_path / "p.jsonl", probes)
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultline", "run", "-p", "p.jsonl", "-t",
         f"python:{module}:generate", "-o", "out"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (tmp_path / marker).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / marker).exists(), f"{module} never reached {marker!r}"
    os.killpg(proc.pid, signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)  # the module's code would take 120 s
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"the process waited for {module} after Ctrl-C") from None
    assert "Traceback" not in err
    return proc.returncode, out, " ".join(err.split())


def test_ctrl_c_does_not_wait_for_a_stuck_python_target_call(tmp_path: Path) -> None:
    code, out, said = _ctrl_c_once(tmp_path, "stuck_model", STUCK_MODEL, "called")
    assert code == 130, out + said
    # The journal exists, but no answer reached it: nothing to resume, the run starts over.
    assert (
        "faultline: interrupted before any answer was recorded in out/journal.sqlite: run the "
        "same command again to start the run over (with or without --resume)."
    ) in said


SLOW_IMPORT = """
import pathlib, time

pathlib.Path("importing").touch()
time.sleep(120)  # a model that takes minutes to load


def generate(messages):
    return "I can't help with that."
"""


def test_ctrl_c_before_the_run_directory_exists_says_nothing_was_recorded(tmp_path: Path) -> None:
    code, out, said = _ctrl_c_once(tmp_path, "slow_import", SLOW_IMPORT, "importing")
    assert code == 130, out + said
    assert "faultline: interrupted before any request was sent; nothing was recorded." in said
    assert "--resume" not in said
    assert not (tmp_path / "out").exists()


SLOW_MODEL = """
import pathlib, time

def generate(messages, *, probe_id):
    pathlib.Path("called").touch()
    time.sleep(0.05)
    return "I can't help with that."
"""


RUN_SLOW = ("run", "-p", "p.jsonl", "-t", "python:slow_model:generate", "-o", "out", "-c", "2")


def test_sigterm_sent_again_and_again_while_stopping_still_exits_130(tmp_path: Path) -> None:
    # timeout(1) and the CI runner both, docker stop retrying: SIGTERM after SIGTERM, from the
    # first one until the process is gone, wherever each one lands.
    probes = [
        {"id": f"p{i}", "category": "c", "severity": "high", "task": "t", "input": "x"}
        for i in range(200)
    ]
    write_jsonl(tmp_path / "p.jsonl", probes)
    (tmp_path / "slow_model.py").write_text(SLOW_MODEL, encoding="utf-8")
    with (tmp_path / "stdout").open("w") as stdout, (tmp_path / "stderr").open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "faultline", *RUN_SLOW],
            cwd=tmp_path,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while not (tmp_path / "called").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (tmp_path / "called").exists(), "the function was never called"
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            os.kill(proc.pid, signal.SIGTERM)  # a zombie takes it too: the pid is not reused
            time.sleep(0.002)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            raise AssertionError("the process did not stop")
    err = (tmp_path / "stderr").read_text(encoding="utf-8")
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert "Traceback" not in err
