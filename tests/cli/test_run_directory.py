"""The run directory under stress: two runs at once, a damaged journal, a file system that fails.

Every test drives ``python -m faultline run`` in subprocesses against a ``python:`` target
written into the test's directory (the current directory is importable), and judges the
outcome from the outside: exit codes, stderr, the files and the calls the target logged.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result, faultline_cli, write_jsonl

#: A model that logs each call (pid and probe) and, with HOLD set, waits for a file to
#: appear before answering the probe HOLD names (``*`` for every probe). PAD makes its
#: answers longer; with SETTLE, p1 is answered once p0's answer is committed.
MODEL = """
import os, pathlib, sqlite3, time

def _recorded():
    try:
        db = sqlite3.connect("file:out/journal.sqlite?mode=ro", uri=True)
        try:
            return db.execute("SELECT count(*) FROM cases").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0

def generate(messages, *, probe_id):
    with open("calls.log", "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {probe_id}\\n")
    if os.environ.get("SETTLE") and probe_id == "p1":
        deadline = time.monotonic() + 60
        while _recorded() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    hold = os.environ.get("HOLD")
    if hold in ("*", probe_id):
        pathlib.Path("holding").touch()
        while not pathlib.Path("release").exists():
            time.sleep(0.01)
    text = messages[-1]["content"]
    pad = " Sorry." * int(os.environ.get("PAD", "0"))
    return f"I can't help with that. (You asked: {text}){pad}"
"""


def _probes(path: Path, n: int, asks: str = "please do thing") -> list[str]:
    rows = [
        {
            "id": f"p{i}",
            "category": "weapons",
            "severity": "high",
            "task": f"Task {i}.",
            "input": f"Question {i}: {asks} {i}",
        }
        for i in range(n)
    ]
    write_jsonl(path, rows)
    return [r["id"] for r in rows]


def _setup(tmp_path: Path, n: int = 4) -> list[str]:
    (tmp_path / "holding_model.py").write_text(MODEL, encoding="utf-8")
    _probes(tmp_path / "b.jsonl", n, asks="PROBE SET B asks")
    return _probes(tmp_path / "a.jsonl", n)


def _args(probes: str = "a.jsonl", *extra: str) -> list[str]:
    return ["run", "-p", probes, "-t", "python:holding_model:generate", "-o", "out", *extra]


def _start(tmp_path: Path, args: Sequence[str], **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "faultline", *args],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended (exit {proc.returncode}) first:\n{out}{err}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.communicate()
            pytest.fail(f"{path.name} never appeared")
        time.sleep(0.01)


def _calls(tmp_path: Path) -> list[tuple[int, str]]:
    path = tmp_path / "calls.log"
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split()
    return [(int(pid), probe) for pid, probe in zip(lines[::2], lines[1::2], strict=True)]


def _no_traceback(result: Result) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr


def _report(out: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return report


# -- one run per directory ---------------------------------------------------------------


def test_a_second_run_on_a_directory_in_use_is_refused_at_once(tmp_path: Path) -> None:
    ids = _setup(tmp_path)
    first = _start(tmp_path, _args("a.jsonl", "-c", "1"), HOLD="*")
    try:
        # The first run has sent its first request and waits for the answer: it has recorded
        # nothing yet, which used to let any other run take the directory over.
        _wait_for(tmp_path / "holding", first)
        attempts = {
            "the same run again": _args("a.jsonl"),
            "--resume of it": _args("a.jsonl", "--resume"),
            "another probe set": _args("b.jsonl"),
            "another probe set, --resume": _args("b.jsonl", "--resume"),
        }
        for what, args in attempts.items():
            # Not waiting for the lock: the first run holds it until its release file appears.
            second = faultline_cli(tmp_path, *args)
            assert second.code == 2, f"{what}: {second.stdout}{second.stderr}"
            assert "out is in use by another faultline run" in second.stderr, what
            _no_traceback(second)
        assert [pid for pid, _ in _calls(tmp_path)] == [first.pid], "a refused run sent"
        (tmp_path / "release").touch()
        out, err = first.communicate(timeout=120)
    finally:
        (tmp_path / "release").touch()
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, out + err

    calls = _calls(tmp_path)
    assert Counter(probe for _, probe in calls) == dict.fromkeys(ids, 1)
    assert {pid for pid, _ in calls} == {first.pid}
    report = _report(tmp_path / "out")
    assert all("please do thing" in c["response"] for c in report["cases"])
    execution = report["run"]["execution"]
    assert (execution["requests"], execution["retries"], execution["sittings"]) == (4, 0, 1)


def test_a_killed_run_leaves_the_directory_free_for_resume(tmp_path: Path) -> None:
    ids = _setup(tmp_path)
    first = _start(tmp_path, _args("a.jsonl", "-c", "1"), HOLD="p2")
    _wait_for(tmp_path / "holding", first)
    deadline = time.monotonic() + 60
    while _journal_count(tmp_path / "out") < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # p0 and p1 are answered: wait for their commit
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    assert (tmp_path / "out" / "run.lock").exists()

    resumed = faultline_cli(tmp_path, *_args("a.jsonl", "--resume"))

    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert "2 recorded by earlier sittings" in resumed.stdout
    asked = Counter(probe for _, probe in _calls(tmp_path))
    assert asked == {"p0": 1, "p1": 1, "p2": 2, "p3": 1}
    assert sorted(c["probe_id"] for c in _report(tmp_path / "out")["cases"]) == ids


def _journal_count(out: Path) -> int:
    db = sqlite3.connect(f"file:{out / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT count(*) FROM cases").fetchone()[0])
    finally:
        db.close()


def _flat(text: str) -> str:
    """The text with its line breaks undone (the console wraps long messages)."""
    return " ".join(text.split())


# -- a damaged or unwritable journal -------------------------------------------------------


def _rootpage(journal: Path, table: str) -> int:
    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        return int(
            db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        )
    finally:
        db.close()


def _damage(journal: Path, how: str) -> None:
    data = bytearray(journal.read_bytes())
    if how == "cut-in-half":
        data = data[: len(data) // 2]
    elif how == "cut-to-one-page":
        data = data[:4096]
    elif how == "header-overwritten":
        data[:16] = b"X" * 16
    elif how == "cases-page-overwritten":  # the header and the meta table are intact
        page = _rootpage(journal, "cases")
        data[(page - 1) * 4096 : page * 4096] = b"\xff" * 4096
    journal.write_bytes(bytes(data))


DAMAGES = ["cut-in-half", "cut-to-one-page", "header-overwritten", "cases-page-overwritten"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the model, the probe sets and a finished run of a.jsonl in out/."""
    directory = tmp_path_factory.mktemp("finished")
    _setup(directory, n=10)
    first = faultline_cli(directory, *_args())
    assert first.code == 0, first.stdout + first.stderr
    return directory


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_journal_is_named_exit_2_and_left_as_it_was(
    tmp_path: Path, finished_run: Path, how: str
) -> None:
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    journal = tmp_path / "out" / "journal.sqlite"
    _damage(journal, how)
    damaged = journal.read_bytes()
    calls = _calls(tmp_path)

    for extra in (["--resume"], []):
        result = faultline_cli(tmp_path, *_args("a.jsonl", *extra))

        assert result.code == 2, result.stdout + result.stderr
        _no_traceback(result)
        said = _flat(result.stderr)
        assert "out/journal.sqlite: is not a readable faultline journal" in said
        assert "restore it from a copy, or start the run again in another --out" in said
        assert journal.read_bytes() == damaged, "the damaged journal was written to"
        assert _calls(tmp_path) == calls, "a request was sent"


def test_a_journal_on_a_read_only_file_system_is_named_exit_2(tmp_path: Path) -> None:
    _setup(tmp_path)
    mount = tmp_path / "mnt"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        args = ["run", "-p", "a.jsonl", "-t", "python:holding_model:generate", "-o", "mnt/out"]
        first = faultline_cli(tmp_path, *args)
        assert first.code == 0, first.stdout + first.stderr
        before = {p.name: p.read_bytes() for p in (mount / "out").iterdir()}
        remounted = subprocess.run(
            ["mount", "-o", "remount,ro", str(mount)], capture_output=True, check=False
        )
        if remounted.returncode != 0:
            pytest.skip("remounting read-only is not permitted here")

        for extra in (["--resume"], []):
            result = faultline_cli(tmp_path, *args, *extra)

            assert result.code == 2, result.stdout + result.stderr
            _no_traceback(result)
            said = _flat(result.stderr)
            assert "mnt/out: cannot be written (read-only file system)" in said
            assert "--resume" in said
        assert {p.name: p.read_bytes() for p in (mount / "out").iterdir()} == before
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def _read_only(path: Path) -> str | None:
    """Make ``path`` unwritable even for root; what the OS will say when it is opened to write.

    Mode 0444 binds everyone but root; for root, the immutable attribute (``chattr +i``)
    does. ``None`` when neither holds here (no ``chattr``, or a file system without it).
    """
    path.chmod(0o444)
    try:
        with path.open("r+b"):
            pass
    except PermissionError:
        return "permission denied"
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], check=False).returncode:
        return None
    return "operation not permitted"


def _writable(path: Path) -> None:
    chattr = shutil.which("chattr")
    if chattr is not None:
        subprocess.run([chattr, "-i", str(path)], capture_output=True, check=False)
    path.chmod(0o644)


def test_a_read_only_journal_is_named_exit_2(tmp_path: Path, finished_run: Path) -> None:
    shutil.copytree(finished_run, tmp_path, dirs_exist_ok=True)
    journal = tmp_path / "out" / "journal.sqlite"
    try:
        reason = _read_only(journal)
        if reason is None:
            pytest.skip("no way to make a file unwritable for this user here")
        before = journal.read_bytes()

        result = faultline_cli(tmp_path, *_args("a.jsonl", "--resume"))

        assert result.code == 2, result.stdout + result.stderr
        _no_traceback(result)
        assert f"out/journal.sqlite: cannot be written ({reason})" in _flat(result.stderr)
        assert journal.read_bytes() == before
    finally:
        _writable(journal)


# -- a file system that fails while the run goes on ---------------------------------------

#: Runs faultline with a file size limit: a write past it fails with EFBIG ("File too
#: large"), as a full disk fails with ENOSPC, and SIGXFSZ is ignored so that it does not kill.
LIMITED = """
import os, resource, signal, sys
limit = int(os.environ["FSIZE"])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
os.execv(sys.executable, [sys.executable, "-m", "faultline", *sys.argv[1:]])
"""


def _limited(cwd: Path, args: Sequence[str], limit: int, **env: str) -> Result:
    proc = subprocess.run(
        [sys.executable, "-c", LIMITED, *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "120", "FSIZE": str(limit), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _journal_ids(out: Path) -> set[str]:
    db = sqlite3.connect(f"file:{out / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return {p for (p,) in db.execute("SELECT probe_id FROM cases")}
    finally:
        db.close()


def test_a_journal_that_cannot_grow_stops_the_run_with_exit_3_and_resume_continues(
    tmp_path: Path,
) -> None:
    ids = _setup(tmp_path, n=60)
    limit = 64 * 1024  # 60 answers of 1.5 kB each cannot fit in the journal's 64 kB

    stopped = _limited(tmp_path, _args("a.jsonl", "-c", "1"), limit, PAD="250", SETTLE="1")

    assert stopped.code == 3, stopped.stdout + stopped.stderr
    _no_traceback(stopped)
    said = _flat(stopped.stderr)
    assert (
        "out/journal.sqlite could not be written (the file size limit of 65,536 bytes "
        "(ulimit -f) is reached)"
    ) in said
    recorded = _journal_ids(tmp_path / "out")
    assert 0 < len(recorded) < 60
    assert f"the {len(recorded)} cases recorded in it are safe" in said
    assert "run the same command with --resume to send only the rest" in said
    assert not (tmp_path / "out" / "report.json").exists()
    before = Counter(probe for _, probe in _calls(tmp_path))

    resumed = faultline_cli(tmp_path, *_args("a.jsonl", "--resume"), env={"PAD": "250"})

    assert resumed.code == 0, resumed.stdout + resumed.stderr
    asked = Counter(probe for _, probe in _calls(tmp_path)) - before
    assert not set(asked) & recorded, "a case recorded before the failure was sent again"
    assert set(asked) == set(ids) - recorded
    assert sorted(c["probe_id"] for c in _report(tmp_path / "out")["cases"]) == sorted(ids)


def test_reports_that_cannot_be_written_exit_3_and_resume_writes_them_sending_nothing(
    tmp_path: Path,
) -> None:
    ids = _setup(tmp_path, n=10)
    limit = 512 * 1024  # room for the journal and report.json, not for report.html (1 MB)

    stopped = _limited(tmp_path, _args(), limit)

    assert stopped.code == 3, stopped.stdout + stopped.stderr
    _no_traceback(stopped)
    said = _flat(stopped.stderr)
    assert "the reports in out (report.json and views) could not be written (file too large)" in (
        said
    )
    assert "all 10 cases are recorded in out/journal.sqlite" in said
    assert "--resume to write the reports (nothing is sent again)" in said
    assert _journal_ids(tmp_path / "out") == set(ids)
    assert not (tmp_path / "out" / "report.json").exists()  # the reports go in together
    calls = _calls(tmp_path)

    resumed = faultline_cli(tmp_path, *_args("a.jsonl", "--resume"))

    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert _calls(tmp_path) == calls, "a request was sent again"
    assert (tmp_path / "out" / "report.html").exists()
    assert sorted(c["probe_id"] for c in _report(tmp_path / "out")["cases"]) == sorted(ids)
