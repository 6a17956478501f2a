"""Retries against a real HTTP server: what is retried, how long it waits, what becomes an error."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from faultline.errors import TargetError
from faultline.runner.journal import recorded_count
from faultline.targets import GenerationParams
from tests.runner.support import (
    cases,
    fast,
    files_containing,
    ids,
    journal_rows,
    report,
    run,
    sent,
    sent_per_probe,
    tag,
    write_probes,
)
from tests.targets.fakeapi import REFUSAL, FakeAPI, Fault


def test_a_429_is_retried_no_sooner_than_its_retry_after(fake_api: FakeAPI, tmp_path: Path) -> None:
    fake_api.plan(tag("p1"), [Fault.error(429, retry_after=0.3)])
    run(fake_api, write_probes(tmp_path, 3), tmp_path / "out")

    first, retry = fake_api.requests_for(tag("p1"))
    assert first.fault == "429"
    assert retry.fault == "ok"
    assert retry.t - first.t >= 0.3
    assert cases(tmp_path / "out")["p1#0"]["status"] == "pass"


def test_a_retry_after_pauses_the_other_workers_too(fake_api: FakeAPI, tmp_path: Path) -> None:
    fake_api.plan(tag("p0"), [Fault.error(429, retry_after=0.5)])
    run(fake_api, write_probes(tmp_path, 6), tmp_path / "out", runner=fast(concurrency=2))

    limited = next(r for r in fake_api.log if r.fault == "429")
    during = [r for r in fake_api.log if limited.t < r.t < limited.t + 0.5]
    # Only a request the other worker had already sent when the 429 arrived may land inside
    # the pause; everything after it waits.
    assert len(during) <= 1, [(round(r.t - limited.t, 3), r.prompt) for r in during]
    assert len(fake_api.log) == 7


def test_a_server_error_then_an_answer_is_answered_and_the_retry_counted(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    fake_api.plan(tag("p1"), [Fault.error(500)])
    probe_run = run(fake_api, write_probes(tmp_path, 3), tmp_path / "out")

    assert sent_per_probe(fake_api, ids(3)) == {"p0": 1, "p1": 2, "p2": 1}
    case = cases(tmp_path / "out")["p1#0"]
    assert case["status"] == "pass"
    assert "error" not in case
    assert probe_run.execution["retries"] == 1
    assert probe_run.execution["requests"] == 4
    assert probe_run.execution["errors"] == 0
    assert probe_run.sitting.retries == 1
    attempts = {r["probe_id"]: r["attempts"] for r in journal_rows(tmp_path / "out")}
    assert attempts == {"p0": 1, "p1": 2, "p2": 1}


@pytest.mark.parametrize(
    "fault",
    [
        Fault.malformed(),
        Fault.drop(),
        Fault.error(502),
        Fault.error(503),
        Fault.error(429),
        Fault.error(408),
    ],
    ids=["malformed-json", "dropped-connection", "502", "503", "429-without-retry-after", "408"],
)
def test_transient_failures_are_retried(fake_api: FakeAPI, tmp_path: Path, fault: Fault) -> None:
    fake_api.plan(tag("p1"), [fault])
    probe_run = run(fake_api, write_probes(tmp_path, 2), tmp_path / "out")

    assert [r.fault for r in fake_api.requests_for(tag("p1"))] == [
        str(fault.status) if fault.kind == "status" else fault.kind,
        "ok",
    ]
    assert cases(tmp_path / "out")["p1#0"]["status"] == "pass"
    assert probe_run.execution["errors"] == 0
    assert probe_run.execution["retries"] == 1


def test_a_probe_failing_more_often_than_retries_is_an_error_case(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    fake_api.plan(tag("p1"), [Fault.error(500)] * 10)
    out = tmp_path / "out"
    probe_run = run(fake_api, write_probes(tmp_path, 4), out, runner=fast(retries=2))

    assert sent(fake_api, "p1") == 3  # the first attempt and two retries, no more
    case = cases(out)["p1#0"]
    assert case["status"] == "error"
    assert case["passed"] is None
    assert case["error"]["kind"] == "server_error"
    assert case["error"]["status"] == 500
    assert case["error"]["attempts"] == 3
    metrics = report(out)["aggregate_metrics"]
    assert metrics["counts"]["errors"] == 1
    assert metrics["counts"]["scored"] == 3
    assert metrics["counts"]["passed"] + metrics["counts"]["failed"] == 3
    assert metrics["overall"]["coverage"] == pytest.approx(0.75)
    assert metrics["overall"]["coverage"] < 1
    assert probe_run.execution["errors"] == 1
    assert probe_run.execution["retries"] == 2
    assert probe_run.sitting.errors == 1


def test_an_answer_slower_than_the_timeout_is_retried_then_a_timeout_error(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    fake_api.plan(tag("p1"), [Fault.slow(1.0), Fault.slow(1.0)])
    out = tmp_path / "out"
    run(
        fake_api,
        write_probes(tmp_path, 2),
        out,
        runner=fast(retries=1),
        params=GenerationParams(timeout=0.2),
    )

    assert sent(fake_api, "p1") == 2
    case = cases(out)["p1#0"]
    assert case["status"] == "error"
    assert case["error"]["kind"] == "timeout"
    assert case["error"]["attempts"] == 2
    assert cases(out)["p0#0"]["status"] == "pass"


def test_a_timeout_then_an_answer_is_answered(fake_api: FakeAPI, tmp_path: Path) -> None:
    fake_api.plan(tag("p0"), [Fault.slow(1.0)])
    out = tmp_path / "out"
    probe_run = run(
        fake_api,
        write_probes(tmp_path, 1),
        out,
        runner=fast(retries=1),
        params=GenerationParams(timeout=0.2),
    )

    assert [r.fault for r in fake_api.requests_for(tag("p0"))] == ["slow", "ok"]
    assert cases(out)["p0#0"]["status"] == "pass"
    assert probe_run.execution["retries"] == 1


def test_a_400_is_not_retried_and_is_an_error_case(fake_api: FakeAPI, tmp_path: Path) -> None:
    fake_api.plan(tag("p1"), [Fault.error(400)])
    out = tmp_path / "out"
    probe_run = run(fake_api, write_probes(tmp_path, 3), out, runner=fast(retries=5))

    assert sent(fake_api, "p1") == 1
    case = cases(out)["p1#0"]
    assert case["status"] == "error"
    assert case["passed"] is None
    assert case["error"]["kind"] == "bad_request"
    assert case["error"]["status"] == 400
    assert case["error"]["attempts"] == 1
    assert probe_run.execution["retries"] == 0
    assert probe_run.execution["errors"] == 1


def test_an_answer_withheld_by_a_content_filter_is_not_retried_and_is_an_error_case(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    def reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
        filtered = tag("p1") in body["messages"][-1]["content"]
        message = {"role": "assistant", "content": None if filtered else REFUSAL}
        reason = "content_filter" if filtered else "stop"
        return {"model": "m", "choices": [{"message": message, "finish_reason": reason}]}

    fake_api.reply = reply
    run(fake_api, write_probes(tmp_path, 3), tmp_path / "out", runner=fast(retries=5))

    assert sent(fake_api, "p1") == 1
    case = cases(tmp_path / "out")["p1#0"]
    assert case["status"] == "error"
    assert case["passed"] is None
    assert case["error"]["kind"] == "content_filter"
    assert "content filter" in case["error"]["message"]
    assert cases(tmp_path / "out")["p0#0"]["status"] == "pass"


@pytest.mark.parametrize("status", [401, 403, 404, 302])
def test_a_rejected_key_unknown_model_or_redirect_stops_the_run_keeping_the_journal(
    fake_api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-rejected-key-0123")
    fault = (
        Fault.redirect(status, "https://elsewhere.example/v1")
        if status < 400
        else Fault.error(status)
    )
    fake_api.plan(tag("p2"), [fault])
    out = tmp_path / "out"

    with pytest.raises(TargetError) as raised:
        run(fake_api, write_probes(tmp_path, 5), out, runner=fast(concurrency=1, retries=3))

    assert raised.value.exit_code == 3
    assert str(status) in str(raised.value)
    assert "sk-test-rejected-key-0123" not in str(raised.value)
    # Not retried, and nothing after it was sent.
    assert sent_per_probe(fake_api, ids(5)) == {"p0": 1, "p1": 1, "p2": 1, "p3": 0, "p4": 0}
    # What was answered before stays recorded, for --resume; nothing was reported.
    assert recorded_count(out) == 2
    assert [(r["probe_id"], r["error"]) for r in journal_rows(out)] == [
        ("p0", None),
        ("p1", None),
    ]
    assert not (out / "report.json").exists()
    assert files_containing(out, "sk-test-rejected-key-0123") == []


def test_a_retry_after_beyond_the_longest_honoured_is_an_error_at_once(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    fake_api.plan(tag("p1"), [Fault.error(429, retry_after=30)])
    out = tmp_path / "out"
    began = time.monotonic()
    probe_run = run(
        fake_api,
        write_probes(tmp_path, 3),
        out,
        runner=fast(concurrency=1, retries=5, max_retry_after=1.0),
    )
    # Waiting out the 30 s Retry-After would take 30 s; not waiting takes far less.
    assert time.monotonic() - began < 15

    assert sent_per_probe(fake_api, ids(3)) == {"p0": 1, "p1": 1, "p2": 1}
    case = cases(out)["p1#0"]
    assert case["status"] == "error"
    assert case["error"]["kind"] == "rate_limited"
    assert case["error"]["status"] == 429
    assert case["error"]["attempts"] == 1
    assert case["error"]["message"] == (
        "HTTP 429: injected 429; the server asked to wait 30 s, more than the 1 s faultline waits"
    )
    assert cases(out)["p2#0"]["status"] == "pass"
    assert probe_run.execution["retries"] == 0
    # The next probe was not held back by the refused Retry-After either.
    (limited,) = fake_api.requests_for(tag("p1"))
    (after,) = fake_api.requests_for(tag("p2"))
    assert after.t - limited.t < 15


def test_a_negative_retry_after_is_ignored_and_normal_backoff_applies(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    negative = Fault("status", status=429, retry_after_raw="-5")
    fake_api.plan(tag("p1"), [negative, negative])
    run(
        fake_api,
        write_probes(tmp_path, 2),
        tmp_path / "out",
        runner=fast(concurrency=1, retries=2, backoff_base=0.4, backoff_max=1.0),
    )

    first, second, third = fake_api.requests_for(tag("p1"))
    assert (first.fault, second.fault, third.fault) == ("429", "429", "ok")
    # Backoff: 0.4 s then 0.8 s, each times a factor in [0.5, 1); not 0 s, back to back.
    assert second.t - first.t >= 0.2
    assert third.t - second.t >= 0.4
    assert cases(tmp_path / "out")["p1#0"]["status"] == "pass"


def test_a_retry_after_on_the_last_attempt_still_pauses_the_other_requests(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    fake_api.plan(tag("p0"), [Fault.error(429, retry_after=0.6)])
    run(
        fake_api, write_probes(tmp_path, 2), tmp_path / "out", runner=fast(concurrency=1, retries=0)
    )

    (limited,) = fake_api.requests_for(tag("p0"))
    (after,) = fake_api.requests_for(tag("p1"))
    assert after.t - limited.t >= 0.6
    assert cases(tmp_path / "out")["p0#0"]["error"]["kind"] == "rate_limited"
