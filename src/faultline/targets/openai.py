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
        data = await self.post_json("/chat/completions", body)
        return _completion(data)


def _completion(data: dict[str, Any]) -> Completion:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise CallError("malformed", "the answer has no 'choices'")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise CallError("malformed", "the first choice has no 'message'")
    text = _text(message.get("content"))
    if text is None:
        # A model's structured refusal comes as message.refusal, with null content.
        text = message.get("refusal")
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
    return api_completion(data, text, reason, ("prompt_tokens", "completion_tokens"))


def _text(content: object) -> str | None:
    """The message's text: ``content`` as a string, or its text parts joined.

    Some compatible servers send ``content`` as a list of parts,
    ``[{"type": "text", "text": "..."}]``, as requests may be written.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
        if parts:
            return "".join(parts)
    return None
