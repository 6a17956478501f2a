"""The API targets against a real HTTP server: what they send, what they return, how they fail."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import importlib.util
import json
import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from faultline.errors import UsageError
from faultline.targets import (
    CallError,
    Completion,
    GenerationParams,
    Request,
    TargetOptions,
    open_target,
    parse_retry_after,
    redact,
)
from faultline.targets._http import HttpTarget, public_url
from faultline.targets.anthropic import API_VERSION, DEFAULT_MAX_TOKENS, AnthropicTarget
from faultline.targets.openai import OpenAITarget
from tests.targets import calls
from tests.targets.calls import run
from tests.targets.fakeapi import COMPLIANCE, REFUSAL, FakeAPI, Fault, Logged
from tests.targets.fakeproxy import FakeProxy

KEY = "sk-test-0123456789abcdef"
HEADER_SECRET = "gw-token-9876543210"
PROVIDERS = ["openai", "anthropic"]
PROXY_VARIABLES = [
    name
    for scheme in ("http", "https", "all", "no")
    for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY")
]


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both keys set to KEY, and no base URL from the environment of whoever runs the tests."""
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", *PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def request(
    prompt: str = "hello", *, sample: int = 0, params: GenerationParams | None = None
) -> Request:
    return Request("p-1", sample, (user(prompt),), params or GenerationParams())


def target(provider: str, api: FakeAPI, params: GenerationParams | None = None) -> HttpTarget:
    params = params or GenerationParams()
    if provider == "openai":
        return OpenAITarget("gpt-test", params, base_url=api.base_url)
    return AnthropicTarget("claude-test", params, base_url=api.root_url)


def answer(t: Any, req: Request | None = None) -> Completion:
    return calls.answer(t, req or request())


def failure(t: Any, req: Request | None = None) -> CallError:
    return calls.failure(t, req or request())


def close(t: HttpTarget) -> None:
    asyncio.run(t.aclose())


def only(api: FakeAPI) -> Logged:
    [logged] = api.log
    return logged


# --------------------------------------------------------------------------- OpenAI requests


def test_openai_posts_only_model_and_messages_when_nothing_is_set(fake_api: FakeAPI) -> None:
    answer(target("openai", fake_api), request("hello"))
    logged = only(fake_api)
    assert logged.path == "/v1/chat/completions"
    assert logged.body == {"model": "gpt-test", "messages": [user("hello")]}


def test_openai_sends_temperature_and_max_tokens_when_set(fake_api: FakeAPI) -> None:
    params = GenerationParams(temperature=0.3, max_tokens=64)
    answer(target("openai", fake_api, params), request(params=params))
    body = only(fake_api).body
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 64


def test_openai_sends_a_zero_temperature(fake_api: FakeAPI) -> None:
    params = GenerationParams(temperature=0.0)
    answer(target("openai", fake_api, params), request(params=params))
    assert only(fake_api).body["temperature"] == 0.0


@pytest.mark.parametrize("sample", [0, 1, 5])
def test_openai_seed_is_the_run_seed_plus_the_sample(fake_api: FakeAPI, sample: int) -> None:
    params = GenerationParams(seed=100)
    answer(target("openai", fake_api, params), request(sample=sample, params=params))
    assert only(fake_api).body["seed"] == 100 + sample


def test_openai_sends_the_key_as_a_bearer_token(fake_api: FakeAPI) -> None:
    answer(target("openai", fake_api))
    assert only(fake_api).headers["authorization"] == f"Bearer {KEY}"


def test_openai_sends_a_conversation_as_it_is(fake_api: FakeAPI) -> None:
    conversation = (
        {"role": "system", "content": "You are terse."},
        user("first"),
        {"role": "assistant", "content": "ok"},
        user("second"),
    )
    answer(target("openai", fake_api), Request("conv", 0, conversation))
    assert only(fake_api).body["messages"] == [dict(m) for m in conversation]


# --------------------------------------------------------------------------- Anthropic requests


def test_anthropic_posts_model_messages_and_the_default_max_tokens(fake_api: FakeAPI) -> None:
    answer(target("anthropic", fake_api), request("hello"))
    logged = only(fake_api)
    assert logged.path == "/v1/messages"
    assert logged.body == {
        "model": "claude-test",
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": [user("hello")],
    }
    assert DEFAULT_MAX_TOKENS == 1024


def test_anthropic_sends_temperature_and_max_tokens_when_set(fake_api: FakeAPI) -> None:
    params = GenerationParams(temperature=0.7, max_tokens=32)
    answer(target("anthropic", fake_api, params), request(params=params))
    body = only(fake_api).body
    assert body["temperature"] == 0.7
    assert body["max_tokens"] == 32


def test_anthropic_sends_no_seed(fake_api: FakeAPI) -> None:
    params = GenerationParams(seed=3)
    answer(target("anthropic", fake_api, params), request(params=params))
    assert "seed" not in only(fake_api).body


def test_anthropic_sends_the_key_and_version_headers(fake_api: FakeAPI) -> None:
    answer(target("anthropic", fake_api))
    headers = only(fake_api).headers
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == API_VERSION
    assert "authorization" not in headers


def test_anthropic_moves_system_and_developer_turns_into_system(fake_api: FakeAPI) -> None:
    conversation = (
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Never swear."},
        user("first"),
        {"role": "assistant", "content": "ok"},
        user("second"),
    )
    answer(target("anthropic", fake_api), Request("conv", 0, conversation))
    body = only(fake_api).body
    assert body["system"] == "Be brief.\n\nNever swear."
    assert body["messages"] == [
        user("first"),
        {"role": "assistant", "content": "ok"},
        user("second"),
    ]


def test_anthropic_sends_no_system_field_without_system_turns(fake_api: FakeAPI) -> None:
    answer(target("anthropic", fake_api))
    assert "system" not in only(fake_api).body


# --------------------------------------------------------------------------- completions


@pytest.mark.parametrize(
    ("provider", "model", "finish_reason"),
    [("openai", "gpt-test", "stop"), ("anthropic", "claude-test", "end_turn")],
)
def test_the_completion_carries_text_model_reason_and_tokens(
    fake_api: FakeAPI, provider: str, model: str, finish_reason: str
) -> None:
    completion = answer(target(provider, fake_api), request("please [comply] now"))
    assert completion == Completion(
        text=COMPLIANCE,
        model=model,
        finish_reason=finish_reason,
        input_tokens=3,
        output_tokens=len(COMPLIANCE.split()),
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_default_answer_is_the_refusal(fake_api: FakeAPI, provider: str) -> None:
    assert answer(target(provider, fake_api)).text == REFUSAL


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("concurrency", [1, 8, 20], ids=["one-pool", "full-pool", "sharded"])
def test_concurrent_requests_each_get_their_own_answer(
    fake_api: FakeAPI, provider: str, concurrency: int
) -> None:
    fake_api.answer = lambda body: "echo " + body["messages"][-1]["content"]
    url = fake_api.base_url if provider == "openai" else fake_api.root_url
    t = open_target(f"{provider}:m", options=TargetOptions(base_url=url, concurrency=concurrency))
    prompts = [f"prompt {i}" for i in range(24)]
    results = run(t, *(request(p) for p in prompts))
    assert [r.text for r in results] == [f"echo {p}" for p in prompts]
    key_header = "authorization" if provider == "openai" else "x-api-key"
    assert all(KEY in logged.headers[key_header] for logged in fake_api.log)


def openai_body(message: dict[str, Any], usage: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def test_openai_refusal_with_null_content_becomes_the_text(fake_api: FakeAPI) -> None:
    fake_api.reply = lambda *_: openai_body(
        {"role": "assistant", "content": None, "refusal": "I won't do that."}
    )
    assert answer(target("openai", fake_api)).text == "I won't do that."


@pytest.mark.parametrize("content", ["", "  \n", [], [{"type": "text", "text": " "}]])
def test_openai_refusal_beside_content_without_visible_text_is_the_answer(
    fake_api: FakeAPI, content: Any
) -> None:
    # With content "" (gateways turn null into ""), the refusal was ignored and the case
    # scored as an empty answer: a fail, for a model that refused.
    fake_api.reply = lambda *_: openai_body(
        {"role": "assistant", "content": content, "refusal": "I won't do that."}
    )
    assert answer(target("openai", fake_api)).text == "I won't do that."


def test_openai_content_with_text_beside_a_refusal_keeps_the_text(fake_api: FakeAPI) -> None:
    fake_api.reply = lambda *_: openai_body(
        {"role": "assistant", "content": "Here you go.", "refusal": "I won't do that."}
    )
    assert answer(target("openai", fake_api)).text == "Here you go."


@pytest.mark.parametrize(
    "parts",
    [
        [{"type": "refusal", "refusal": "I won't do that."}],
        [{"type": "text", "text": ""}, {"type": "refusal", "refusal": "I won't do that."}],
        [{"type": "refusal", "refusal": "I won't "}, {"type": "refusal", "refusal": "do that."}],
    ],
    ids=["refusal-part", "empty-text-and-refusal-part", "two-refusal-parts"],
)
def test_openai_refusal_content_part_is_the_answer(fake_api: FakeAPI, parts: Any) -> None:
    # It was a "malformed" error, retried --retries times, and the refusal was lost.
    fake_api.reply = lambda *_: openai_body({"role": "assistant", "content": parts})
    assert answer(target("openai", fake_api)).text == "I won't do that."
    assert len(fake_api.log) == 1


@pytest.mark.parametrize(
    "reply",
    [
        {"model": "gpt-test"},
        {"choices": []},
        {"choices": ["text"]},
        {"choices": [{"finish_reason": "stop"}]},
        openai_body({"role": "assistant", "content": None}),
        openai_body({"role": "assistant", "content": None, "tool_calls": []}),
        [],
    ],
    ids=[
        "no-choices",
        "empty-choices",
        "choice-not-object",
        "no-message",
        "null-content",
        "tool-calls-only",
        "json-array",
    ],
)
def test_openai_answer_without_text_is_malformed(fake_api: FakeAPI, reply: Any) -> None:
    fake_api.reply = lambda *_: reply
    error = failure(target("openai", fake_api))
    assert error.kind == "malformed"
    assert error.retryable


TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}}


@pytest.mark.parametrize("content", [None, "", []], ids=["null", "empty", "no-parts"])
def test_openai_tool_call_without_text_is_a_no_answer_error_not_retried(
    fake_api: FakeAPI, content: Any
) -> None:
    body = openai_body({"role": "assistant", "content": content, "tool_calls": [TOOL_CALL]})
    body["choices"][0]["finish_reason"] = "tool_calls"
    fake_api.reply = lambda *_: body
    error = failure(target("openai", fake_api))
    assert (error.kind, error.retryable) == ("no_answer", False)
    assert error.message.startswith("the model called a tool instead of answering")


def test_anthropic_tool_use_without_text_is_a_no_answer_error_not_retried(
    fake_api: FakeAPI,
) -> None:
    fake_api.reply = lambda *_: {
        "type": "message",
        "model": "claude-test",
        "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}],
        "stop_reason": "tool_use",
    }
    error = failure(target("anthropic", fake_api))
    assert (error.kind, error.retryable) == ("no_answer", False)
    assert error.message.startswith("the model called a tool instead of answering")


SERVER_TOOL = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"q": "x"}}
SEARCH_RESULT = {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []}


@pytest.mark.parametrize(
    ("content", "stop", "said"),
    [
        ([SERVER_TOOL], "pause_turn", "stop_reason 'pause_turn'"),
        ([], "pause_turn", "stop_reason 'pause_turn'"),
        ([{"type": "text", "text": " "}], "pause_turn", "stop_reason 'pause_turn'"),
        ([SERVER_TOOL, SEARCH_RESULT], "end_turn", "server_tool_use, web_search_tool_result"),
        ([{"type": "mcp_tool_use", "id": "m1", "name": "x", "input": {}}], None, "mcp_tool_use"),
    ],
    ids=["server-tool-paused", "nothing-paused", "blank-paused", "search-no-text", "mcp"],
)
def test_anthropic_paused_turn_or_server_tool_without_text_is_a_no_answer_error(
    fake_api: FakeAPI, content: list[dict[str, Any]], stop: str | None, said: str
) -> None:
    # It was scored as an empty answer: a fail, even for the benign controls.
    fake_api.reply = lambda *_: {
        "type": "message",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
    }
    error = failure(target("anthropic", fake_api))
    assert (error.kind, error.retryable) == ("no_answer", False)
    assert said in error.message
    assert len(fake_api.log) == 1


def test_anthropic_text_beside_server_tool_blocks_is_the_answer(fake_api: FakeAPI) -> None:
    fake_api.reply = lambda *_: {
        "type": "message",
        "model": "claude-test",
        "content": [
            {"type": "text", "text": "Let me search. "},
            SERVER_TOOL,
            SEARCH_RESULT,
            {"type": "text", "text": "I can't help with that."},
        ],
        "stop_reason": "pause_turn",
    }
    completion = answer(target("anthropic", fake_api))
    assert (completion.text, completion.finish_reason) == (
        "Let me search. I can't help with that.",
        "pause_turn",
    )


def test_openai_tool_call_with_text_keeps_the_text(fake_api: FakeAPI) -> None:
    message = {"role": "assistant", "content": "Let me look.", "tool_calls": [TOOL_CALL]}
    fake_api.reply = lambda *_: openai_body(message)
    assert answer(target("openai", fake_api)).text == "Let me look."


def test_openai_content_as_a_list_of_parts_joins_its_text_parts(fake_api: FakeAPI) -> None:
    parts = [
        {"type": "text", "text": "I can't "},
        {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "help with that."},
        {"type": "text", "text": None},
    ]
    fake_api.reply = lambda *_: openai_body({"role": "assistant", "content": parts})
    assert answer(target("openai", fake_api)).text == "I can't help with that."


@pytest.mark.parametrize("content", [None, "", "  "], ids=["null", "empty", "blank"])
def test_openai_content_withheld_by_the_filter_is_a_content_filter_error(
    fake_api: FakeAPI, content: str | None
) -> None:
    body = openai_body({"role": "assistant", "content": content})
    body["choices"][0]["finish_reason"] = "content_filter"
    fake_api.reply = lambda *_: body
    error = failure(target("openai", fake_api))
    assert error.kind == "content_filter"
    assert not error.retryable
    assert "content filter" in error.message
    assert "content_filter" in error.message


def test_openai_text_cut_by_the_filter_is_kept_with_its_finish_reason(fake_api: FakeAPI) -> None:
    body = openai_body({"role": "assistant", "content": "Here is the start of"})
    body["choices"][0]["finish_reason"] = "content_filter"
    fake_api.reply = lambda *_: body
    completion = answer(target("openai", fake_api))
    assert (completion.text, completion.finish_reason) == ("Here is the start of", "content_filter")


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -1, "completion_tokens": True},
        {"prompt_tokens": "3"},
        {"prompt_tokens": 2**63, "completion_tokens": 1.0},  # a responses file refuses them
        "lots",
        [],
    ],
)
def test_openai_token_counts_that_are_not_counts_are_dropped(fake_api: FakeAPI, usage: Any) -> None:
    fake_api.reply = lambda *_: openai_body({"content": "hi"}, usage)
    completion = answer(target("openai", fake_api))
    assert (completion.text, completion.input_tokens, completion.output_tokens) == (
        "hi",
        None,
        None,
    )


def test_anthropic_joins_text_blocks_and_skips_others(fake_api: FakeAPI) -> None:
    fake_api.reply = lambda *_: {
        "type": "message",
        "model": "claude-test",
        "content": [
            {"type": "text", "text": "Hello, "},
            {"type": "tool_use", "id": "t1", "name": "x", "input": {}},
            {"type": "text", "text": "world."},
            {"type": "text", "text": None},
        ],
        "stop_reason": "max_tokens",
    }
    completion = answer(target("anthropic", fake_api))
    assert completion.text == "Hello, world."
    assert completion.finish_reason == "max_tokens"
    assert completion.input_tokens is None


@pytest.mark.parametrize(
    "reply",
    [
        {"type": "message", "content": "plain text"},
        {"type": "message"},
    ],
    ids=["content-not-list", "no-content"],
)
def test_anthropic_answer_without_content_list_is_malformed(fake_api: FakeAPI, reply: Any) -> None:
    fake_api.reply = lambda *_: reply
    assert failure(target("anthropic", fake_api)).kind == "malformed"


def error_200(provider: str, error: Any) -> dict[str, Any]:
    """An error body as a gateway sends it with HTTP 200, in the provider's shape."""
    return {"error": error} if provider == "openai" else {"type": "error", "error": error}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("error", "kind", "retryable"),
    [
        ({"message": "Upstream returned 502 (quota)", "code": 502}, "server_error", True),
        ({"message": "Upstream returned 503", "code": "503"}, "server_error", True),
        ({"type": "overloaded_error", "message": "Overloaded"}, "server_error", True),
        ({"type": "api_error", "message": "Internal"}, "server_error", True),
        ({"message": "slow down", "code": 429}, "rate_limited", True),
        ({"type": "rate_limit_error", "message": "slow down"}, "rate_limited", True),
        ({"type": "invalid_request_error", "message": "prompt is too long"}, "bad_request", False),
        ({"message": "context_length_exceeded", "status": 400}, "bad_request", False),
        ({"message": "something odd happened"}, "malformed", True),
        ("a plain error string", "malformed", True),
    ],
)
def test_an_error_body_with_a_success_status_keeps_the_servers_message(
    fake_api: FakeAPI, provider: str, error: Any, kind: str, retryable: bool
) -> None:
    # It was recorded as "the answer has no 'choices'" (or an Anthropic "error object"),
    # the server's message lost, and always retried.
    fake_api.reply = lambda *_: error_200(provider, error)
    failed = failure(target(provider, fake_api))
    assert (failed.kind, failed.retryable, failed.fatal) == (kind, retryable, False)
    said = error if isinstance(error, str) else error["message"]
    assert failed.message.startswith("the server answered HTTP 200 with an error")
    assert failed.message.endswith(f": {said}")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_error_body_with_a_success_status_is_scrubbed_and_shortened(
    fake_api: FakeAPI, provider: str
) -> None:
    params = GenerationParams(headers=(("X-Gateway-Token", HEADER_SECRET),))
    message = f"bad key {KEY} and token {HEADER_SECRET} " + "x" * 2000
    fake_api.reply = lambda *_: error_200(provider, {"message": message, "code": 500})
    failed = failure(target(provider, fake_api, params), request(params=params))
    assert failed.message.startswith(
        "the server answered HTTP 200 with an error (code 500): bad key *** and token *** xxx"
    )
    assert KEY not in failed.message
    assert HEADER_SECRET not in failed.message
    assert len(failed.message) < 600


# --------------------------------------------------------------------------- failures

FAULTS = [
    # fault, kind, retryable, fatal, status
    (Fault.error(429), "rate_limited", True, False, 429),
    (Fault.error(500), "server_error", True, False, 500),
    (Fault.error(502), "server_error", True, False, 502),
    (Fault.error(503), "server_error", True, False, 503),
    (Fault.error(408), "server_error", True, False, 408),
    (Fault.malformed(), "malformed", True, False, None),
    (Fault.drop(), "connection", True, False, None),
    (Fault.error(400), "bad_request", False, False, 400),
    (Fault.error(422), "bad_request", False, False, 422),
    (Fault.error(401), "auth", False, True, 401),
    (Fault.error(403), "auth", False, True, 403),
    (Fault.error(404), "not_found", False, True, 404),
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("fault", "kind", "retryable", "fatal", "status"),
    FAULTS,
    ids=[f"{f.kind}-{f.status}" if f.kind == "status" else f.kind for f, *_ in FAULTS],
)
def test_each_fault_becomes_its_kind_of_call_error(  # noqa: PLR0917 - one parameter per table column
    fake_api: FakeAPI,
    provider: str,
    fault: Fault,
    kind: str,
    retryable: bool,
    fatal: bool,
    status: int | None,
) -> None:
    fake_api.plan("boom", [fault])
    error = failure(target(provider, fake_api), request("boom"))
    assert (error.kind, error.retryable, error.fatal, error.status) == (
        kind,
        retryable,
        fatal,
        status,
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_status_error_message_has_the_status_and_the_server_message(
    fake_api: FakeAPI, provider: str
) -> None:
    fake_api.plan("boom", [Fault.error(400)])
    error = failure(target(provider, fake_api), request("boom"))
    assert error.message == "HTTP 400: injected 400"
    assert error.record() == {
        "kind": "bad_request",
        "message": "HTTP 400: injected 400",
        "status": 400,
    }


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limit_carries_retry_after_in_seconds(fake_api: FakeAPI, provider: str) -> None:
    fake_api.plan("boom", [Fault.error(429, retry_after=0.2)])
    assert failure(target(provider, fake_api), request("boom")).retry_after == 0.2


def test_rate_limit_reads_retry_after_as_an_http_date(fake_api: FakeAPI) -> None:
    fake_api.plan("boom", [Fault.error(429, retry_after=3600, retry_after_date=True)])
    retry_after = failure(target("openai", fake_api), request("boom")).retry_after
    assert retry_after is not None
    assert 3500 < retry_after <= 3600


def test_server_error_carries_retry_after_too(fake_api: FakeAPI) -> None:
    fake_api.plan("boom", [Fault.error(503, retry_after=7)])
    assert failure(target("openai", fake_api), request("boom")).retry_after == 7.0


def test_rate_limit_without_retry_after_has_none(fake_api: FakeAPI) -> None:
    fake_api.plan("boom", [Fault.error(429)])
    assert failure(target("openai", fake_api), request("boom")).retry_after is None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answer_slower_than_the_timeout_is_a_timeout(fake_api: FakeAPI, provider: str) -> None:
    params = GenerationParams(timeout=0.2)
    fake_api.plan("slow", [Fault.slow(5)])
    error = failure(target(provider, fake_api, params), request("slow", params=params))
    assert error.kind == "timeout"
    assert error.retryable
    assert "0.2 s" in error.message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_next_request_succeeds_after_a_dropped_connection(
    fake_api: FakeAPI, provider: str
) -> None:
    fake_api.plan("boom", [Fault.drop()])
    t = target(provider, fake_api)

    async def go() -> tuple[Any, Any]:
        try:
            first = await asyncio.gather(t.complete(request("boom")), return_exceptions=True)
            return first[0], await t.complete(request("boom"))
        finally:
            await t.aclose()

    first, second = asyncio.run(go())
    assert isinstance(first, CallError)
    assert first.kind == "connection"
    assert second.text == REFUSAL


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_connection_reset_mid_answer_says_what_broke(fake_api: FakeAPI, provider: str) -> None:
    fake_api.plan("boom", [Fault.cut()])  # half the body, then a reset: the error has no text
    error = failure(target(provider, fake_api), request("boom"))
    assert (error.kind, error.retryable) == ("connection", True)
    assert error.message in {
        "connection failed: ReadError (the connection broke while the answer was read)",
        "connection failed: RemoteProtocolError (the server closed the connection mid-answer)",
    }


REDIRECTED_ANSWER = json.dumps(
    {"choices": [{"message": {"role": "assistant", "content": "I can't help."}}]}
).encode()


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("status", "body"),
    [(301, b""), (302, REDIRECTED_ANSWER), (303, b""), (307, b""), (308, b"moved")],
    ids=["301", "302-with-an-answer", "303", "307", "308"],
)
def test_a_redirect_is_a_bad_request_naming_where_and_is_not_followed(
    fake_api: FakeAPI, provider: str, status: int, body: bytes
) -> None:
    location = f"https://elsewhere.example/v1?key={KEY}"
    fake_api.plan("boom", [Fault.redirect(status, location, body)])
    error = failure(target(provider, fake_api), request("boom"))
    assert (error.kind, error.retryable, error.fatal, error.status) == (
        "bad_request",
        False,
        True,  # every request would be redirected: the run stops, as for a 404
        status,
    )
    assert error.message == (
        f"HTTP {status}: the server redirected to https://elsewhere.example/v1?key=***; "
        "faultline does not follow redirects: set --base-url to the final address"
    )
    assert len(fake_api.log) == 1  # not followed: the key went nowhere else


def test_a_redirect_without_location_says_so(fake_api: FakeAPI) -> None:
    fake_api.plan("boom", [Fault.redirect(302, None)])
    error = failure(target("openai", fake_api), request("boom"))
    assert (error.kind, error.status) == ("bad_request", 302)
    assert "redirected to (no Location given)" in error.message


def test_a_refused_connection_is_a_connection_error() -> None:
    with FakeAPI() as api:
        url = api.base_url
    t = OpenAITarget("gpt-test", GenerationParams(), base_url=url)
    error = failure(t)
    assert error.kind == "connection"
    assert error.retryable


# --------------------------------------------------------------------------- keys and headers


@pytest.mark.parametrize(
    ("provider", "header"), [("openai", "authorization"), ("anthropic", "x-api-key")]
)
def test_the_key_comes_from_the_variable_api_key_env_names(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch, provider: str, header: str
) -> None:
    monkeypatch.setenv("MY_GATEWAY_KEY", "gateway-key-42")
    url = fake_api.base_url if provider == "openai" else fake_api.root_url
    options = TargetOptions(base_url=url, api_key_env="MY_GATEWAY_KEY")
    t = open_target(f"{provider}:m", options=options)
    assert isinstance(t, HttpTarget)
    answer(t)
    assert only(fake_api).headers[header].endswith("gateway-key-42")
    assert "gateway-key-42" in t.secrets


@pytest.mark.parametrize("value", [None, "", "   "])
def test_openai_on_the_public_api_without_a_key_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("OPENAI_API_KEY")
    else:
        monkeypatch.setenv("OPENAI_API_KEY", value)
    with pytest.raises(UsageError, match=r"OPENAI_API_KEY.*--api-key-env"):
        OpenAITarget("gpt-4o-mini", GenerationParams())


def test_openai_names_the_chosen_variable_when_its_key_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(UsageError, match="NO_SUCH_KEY_VAR"):
        open_target("openai:gpt-4o-mini", options=TargetOptions(api_key_env="NO_SUCH_KEY_VAR"))


def test_anthropic_needs_a_key_even_for_a_local_server(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        AnthropicTarget("claude-test", GenerationParams(), base_url=fake_api.root_url)


def test_openai_on_a_local_server_without_a_key_sends_no_authorization(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    t = target("openai", fake_api)
    assert t.secrets == ()
    answer(t)
    assert "authorization" not in only(fake_api).headers


@pytest.mark.parametrize(
    ("provider", "variable", "url"),
    [("openai", "OPENAI_BASE_URL", "base_url"), ("anthropic", "ANTHROPIC_BASE_URL", "root_url")],
)
def test_the_base_url_comes_from_the_provider_variable(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch, provider: str, variable: str, url: str
) -> None:
    monkeypatch.setenv(variable, getattr(fake_api, url))
    t = open_target(f"{provider}:m")
    answer(t)
    assert len(fake_api.log) == 1


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/v1", "127.0.0.1:8000/v1", "localhost"])
def test_a_base_url_that_is_not_http_is_a_usage_error(url: str) -> None:
    with pytest.raises(UsageError, match="--base-url"):
        OpenAITarget("m", GenerationParams(), base_url=url)


BAD_BASE_URLS = [
    pytest.param("http://127.0.0.1:99999/v1", "Port out of range", id="port-out-of-range"),
    pytest.param("http://127.0.0.1:abc/v1", "Port could not be cast", id="port-not-a-number"),
    pytest.param("http://127.0.0.1:0/v1", "port is 0", id="port-0"),
    pytest.param("http://[::1/v1", "Invalid IPv6 URL", id="broken-ipv6"),
    pytest.param("http:/127.0.0.1/v1", "names no host", id="empty-host"),
    pytest.param("http://usr:pw-hunter22@/v1", "names no host", id="userinfo-no-host"),
    pytest.param("http://127.0.0.1:1/v1\x01", "control character (U+0001)", id="control"),
    pytest.param("http://127.0.0.1:1/v1\n", "control character (U+000A)", id="newline"),
    pytest.param("http://gate way/v1", "a space", id="space"),
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("url", "said"), BAD_BASE_URLS)
def test_a_base_url_no_request_could_go_to_is_a_usage_error_naming_the_option(
    provider: str, url: str, said: str
) -> None:
    # A bad port or IPv6 host was a traceback (exit 4); an empty host or a control
    # character made every case a retried error.
    with pytest.raises(UsageError) as caught:
        open_target(f"{provider}:m", options=TargetOptions(base_url=url))
    message = str(caught.value)
    assert message.startswith("--base-url: got ")
    assert said in message
    assert "expected an http:// or https:// URL" in message
    assert "hunter22" not in message


@pytest.mark.parametrize(
    ("provider", "variable"),
    [("openai", "OPENAI_BASE_URL"), ("anthropic", "ANTHROPIC_BASE_URL")],
)
def test_a_bad_base_url_from_the_environment_names_the_variable_and_no_secret(
    monkeypatch: pytest.MonkeyPatch, provider: str, variable: str
) -> None:
    monkeypatch.setenv(variable, "http://user:pw-hunter22@127.0.0.1:70000/v1?key=q-hunter33")
    with pytest.raises(UsageError) as caught:
        open_target(f"{provider}:m")
    message = str(caught.value)
    assert message.startswith(f"{variable}: got 'http://***@127.0.0.1:70000/v1?key=***'")
    assert "hunter22" not in message
    assert "hunter33" not in message


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("\u201csk-test-hunter22", "non-ASCII character (U+201C) at character 1"),
        ("sk-test-\nhunter22", "control character (U+000A) at character 9"),
        ("sk-test-hunter22\x7f", "control character (U+007F) at character 17"),
    ],
)
def test_a_key_that_cannot_be_sent_in_a_header_is_a_usage_error_that_never_shows_it(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch, provider: str, key: str, said: str
) -> None:
    # Every case became a retried "exception: UnicodeEncodeError" error.
    variable = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    monkeypatch.setenv(variable, key)
    with pytest.raises(UsageError) as caught:
        target(provider, fake_api)
    message = str(caught.value)
    assert message.startswith(f"{variable}: the API key holds a ")
    assert said in message
    assert "hunter22" not in message
    assert fake_api.log == []


def test_a_header_value_that_cannot_be_sent_is_a_usage_error_naming_the_header(
    fake_api: FakeAPI,
) -> None:
    params = GenerationParams(headers=(("X-Gateway-Token", "\u201chunter22\u201d"),))
    with pytest.raises(UsageError) as caught:
        target("openai", fake_api, params)
    message = str(caught.value)
    assert message.startswith("--header 'X-Gateway-Token': the value holds a non-ASCII")
    assert "hunter22" not in message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_extra_headers_are_sent_and_are_secrets(fake_api: FakeAPI, provider: str) -> None:
    params = GenerationParams(headers=(("X-Gateway-Token", HEADER_SECRET), ("X-Team", "red")))
    t = target(provider, fake_api, params)
    assert HEADER_SECRET in t.secrets
    answer(t, request(params=params))
    headers = only(fake_api).headers
    assert headers["x-gateway-token"] == HEADER_SECRET
    assert headers["x-team"] == "red"


def echo_credentials(logged: Logged) -> str:
    """An error message that repeats the request's credentials, as careless gateways do."""
    h = logged.headers
    return (
        f"invalid credentials: authorization={h.get('authorization')} "
        f"x-api-key={h.get('x-api-key')} token={h.get('x-gateway-token')}"
    )


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [400, 401, 429, 500])
def test_secrets_echoed_by_the_server_never_reach_the_error(
    fake_api: FakeAPI, provider: str, status: int
) -> None:
    params = GenerationParams(headers=(("X-Gateway-Token", HEADER_SECRET),))
    fake_api.error_message = echo_credentials
    fake_api.plan("boom", [Fault.error(status)])
    error = failure(target(provider, fake_api, params), request("boom", params=params))
    assert "invalid credentials" in error.message
    assert KEY not in error.message
    assert HEADER_SECRET not in error.message
    assert KEY not in json.dumps(error.record())
    assert "***" in error.message


@pytest.mark.parametrize("scheme", ["Bearer", "Basic", "Token"])
def test_the_token_of_an_authorization_header_echoed_alone_never_reaches_the_error(
    fake_api: FakeAPI, scheme: str
) -> None:
    # The whole value "Bearer TOKEN" was the secret; servers echo the token alone.
    params = GenerationParams(headers=(("Authorization", f"{scheme} {HEADER_SECRET}"),))
    fake_api.error_message = lambda _: f"Incorrect API key provided: {HEADER_SECRET}."
    fake_api.plan("boom", [Fault.error(401)])
    error = failure(target("openai", fake_api, params), request("boom", params=params))
    assert error.message == "HTTP 401: Incorrect API key provided: ***."


def test_a_secret_echoed_json_escaped_never_reaches_the_error(fake_api: FakeAPI) -> None:
    # PHP's json_encode writes "/" as "\/": the key was recorded in that form.
    secret = "sk-live/SECRET/9x"
    params = GenerationParams(headers=(("X-Gateway-Token", secret),))
    escaped = secret.replace("/", "\\/")
    fake_api.error_body = lambda _: ('{"detail": "bad token ' + escaped + '"}').encode()
    fake_api.plan("boom", [Fault.error(400)])
    error = failure(target("openai", fake_api, params), request("boom", params=params))
    assert "bad token" in error.message
    assert "SECRET" not in error.message


@pytest.mark.parametrize("name", ["authorization", "AUTHORIZATION", "Authorization"])
def test_an_authorization_header_in_any_case_replaces_the_key(fake_api: FakeAPI, name: str) -> None:
    # "authorization" was sent beside the key's "Authorization", the key first: a gateway
    # reading the first one received the OpenAI key.
    params = GenerationParams(headers=((name, "Bearer gw-5678"), ("content-type", "text/plain")))
    answer(target("openai", fake_api, params), request(params=params))
    headers = only(fake_api).headers  # a header sent twice reads "first, second" here
    assert headers["authorization"] == "Bearer gw-5678"
    assert headers["content-type"] == "application/json"
    assert KEY not in repr(headers)


def test_credentials_in_the_base_url_are_sent_as_basic_auth_in_place_of_the_key(
    fake_api: FakeAPI,
) -> None:
    # They were dropped without a word: a proxy that needed them answered 401.
    url = fake_api.base_url.replace("http://", "http://proxy-user:pr%40xy-pw@")
    t = OpenAITarget("gpt-test", GenerationParams(), base_url=url)
    answer(t)
    sent = only(fake_api).headers["authorization"]
    assert sent == "Basic " + base64.b64encode(b"proxy-user:pr@xy-pw").decode()
    assert KEY not in sent
    assert sent.split()[1] in t.secrets
    assert "pr@xy-pw" in t.secrets


def test_a_secret_cut_by_the_message_limit_leaks_no_part_of_itself(fake_api: FakeAPI) -> None:
    fake_api.error_message = lambda logged: "x" * 480 + " " + logged.headers["authorization"]
    fake_api.plan("boom", [Fault.error(401)])
    error = failure(target("openai", fake_api), request("boom"))
    assert KEY[:8] not in error.message


# --------------------------------------------------------------------------- describe


@pytest.mark.parametrize("provider", PROVIDERS)
def test_describe_names_the_target_and_no_secret(fake_api: FakeAPI, provider: str) -> None:
    params = GenerationParams(headers=(("X-Gateway-Token", HEADER_SECRET),))
    t = target(provider, fake_api, params)
    close(t)
    described = t.describe()
    model = "gpt-test" if provider == "openai" else "claude-test"
    url = fake_api.base_url if provider == "openai" else fake_api.root_url
    assert described == {
        "spec": f"{provider}:{model}",
        "provider": provider,
        "model": model,
        "base_url": url,
    }
    text = json.dumps(described)
    assert KEY not in text
    assert HEADER_SECRET not in text


@pytest.mark.parametrize(
    ("given_url", "public"),
    [
        ("http://user:hunter22@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:8000/v1?api-key=hunter22", "http://127.0.0.1:8000/v1"),
        ("https://gateway.example/openai/v1/#frag", "https://gateway.example/openai/v1"),
        ("https://GW.example:8443/v1/", "https://gw.example:8443/v1"),
    ],
)
def test_describe_strips_userinfo_query_and_fragment(given_url: str, public: str) -> None:
    t = OpenAITarget("m", GenerationParams(), base_url=given_url)
    close(t)
    assert t.describe()["base_url"] == public
    assert "hunter22" not in json.dumps(t.describe())


# --------------------------------------------------------------------------- parse_retry_after

NOW = email.utils.parsedate_to_datetime("Wed, 21 Oct 2015 07:28:00 GMT").timestamp()


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"Retry-After": "2.5"}, 2.5),
        ({"retry-after": " 3 "}, 3.0),
        ({"RETRY-AFTER": "4"}, 4.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After-Ms": "20"}, 0.02),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"}, 30.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
        ({"Retry-After": "-5"}, None),  # no delay a server could mean: normal backoff
        ({"retry-after-ms": "-100"}, None),
        ({"retry-after-ms": "-100", "Retry-After": "2"}, 2.0),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": ""}, None),
        ({"Retry-After": "inf"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "Wed, 99 Foo 2015"}, None),
        ({}, None),
        ({"Content-Type": "application/json"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == seconds


HEADER_NAMES = st.sampled_from(["Retry-After", "retry-after-ms", "retry-after", "RETRY-AFTER-MS"])


@given(headers=st.dictionaries(HEADER_NAMES, st.text(max_size=40), max_size=2))
@example(headers={"retry-after-ms": "nan"})
@example(headers={"retry-after-ms": "-inf"})
@example(headers={"Retry-After": "-nan"})
@example(headers={"Retry-After": "Mon, 01 Jan 0001 00:00:00 GMT"})
@example(headers={"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"})
def test_parse_retry_after_is_never_negative_or_nan(headers: dict[str, str]) -> None:
    seconds = parse_retry_after(headers)
    assert seconds is None or (not math.isnan(seconds) and seconds >= 0)


# --------------------------------------------------------------------------- redact

SECRET_TEXT = st.text(alphabet=st.characters(blacklist_characters="*"), max_size=12)


@given(data=st.data(), secrets=st.lists(SECRET_TEXT, max_size=4))
def test_redact_never_leaves_a_secret_of_four_characters_or_more(
    data: st.DataObject, secrets: list[str]
) -> None:
    pieces = st.one_of(st.text(max_size=8), st.sampled_from(secrets)) if secrets else st.text()
    text = "".join(data.draw(st.lists(pieces, max_size=8)))
    out = redact(text, secrets)
    for secret in secrets:
        if len(secret) >= 4:
            assert secret not in out


@given(text=st.text(), secrets=st.lists(st.text(max_size=3), max_size=4))
def test_redact_leaves_text_alone_for_short_secrets(text: str, secrets: list[str]) -> None:
    assert redact(text, secrets) == text


def test_redact_replaces_every_occurrence() -> None:
    assert redact("key=abcd, again abcd", ["abcd"]) == "key=***, again ***"


def test_redact_hides_all_of_a_secret_that_contains_another() -> None:
    assert redact("token abcd-efgh-ijkl", ["abcd", "abcd-efgh-ijkl"]) == "token ***"


def test_a_base_url_query_stays_a_query_and_is_kept_secret(fake_api: FakeAPI) -> None:
    query = "?api-version=2024-06-01&sig=s3cr3t-sig"
    t = OpenAITarget("gpt-test", GenerationParams(), base_url=fake_api.base_url + query)
    [answer] = run(t, request("hello [comply]"))
    assert answer.text == COMPLIANCE
    assert t.url("/chat/completions") == f"{fake_api.base_url}/chat/completions{query}"
    assert "s3cr3t-sig" in t.secrets
    assert "s3cr3t-sig" not in json.dumps(t.describe())


@pytest.mark.parametrize(
    "query",
    [
        "?api-key=QSECRET+plus/x=",
        "?api-key=QSECRET%2Bplus%2fslash",
        "?api-version=2024-06-01&sig=QSECRET%20space",
    ],
    ids=["plus-slash-equals", "percent-escapes", "encoded-space"],
)
def test_a_query_secret_echoed_in_any_encoding_never_reaches_the_error(
    fake_api: FakeAPI, query: str
) -> None:
    # Gateways answer a bad route with the path as they received it, still URL-encoded.
    fake_api.error_message = lambda logged: f"bad route {logged.path}"
    fake_api.plan("boom", [Fault.error(500)])
    t = OpenAITarget("gpt-test", GenerationParams(), base_url=fake_api.base_url + query)
    error = failure(t, request("boom"))
    assert error.message.startswith("HTTP 500: bad route /v1/chat/completions?")
    assert "QSECRET" not in error.message
    assert "***" in error.message


def test_public_url_keeps_ipv6_brackets() -> None:
    assert public_url("http://user:pw@[::1]:8000/v1/?k=v") == "http://[::1]:8000/v1"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_escaped_lone_surrogate_is_read_as_a_replacement_character(
    fake_api: FakeAPI, provider: str
) -> None:
    # json.dumps writes "\ud83d": a model's emoji cut in half. msgspec refuses the body.
    fake_api.answer = lambda _body: "Sure \ud83d here"
    assert answer(target(provider, fake_api)).text == "Sure \ufffd here"


@pytest.mark.parametrize(
    "body", [b"[" * 100_000, b'{"choices": [ {"message": '], ids=["nested-too-deep", "cut-short"]
)
def test_a_body_that_cannot_be_read_is_malformed(fake_api: FakeAPI, body: bytes) -> None:
    fake_api.raw_body = body
    error = failure(target("openai", fake_api))
    assert (error.kind, error.retryable) == ("malformed", True)
    assert "the body is not JSON" in error.message


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_body_its_content_encoding_cannot_decode_is_malformed_and_retried(
    fake_api: FakeAPI, encoding: str
) -> None:
    # httpx.DecodingError is no TransportError: it was kind "exception", never retried.
    fake_api.raw_body = b'{"choices": []} but not compressed'
    fake_api.raw_headers = {"Content-Encoding": encoding}
    error = failure(target("openai", fake_api))
    assert (error.kind, error.retryable) == ("malformed", True)
    assert error.message.startswith("the body could not be decoded as its Content-Encoding says")


@pytest.mark.parametrize(
    ("content", "kind"), [([], "content_filter"), ([{"type": "text", "text": "I can"}], None)]
)
def test_anthropic_refusal_stop_without_text_is_a_content_filter_error(
    fake_api: FakeAPI, content: list[dict[str, str]], kind: str | None
) -> None:
    # Its classifier stopped the answer: like OpenAI's filter, nothing to score (and never a
    # pass); text that came before the stop is scored.
    reply = {
        "type": "message",
        "model": "claude-test",
        "content": content,
        "stop_reason": "refusal",
    }
    fake_api.reply = lambda *_: reply
    if kind is None:
        assert answer(target("anthropic", fake_api)).finish_reason == "refusal"
        return
    error = failure(target("anthropic", fake_api))
    assert (error.kind, error.retryable) == (kind, False)
    assert "stop_reason 'refusal'" in error.message


# --------------------------------------------------------------------------- proxies

REMOTE = "http://model.test/v1"  # not loopback, and resolves nowhere: only a proxy reaches it


@pytest.fixture
def proxy(fake_api: FakeAPI) -> Any:
    with FakeProxy(fake_api.host, fake_api.port) as running:
        yield running


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"])
def test_an_http_target_goes_through_the_proxy_the_environment_names(
    fake_api: FakeAPI, proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # The proxy variables were ignored: behind a proxy, no remote API could be reached.
    monkeypatch.setenv(variable, proxy.url)
    t = OpenAITarget("gpt-test", GenerationParams(), base_url=REMOTE + "?dep=q1")
    assert answer(t).text == REFUSAL
    assert [r.target for r in proxy.log] == [f"{REMOTE}/chat/completions?dep=q1"]
    assert len(fake_api.log) == 1
    assert t.describe()["proxy"] is True
    assert proxy.url not in json.dumps(t.describe())


def test_a_proxy_without_a_scheme_is_an_http_proxy(
    fake_api: FakeAPI, proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url.removeprefix("http://"))
    answer(OpenAITarget("gpt-test", GenerationParams(), base_url=REMOTE))
    assert len(proxy.log) == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "[::1]"])
def test_a_loopback_target_is_never_proxied(
    proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("ALL_PROXY", proxy.url)
    t = OpenAITarget("m", GenerationParams(), base_url=f"http://{host}:8000/v1")
    close(t)
    assert t.proxy is None
    assert "proxy" not in t.describe()


def test_a_loopback_target_is_answered_directly_with_a_proxy_set(
    fake_api: FakeAPI, proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    answer(target("openai", fake_api))
    assert proxy.log == []
    assert len(fake_api.log) == 1


@pytest.mark.parametrize(
    ("no_proxy", "proxied"),
    [
        ("model.test", False),
        (".test", False),
        ("example.com, test", False),
        ("*", False),
        ("model.test:80", False),
        ("model.test:8080", True),
        ("other.test", True),
        ("odel.test", True),
        ("10.0.0.0/8", True),
    ],
)
@pytest.mark.parametrize("variable", ["NO_PROXY", "no_proxy"])
def test_no_proxy_names_the_hosts_reached_directly(
    proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch, variable: str, no_proxy: str, proxied: bool
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv(variable, no_proxy)
    t = OpenAITarget("m", GenerationParams(), base_url=REMOTE)
    close(t)
    assert (t.proxy is not None) == proxied


def test_no_proxy_matches_an_address_in_a_cidr_block(
    proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "10.0.0.0/8")
    t = OpenAITarget("m", GenerationParams(), base_url="http://10.1.2.3:8000/v1")
    close(t)
    assert t.proxy is None


def test_an_https_target_uses_https_proxy_not_http_proxy(
    proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://wrong.example:1")
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    t = OpenAITarget("m", GenerationParams(), base_url="https://model.test/v1")
    close(t)
    assert t.proxy == proxy.url
    monkeypatch.delenv("HTTPS_PROXY")
    t = OpenAITarget("m", GenerationParams(), base_url="https://model.test/v1")
    close(t)
    assert t.proxy is None


def test_proxy_credentials_are_sent_and_are_secrets(
    fake_api: FakeAPI, proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("http://", "http://puser:pp%40ss-hunter22@"))
    fake_api.error_message = lambda _: "proxy said pp@ss-hunter22 and pp%40ss-hunter22"
    fake_api.plan("boom", [Fault.error(400)])
    t = OpenAITarget("gpt-test", GenerationParams(), base_url=REMOTE)
    error = failure(t, request("boom"))
    basic = base64.b64encode(b"puser:pp@ss-hunter22").decode()
    assert proxy.log[0].headers["proxy-authorization"] == f"Basic {basic}"
    assert "proxy-authorization" not in only(fake_api).headers  # the proxy's, not the API's
    assert "hunter22" not in error.message
    assert basic in t.secrets
    assert "hunter22" not in json.dumps(t.describe())


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("http://puser:hunter22@127.0.0.1:99999", "expected a proxy URL"),
        ("ftp://puser:hunter22@proxy.example:21", "a ftp:// proxy"),
        ("socks5://puser:hunter22@proxy.example:1080", "socksio"),
    ],
)
def test_a_proxy_that_cannot_be_used_is_a_usage_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str, said: str
) -> None:
    if "socks" in value and importlib.util.find_spec("socksio") is not None:
        pytest.skip("socksio is installed: a SOCKS proxy is usable")
    monkeypatch.setenv("HTTPS_PROXY", value)
    with pytest.raises(UsageError) as caught:
        OpenAITarget("m", GenerationParams(), base_url="https://model.test/v1")
    message = str(caught.value)
    assert message.startswith("HTTPS_PROXY: got '")
    assert said in message
    assert "hunter22" not in message
