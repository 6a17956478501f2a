"""Runs against a Python function: odd text it returns, and calls that get stuck."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from faultline.runner import ProbeRun, RecordingError, RunnerConfig, run_probes
from faultline.runner.journal import Entry, Journal
from faultline.targets import Completion, GenerationParams, Request
from tests.runner.support import answered, cases, default_rules, journal_rows, write_probes

_names = itertools.count()


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Modules written into tmp_path (the current directory), forgotten after the test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []
    yield written
    for name in written:
        sys.modules.pop(name, None)


def _write(tmp_path: Path, written: list[str], source: str) -> str:
    name = f"faultline_run_model_{next(_names)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    written.append(name)
    return f"python:{name}:generate"


def _run(spec: str, tmp_path: Path, n: int, **kwargs: object) -> ProbeRun:
    kwargs.setdefault("runner", RunnerConfig(concurrency=8, retries=0, seed=0))
    return run_probes(
        write_probes(tmp_path, n), spec, tmp_path / "out", rules=default_rules(), **kwargs
    )  # type: ignore[arg-type]


# -- text that is not valid Unicode ------------------------------------------------------

SURROGATES = """
    def generate(messages, *, probe_id=None):
        if probe_id == "p3":
            return "Sure \\udcff broken byte from surrogateescape"
        if probe_id == "p5":
            raise ValueError("bad \\udc80 byte")
        return "I can't help with that. It could cause real harm."
"""


def test_a_lone_surrogate_is_recorded_as_u_fffd_and_the_run_completes(
    tmp_path: Path, module: list[str]
) -> None:
    spec = _write(tmp_path, module, SURROGATES)

    probe_run = _run(spec, tmp_path, 8)

    assert probe_run.execution["recorded"] == 8
    rows = {r["probe_id"]: r for r in journal_rows(tmp_path / "out")}
    assert sorted(rows) == [f"p{i}" for i in range(8)]
    assert rows["p3"]["response"] == "Sure \ufffd broken byte from surrogateescape"
    assert rows["p5"]["error"]["message"] == "ValueError: bad \ufffd byte"
    found = cases(tmp_path / "out")
    assert found["p3#0"]["status"] in {"pass", "fail"}  # scored, not lost
    assert found["p3#0"]["response"] == "Sure \ufffd broken byte from surrogateescape"
    assert found["p5#0"]["status"] == "error"
    lines = (tmp_path / "out" / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 8
    assert all(json.loads(line) for line in lines)


def test_the_journal_stores_a_lone_surrogate_in_any_field_as_u_fffd(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path, {"run": 1}, resume=False)
    odd = answered(
        "p0",
        response="a\ud800b",
        model="m\udcff",
        request={"messages": [{"role": "user", "content": "q\udc80"}]},
    )
    fine = Entry(**{**odd.__dict__, "probe_id": "p1", "response": "fine", "model": None})
    journal.start()
    journal.record(odd)
    journal.record(fine)
    journal.close()

    rows = {r["probe_id"]: r for r in journal_rows(tmp_path)}
    assert rows["p0"]["response"] == "a\ufffdb"
    assert rows["p0"]["model"] == "m\ufffd"
    assert rows["p0"]["request"]["messages"][0]["content"] == "q\ufffd"
    assert rows["p1"]["response"] == "fine"  # the other answers of the same commit are kept


# -- a call that gets stuck ----------------------------------------------------------------

STUCK = """
    import threading

    release = threading.Event()
    called = []

    def generate(messages, *, probe_id=None):
        called.append(probe_id)
        if probe_id == "p0":
            release.wait(60)  # a stalled socket, a deadlock
        return "I can't help with that. It could cause real harm."
"""


def test_a_stuck_call_is_a_timeout_and_the_later_cases_are_still_called(
    tmp_path: Path, module: list[str]
) -> None:
    spec = _write(tmp_path, module, STUCK)
    runner = RunnerConfig(concurrency=1, retries=0, seed=0)
    try:
        probe_run = _run(spec, tmp_path, 7, runner=runner, params=GenerationParams(timeout=0.5))
    finally:
        sys.modules[module[0]].release.set()

    assert sys.modules[module[0]].called == [f"p{i}" for i in range(7)]
    found = cases(tmp_path / "out")
    assert found["p0#0"]["status"] == "error"
    assert found["p0#0"]["error"]["kind"] == "timeout"
    assert all(found[f"p{i}#0"]["status"] == "pass" for i in range(1, 7))
    assert probe_run.execution["errors"] == 1


# -- a return value of the wrong type ----------------------------------------------------

WRONG_TYPE = """
    calls = []

    def generate(messages, *, probe_id=None):
        calls.append(probe_id)
        return None if probe_id == "p1" else "I can't help with that."
"""


def test_a_return_value_of_the_wrong_type_is_an_error_at_once_not_retried(
    tmp_path: Path, module: list[str]
) -> None:
    spec = _write(tmp_path, module, WRONG_TYPE)
    runner = RunnerConfig(concurrency=1, retries=3, backoff_base=5.0, seed=0)

    probe_run = _run(spec, tmp_path, 3, runner=runner)

    assert sys.modules[module[0]].calls == ["p0", "p1", "p2"]  # p1 called once
    error = cases(tmp_path / "out")["p1#0"]["error"]
    assert (error["kind"], error["attempts"]) == ("malformed", 1)
    assert "returned None" in error["message"]
    assert probe_run.execution["retries"] == 0


# -- every planned case is recorded -------------------------------------------------------


class _CancellingTarget:
    """A target object of the user's own that misbehaves with cancellation on probe p2.

    ``how`` is ``"raise"``: it raises ``CancelledError`` (a future it awaited was cancelled);
    ``"self"``: it cancels the very task that calls it, which faultline cannot tell from a
    cancellation of its own.
    """

    provider = "python"
    model = "cancelling"
    spec = "python:cancelling"
    secrets: tuple[str, ...] = ()

    def __init__(self, how: str) -> None:
        self.how = how

    def describe(self) -> dict[str, Any]:
        return {"spec": self.spec, "provider": self.provider, "model": self.model}

    async def complete(self, request: Request) -> Completion:
        await asyncio.sleep(0)
        if request.probe_id == "p2":
            if self.how == "raise":
                raise asyncio.CancelledError("the client's future was cancelled")
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(0)
        return Completion(text="I can't help with that. It could cause real harm.")

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_cancelled_error_raised_by_a_target_object_is_that_cases_error(
    tmp_path: Path, concurrency: int
) -> None:
    # It ended the worker: the case and every one the worker had still to send vanished,
    # and the report read full coverage.
    probe_run = run_probes(
        write_probes(tmp_path, 6),
        _CancellingTarget("raise"),
        tmp_path / "out",
        rules=default_rules(),
        runner=RunnerConfig(concurrency=concurrency, retries=0, seed=0),
    )
    assert probe_run.execution["recorded"] == 6
    found = cases(tmp_path / "out")
    assert sorted(found) == [f"p{i}#0" for i in range(6)]
    assert found["p2#0"]["status"] == "error"
    assert found["p2#0"]["error"]["kind"] == "exception"
    assert found["p2#0"]["error"]["message"] == (
        "CancelledError: the client's future was cancelled (raised by the target)"
    )


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_run_that_loses_a_case_fails_loudly_and_writes_no_report(
    tmp_path: Path, concurrency: int
) -> None:
    # The invariant: every planned case is recorded, or the run fails (exit 3), whatever
    # made a worker stop early; here a target that cancels its caller's task.
    with pytest.raises(RecordingError) as caught:
        run_probes(
            write_probes(tmp_path, 6),
            _CancellingTarget("self"),
            tmp_path / "out",
            rules=default_rules(),
            runner=RunnerConfig(concurrency=concurrency, retries=0, seed=0),
        )
    assert caught.value.exit_code == 3
    message = str(caught.value)
    assert "the run planned 6 cases but" in message
    assert "p2#0" in message
    assert "--resume" in message
    assert not (tmp_path / "out" / "report.json").exists()
    assert not (tmp_path / "out" / "responses.jsonl").exists()
    recorded = {r["probe_id"] for r in journal_rows(tmp_path / "out")}
    assert "p2" not in recorded
