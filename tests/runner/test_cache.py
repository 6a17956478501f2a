"""The response cache: answers reused across run directories, misses when anything changes."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from faultline.errors import InputError
from faultline.runner.cache import CACHE_NAME
from faultline.targets import GenerationParams
from tests.conftest import faultline_cli
from tests.runner.support import (
    cases,
    fast,
    files_containing,
    ids,
    journal_rows,
    run,
    sent_per_probe,
    tag,
    write_probes,
)
from tests.targets.fakeapi import FakeAPI, Fault


def test_a_second_run_with_the_same_cache_sends_nothing(fake_api: FakeAPI, tmp_path: Path) -> None:
    probes = write_probes(tmp_path, 4)
    cache = tmp_path / "cache"
    first = run(fake_api, probes, tmp_path / "one", cache=cache)
    assert first.execution["cached"] == 0
    assert len(fake_api.log) == 4

    second = run(fake_api, probes, tmp_path / "two", cache=cache)

    assert len(fake_api.log) == 4  # nothing more was sent
    assert (cache / CACHE_NAME).is_file()
    assert second.execution["cached"] == 4
    assert second.execution["requests"] == 0
    assert second.execution["retries"] == 0
    assert second.sitting.cached == 4
    usage = first.execution["usage"]
    assert second.execution["usage"] == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cases_without_usage": 0,
        "cached_input_tokens": usage["input_tokens"],
        "cached_output_tokens": usage["output_tokens"],
    }
    assert all(r["cached"] == 1 and r["attempts"] == 0 for r in journal_rows(tmp_path / "two"))
    one, two = cases(tmp_path / "one"), cases(tmp_path / "two")
    assert {k: c["response"] for k, c in two.items()} == {k: c["response"] for k, c in one.items()}
    assert {k: c["status"] for k, c in two.items()} == {k: c["status"] for k, c in one.items()}


@pytest.mark.parametrize(
    "change",
    [
        {"params": GenerationParams(temperature=0.9)},
        {"params": GenerationParams(seed=3)},
        {"params": GenerationParams(system="Be helpful.")},
        {"target": "openai:another-model"},
    ],
    ids=["temperature", "seed", "system-prompt", "model"],
)
def test_a_changed_request_misses_the_cache(
    fake_api: FakeAPI, tmp_path: Path, change: dict[str, Any]
) -> None:
    probes = write_probes(tmp_path, 3)
    cache = tmp_path / "cache"
    run(fake_api, probes, tmp_path / "one", cache=cache)

    changed = run(fake_api, probes, tmp_path / "two", cache=cache, **change)

    assert changed.execution["cached"] == 0
    assert changed.execution["requests"] == 3
    assert sent_per_probe(fake_api, ids(3)) == {"p0": 2, "p1": 2, "p2": 2}


def test_a_sample_is_reused_only_as_the_same_sample(fake_api: FakeAPI, tmp_path: Path) -> None:
    probes = write_probes(tmp_path, 3)
    cache = tmp_path / "cache"
    run(fake_api, probes, tmp_path / "one", cache=cache)

    more = run(fake_api, probes, tmp_path / "two", cache=cache, samples=2)

    assert more.execution["cached"] == 3  # sample 0 of each probe
    assert more.execution["requests"] == 3  # sample 1 of each probe was asked for
    assert sent_per_probe(fake_api, ids(3)) == {"p0": 2, "p1": 2, "p2": 2}
    cached = {
        (r["probe_id"], r["sample"]): bool(r["cached"]) for r in journal_rows(tmp_path / "two")
    }
    assert cached == {(p, k): k == 0 for p in ids(3) for k in range(2)}


def test_errors_are_not_cached(fake_api: FakeAPI, tmp_path: Path) -> None:
    probes = write_probes(tmp_path, 3)
    cache = tmp_path / "cache"
    fake_api.plan(tag("p1"), [Fault.error(400)])
    fake_api.plan(tag("p2"), [Fault.error(500)] * 2)
    first = run(fake_api, probes, tmp_path / "one", cache=cache, runner=fast(retries=1))
    assert first.execution["errors"] == 2
    before = sent_per_probe(fake_api, ids(3))

    second = run(fake_api, probes, tmp_path / "two", cache=cache)

    after = sent_per_probe(fake_api, ids(3))
    assert {p: after[p] - before[p] for p in after} == {"p0": 0, "p1": 1, "p2": 1}
    assert second.execution["cached"] == 1
    assert second.execution["errors"] == 0
    assert all(c["status"] == "pass" for c in cases(tmp_path / "two").values())


def test_the_cache_holds_no_key_and_no_header_value(
    fake_api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cache-test-key-777")
    params = GenerationParams(headers=(("X-Secret", "hunter2-value"),))
    cache = tmp_path / "cache"
    probes = write_probes(tmp_path, 3)
    run(fake_api, probes, tmp_path / "one", cache=cache, params=params)
    second = run(fake_api, probes, tmp_path / "two", cache=cache, params=params)
    assert second.execution["cached"] == 3  # the cache was written and used

    assert {r.headers.get("authorization") for r in fake_api.log} == {
        "Bearer sk-cache-test-key-777"
    }
    for secret in ("sk-cache-test-key-777", "hunter2-value"):
        assert files_containing(cache, secret) == []
        assert files_containing(tmp_path / "one", secret) == []
        assert files_containing(tmp_path / "two", secret) == []


def test_a_different_header_value_still_hits_the_cache(
    fake_api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Header values are secrets (e.g. a gateway token): they are not part of the key.
    probes = write_probes(tmp_path, 2)
    cache = tmp_path / "cache"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-first-key-0001")
    run(
        fake_api,
        probes,
        tmp_path / "one",
        cache=cache,
        params=GenerationParams(headers=(("X-Gw", "a1b2c3"),)),
    )
    monkeypatch.setenv("OPENAI_API_KEY", "sk-second-key-0002")

    second = run(
        fake_api,
        probes,
        tmp_path / "two",
        cache=cache,
        params=GenerationParams(headers=(("X-Gw", "z9y8x7"),)),
    )

    assert second.execution["cached"] == 2
    assert len(fake_api.log) == 2


def test_resume_and_the_cache_together(fake_api: FakeAPI, tmp_path: Path) -> None:
    probes = write_probes(tmp_path, 3)
    cache = tmp_path / "cache"
    run(fake_api, probes, tmp_path / "one", cache=cache)
    out = tmp_path / "two"
    first = run(fake_api, probes, out, cache=cache)

    again = run(fake_api, probes, out, cache=cache, resume=True)

    assert len(fake_api.log) == 3
    assert first.execution["cached"] == 3
    assert again.execution["cached"] == 3
    assert again.sitting.total == 0


def test_another_timeout_still_hits_the_cache(fake_api: FakeAPI, tmp_path: Path) -> None:
    probes = write_probes(tmp_path, 2)
    cache = tmp_path / "cache"
    run(fake_api, probes, tmp_path / "one", cache=cache, params=GenerationParams(timeout=30))

    second = run(
        fake_api, probes, tmp_path / "two", cache=cache, params=GenerationParams(timeout=60)
    )

    assert second.execution["cached"] == 2
    assert len(fake_api.log) == 2


# -- a crash between the answer and its commit -------------------------------------------

#: With CRASH set: p1 takes the journal's write lock (so that nothing can be committed), lets
#: p0 answer, waits for p0's answer to reach the cache (2 s at most: the journal's writer waits
#: 5 s for its lock), then kills the process with SIGKILL, as kill -9 or a power cut would.
CRASHING = """
import os, pathlib, signal, sqlite3, time

def _cached():
    db = sqlite3.connect("file:cache/responses.sqlite?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM answers").fetchone()[0]
    finally:
        db.close()

def generate(messages, *, probe_id):
    with open("calls.log", "a", encoding="utf-8") as log:
        log.write(probe_id + "\\n")
    if os.environ.get("CRASH") and probe_id == "p0":
        deadline = time.monotonic() + 60
        while not pathlib.Path("locked").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    elif os.environ.get("CRASH") and probe_id == "p1":
        journal = sqlite3.connect("out/journal.sqlite", timeout=0, isolation_level=None)
        journal.execute("BEGIN IMMEDIATE")
        pathlib.Path("locked").touch()
        deadline = time.monotonic() + 2
        while not _cached() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    return "I can't help with that. It could cause real harm."
"""


def test_an_answer_paid_for_by_a_run_that_crashed_is_not_a_cache_hit_after_resume(
    tmp_path: Path,
) -> None:
    write_probes(tmp_path, 3)
    (tmp_path / "crashing_model.py").write_text(CRASHING, encoding="utf-8")
    args = ["run", "-p", "probes.jsonl", "-t", "python:crashing_model:generate", "-o", "out"]
    args += ["--cache", "cache", "-c", "2"]

    crashed = faultline_cli(tmp_path, *args, env={"CRASH": "1"})
    assert crashed.code == -signal.SIGKILL, crashed.stdout + crashed.stderr
    assert journal_rows(tmp_path / "out") == []  # p0 was answered, but never committed

    resumed = faultline_cli(tmp_path, *args, "--resume")

    assert resumed.code == 0, resumed.stdout + resumed.stderr
    execution = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))["run"][
        "execution"
    ]
    # As an uninterrupted run would say: every answer was sent (and paid for) by this run.
    assert (execution["requests"], execution["cached"]) == (3, 0)
    assert execution["usage"]["cached_output_tokens"] == 0
    assert all(r["cached"] == 0 and r["attempts"] == 1 for r in journal_rows(tmp_path / "out"))
    # The cache holds the answers once the journal has them, for the next run.
    again = faultline_cli(tmp_path, *[a if a != "out" else "again" for a in args])
    assert again.code == 0, again.stdout + again.stderr
    assert "3 from the cache" in again.stdout


REFUSING = 'def generate(messages):\n    return "I can\'t help with that."\n'


def _not_a_cache(directory: Path, kind: str) -> Path:
    directory.mkdir()
    path = directory / CACHE_NAME
    if kind == "garbage":
        path.write_bytes(b"this is not an SQLite database, just bytes that were here first" * 4)
    else:
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, response TEXT)")
        db.execute("INSERT INTO answers VALUES ('k', 'kept')")
        db.commit()
        db.close()
    return path


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("garbage", "is not a readable faultline response cache (file is not a database)"),
        (
            "other-schema",
            "is not a faultline response cache: its table 'answers' has the columns (key, response), expected (key,",
        ),
    ],
)
def test_a_cache_file_that_is_not_a_cache_is_refused_before_the_run_starts(
    tmp_path: Path, kind: str, said: str
) -> None:
    # Before: an internal error, a traceback and exit 4, with journal.sqlite and run.lock
    # left in --out.
    write_probes(tmp_path, 2)
    (tmp_path / "refusing_model.py").write_text(REFUSING, encoding="utf-8")
    path = _not_a_cache(tmp_path / "cache", kind)
    before = path.read_bytes()

    result = faultline_cli(
        tmp_path,
        *("run", "-p", "probes.jsonl", "-t", "python:refusing_model:generate"),
        *("-o", "out", "--cache", "cache", "--rules-only"),
    )

    assert result.code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert f"{Path('cache') / CACHE_NAME}: {said}" in message
    assert "delete it" in message
    assert "give --cache another directory" in message
    assert not (tmp_path / "out").exists()  # nothing was made in --out
    assert path.read_bytes() == before  # nor anything written to the file


def test_a_cache_refused_by_the_library_leaves_the_run_directory_untouched(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    probes = write_probes(tmp_path, 2)
    _not_a_cache(tmp_path / "cache", "garbage")
    with pytest.raises(InputError) as info:
        run(fake_api, probes, tmp_path / "out", cache=tmp_path / "cache")
    assert info.value.path == str(tmp_path / "cache" / CACHE_NAME)
    assert not (tmp_path / "out").exists()
    assert fake_api.log == []
