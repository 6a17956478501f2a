"""``openai:MODEL``: any server that speaks the OpenAI chat-completions API.

One adapter serves the hosted API, vLLM, Ollama, llama.cpp's server, LM Studio and the
gateways in front of them: ``POST {base_url}/chat/completions``.
"""

from __future__ import annotations

from typing import Any

from faultline.targets._http import HttpTarget, api_completion
from faultline.targets.base import CallError, Completion, Request

__all__ = ["DEFAULT_BASE_URL", "OpenAITarget"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAITarget(HttpTarget):
    """An OpenAI-compatible chat-completions server.

    Args:
        model: The model name the server knows.
        params: How requests are sent.
        base_url: The API base, e.g. ``http://localhost:8000/v1`` (default: ``OPENAI_BASE_URL``,
            else the public API).
        api_key_env: The environment variable holding the key. A key is required for the
            public API; local servers get none when the variable is unset.
        concurrency: The most requests in flight.
    """

    provider = "openai"
    default_base_url = DEFAULT_BASE_URL
    base_url_env = "OPENAI_BASE_URL"
    key_env = "OPENAI_API_KEY"

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """A bearer token, when there is a key (local servers need none)."""
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def complete(self, request: Request) -> Completion:
        """Ask for one chat completion."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
        }
        p = request.params
        if p.temperature is not None:
            body["temperature"] = p.temperature
        if p.max_tokens is not None:
            body["max_tokens"] = p.max_tokens
        if request.seed is not None:
            body["seed"] = request.seed
        body.update(p.body_fields())
        data = await self.post_json("/chat/completions", body)
        if "choices" not in data and data.get("error") is not None:
            raise self.embedded_failure(data["error"])  # an error with a success status
        return _completion(data)


def _completion(data: dict[str, Any]) -> Completion:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise CallError("malformed", "the answer has no 'choices'")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise CallError("malformed", "the first choice has no 'message'")
    text, refused, thought = _text(message.get("content"))
    reasoning = _reasoning(message, thought)
    if text is None and reasoning is not None:
        # A reasoning model that has not answered yet (cut off by the token limit while it
        # thought): servers send the content as null beside the reasoning. An empty answer.
        text = ""
    refusal = message.get("refusal")
    if isinstance(refusal, str) and _visible(refusal):
        refused = refusal
    if refused is not None and not _visible(text):
        # A model's structured refusal (message.refusal, or a content part of type
        # "refusal") is its answer whenever the content has no visible text: servers and
        # gateways send the content as null, "" or whitespace beside it.
        text = refused
    elif text is None and isinstance(refusal, str):
        text = refusal
    reason = choices[0].get("finish_reason")
    if reason == "content_filter" and not (isinstance(text, str) and text.strip()):
        # The provider's filter withheld the answer (Azure OpenAI does this): not a garbled
        # body worth sending again, and not the model's own answer to score.
        raise CallError(
            "content_filter",
            "the provider's content filter withheld the answer (finish_reason 'content_filter')",
        )
    called = message.get("tool_calls") or message.get("function_call")
    if called and not (isinstance(text, str) and text.strip()):
        # The model asked for a tool (the server was given tools, or a gateway added them):
        # it did not answer, so there is nothing to score, and asking again does the same.
        raise CallError(
            "no_answer",
            "the model called a tool instead of answering (a tool call, no text)",
        )
    if not isinstance(text, str):
        raise CallError("malformed", "the message has neither 'content' nor 'refusal' text")
    return api_completion(
        data, text, reason, ("prompt_tokens", "completion_tokens"), reasoning=reasoning
    )


def _visible(text: object) -> bool:
    return isinstance(text, str) and bool(text.strip())


_REASONING_KEYS = ("reasoning_content", "reasoning")
"""Where servers put a reasoning model's reasoning beside ``content``: ``reasoning_content``
(DeepSeek, vLLM, SGLang, LM Studio) or ``reasoning`` (vLLM, Ollama, OpenRouter, Groq)."""


def _reasoning(message: dict[str, Any], thought: str | None) -> str | None:
    """The reasoning of a message: its first reasoning field with text, then thinking parts."""
    found = next((v for k in _REASONING_KEYS if _visible(v := message.get(k))), None)
    parts = [p for p in (found, thought) if isinstance(p, str) and p.strip()]
    return "\n\n".join(parts) or None


def _text(content: object) -> tuple[str | None, str | None, str | None]:
    """The message's text, the refusal and the thinking among its parts (``None`` when absent).

    ``content`` is a string, or, from some compatible servers, a list of parts as requests
    may be written: ``[{"type": "text", "text": "..."}]``, ``{"type": "refusal", "refusal":
    "..."}`` for a refusal, and ``{"type": "thinking", "thinking": ...}`` for reasoning
    (Mistral's reasoning models: a string, or a list of text parts). Parts of each type are
    joined.
    """
    if isinstance(content, str):
        return content, None, None
    if not isinstance(content, list):
        return None, None, None
    found: dict[str, list[str]] = {"text": [], "refusal": [], "thinking": []}
    for part in content:
        if isinstance(part, dict) and part.get("type") in found:
            value = part.get(part["type"])
            if isinstance(value, list):  # thinking as a list of text parts
                value = "".join(
                    p["text"]
                    for p in value
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                )
            if isinstance(value, str):
                found[part["type"]].append(value)
    texts, refusals, thinking = found["text"], found["refusal"], found["thinking"]
    return (
        ("".join(texts) if texts else None),
        ("".join(refusals) if refusals else None),
        ("\n\n".join(thinking) if thinking else None),
    )
