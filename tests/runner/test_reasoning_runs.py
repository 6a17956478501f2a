"""A run against a reasoning model: its reasoning is recorded, reused, exported and shown.

The fake server answers as vLLM with a reasoning parser does: the reasoning in
``reasoning_content`` beside the answer.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from faultline.runner.cache import CACHE_NAME
from faultline.runner.journal import JOURNAL_NAME
from tests.runner.support import cases, fast, journal_rows, run, tag, write_probes
from tests.targets.fakeapi import FakeAPI, Fault

THOUGHT = "They ask for a pipe bomb. Step 1 would be the pipe. No: I must refuse."
ANSWER = "I can't help with that."


def _reasoning_model(api: FakeAPI) -> None:
    def reply(_: str, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": f"\n\n{ANSWER}",
                        "reasoning_content": THOUGHT,
                    },
                    "finish_reason": "stop",
                }
            ],
        }

    api.reply = reply


def test_reasoning_is_recorded_exported_and_shown_apart(fake_api: FakeAPI, tmp_path: Path) -> None:
    _reasoning_model(fake_api)
    out = tmp_path / "out"
    run(fake_api, write_probes(tmp_path, 2), out)

    assert [r["reasoning"] for r in journal_rows(out)] == [THOUGHT, THOUGHT]
    lines = [json.loads(x) for x in (out / "responses.jsonl").read_text().splitlines()]
    assert [(x["response"], x["reasoning"]) for x in lines] == [(f"\n\n{ANSWER}", THOUGHT)] * 2
    for case in cases(out).values():
        assert (case["status"], case["response"], case["reasoning"]) == (
            "pass",
            f"\n\n{ANSWER}",
            THOUGHT,
        )
    assert THOUGHT in (out / "report.html").read_text(encoding="utf-8")


def test_the_cache_gives_the_reasoning_back(fake_api: FakeAPI, tmp_path: Path) -> None:
    _reasoning_model(fake_api)
    probes = write_probes(tmp_path, 2)
    run(fake_api, probes, tmp_path / "one", cache=tmp_path / "cache")
    sent = len(fake_api.log)

    run(fake_api, probes, tmp_path / "two", cache=tmp_path / "cache")

    assert len(fake_api.log) == sent
    assert [c["reasoning"] for c in cases(tmp_path / "two").values()] == [THOUGHT, THOUGHT]


def test_a_cache_from_before_reasoning_still_serves_its_answers(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    probes = write_probes(tmp_path, 2)
    run(fake_api, probes, tmp_path / "one", cache=tmp_path / "cache")
    db = sqlite3.connect(tmp_path / "cache" / CACHE_NAME)
    with db:
        db.execute("DROP TABLE reasoning")  # as written by faultline before reasoning
    columns = [row[1] for row in db.execute("PRAGMA table_info(answers)")]
    db.close()
    sent = len(fake_api.log)

    again = run(fake_api, probes, tmp_path / "two", cache=tmp_path / "cache")

    assert len(fake_api.log) == sent
    assert again.execution["cached"] == 2
    # The answers table keeps the columns an earlier faultline checks for, so both can share it.
    assert columns == ["key", "response", "model", "finish_reason", "input_tokens", "output_tokens"]


def test_a_journal_from_before_reasoning_is_resumed(fake_api: FakeAPI, tmp_path: Path) -> None:
    probes = write_probes(tmp_path, 3)
    out = tmp_path / "out"
    fake_api.plan(tag("p1"), [Fault.error(400)])
    run(fake_api, probes, out, runner=fast(retries=0))
    db = sqlite3.connect(out / JOURNAL_NAME)
    with db:
        db.execute("ALTER TABLE cases DROP COLUMN reasoning")  # as an earlier faultline wrote it
    db.close()
    _reasoning_model(fake_api)

    run(fake_api, probes, out, resume=True, retry_errors=True)

    rows = {r["probe_id"]: r for r in journal_rows(out)}
    assert (rows["p0"]["reasoning"], rows["p1"]["reasoning"]) == (None, THOUGHT)
    found = cases(out)
    assert "reasoning" not in found["p0#0"]
    assert found["p1#0"]["reasoning"] == THOUGHT
