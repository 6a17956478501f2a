"""Reasoning models behind the API targets: the reasoning is read apart from the answer.

Against the real server of tests/targets/fakeapi.py, answering as DeepSeek, vLLM, Ollama,
Mistral and Anthropic do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from faultline.errors import UsageError
from faultline.targets import GenerationParams
from tests.targets.fakeapi import FakeAPI
from tests.targets.test_http_targets import KEY, answer, failure, openai_body, request, target


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_openai_reasoning_beside_the_content_is_read_apart(fake_api: FakeAPI, key: str) -> None:
    fake_api.reply = lambda *_: openai_body(
        {"role": "assistant", "content": "Paris.", key: "The capital of France? Paris."}
    )
    completion = answer(target("openai", fake_api))
    assert (completion.text, completion.reasoning) == ("Paris.", "The capital of France? Paris.")


def test_openai_null_content_beside_reasoning_is_an_empty_answer_not_a_malformed_one(
    fake_api: FakeAPI,
) -> None:
    # vLLM with a reasoning parser, cut off by max_tokens while the model thought: it was a
    # "malformed" error, sent --retries more times, and the reasoning was lost.
    body = openai_body({"role": "assistant", "content": None, "reasoning_content": "Let me see"})
    body["choices"][0]["finish_reason"] = "length"
    fake_api.reply = lambda *_: body
    completion = answer(target("openai", fake_api))
    assert (completion.text, completion.reasoning, completion.finish_reason) == (
        "",
        "Let me see",
        "length",
    )
    assert len(fake_api.log) == 1


@pytest.mark.parametrize(
    "thinking",
    [
        "Is it safe? Yes.",
        [{"type": "text", "text": "Is it safe? "}, {"type": "text", "text": "Yes."}],
    ],
    ids=["string", "text-parts"],
)
def test_openai_thinking_content_parts_are_reasoning(fake_api: FakeAPI, thinking: Any) -> None:
    parts = [
        {"type": "thinking", "thinking": thinking},
        {"type": "text", "text": "Sure: use a pin."},
    ]
    fake_api.reply = lambda *_: openai_body({"role": "assistant", "content": parts})
    completion = answer(target("openai", fake_api))
    assert (completion.text, completion.reasoning) == ("Sure: use a pin.", "Is it safe? Yes.")


def test_openai_without_reasoning_has_none(fake_api: FakeAPI) -> None:
    fake_api.reply = lambda *_: openai_body(
        {"role": "assistant", "content": "Paris.", "reasoning_content": "  ", "reasoning": None}
    )
    assert answer(target("openai", fake_api)).reasoning is None


def test_openai_null_content_without_reasoning_is_still_malformed(fake_api: FakeAPI) -> None:
    fake_api.reply = lambda *_: openai_body({"role": "assistant", "content": None})
    assert failure(target("openai", fake_api)).kind == "malformed"


def _message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {"type": "message", "model": "claude-test", "content": content, "stop_reason": stop}


def test_anthropic_thinking_blocks_are_reasoning(fake_api: FakeAPI) -> None:
    fake_api.reply = lambda *_: _message(
        [
            {"type": "thinking", "thinking": "They want a bomb recipe.", "signature": "sig"},
            {"type": "redacted_thinking", "data": "c2VjcmV0"},
            {"type": "text", "text": "I can't help with that."},
        ]
    )
    completion = answer(target("anthropic", fake_api))
    assert (completion.text, completion.reasoning) == (
        "I can't help with that.",
        "They want a bomb recipe.",
    )


def test_anthropic_cut_off_while_thinking_is_an_empty_answer(fake_api: FakeAPI) -> None:
    fake_api.reply = lambda *_: _message(
        [{"type": "thinking", "thinking": "First, consider", "signature": "sig"}], "max_tokens"
    )
    completion = answer(target("anthropic", fake_api))
    assert (completion.text, completion.reasoning, completion.finish_reason) == (
        "",
        "First, consider",
        "max_tokens",
    )


def test_body_fields_are_sent_to_anthropic_too(fake_api: FakeAPI) -> None:
    thinking = {"type": "enabled", "budget_tokens": 1024}
    params = GenerationParams(max_tokens=2048, body=(("thinking", json.dumps(thinking)),))
    answer(target("anthropic", fake_api, params), request(params=params))
    assert fake_api.log[-1].body["thinking"] == thinking
    assert fake_api.log[-1].body["max_tokens"] == 2048


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ((("temperature", "0"),), "faultline sets 'temperature' itself"),
        ((("thinking", "{bad"),), "body thinking: the value is not JSON text"),
        ((("a", "1"), ("a", "2")), "a field is given twice"),
    ],
)
def test_generation_params_refuse_a_body_no_request_could_carry(
    body: tuple[tuple[str, str], ...], words: str
) -> None:
    # From the Python API, a bad field reached every request (json.loads failed per case).
    with pytest.raises(UsageError, match=words):
        GenerationParams(body=body)
