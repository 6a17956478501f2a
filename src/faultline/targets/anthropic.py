"""``anthropic:MODEL``: the Anthropic Messages API (``POST {base_url}/v1/messages``)."""

from __future__ import annotations

from typing import Any

from faultline.targets._http import HttpTarget, api_completion
from faultline.targets.base import CallError, Completion, Request

__all__ = ["API_VERSION", "DEFAULT_BASE_URL", "DEFAULT_MAX_TOKENS", "AnthropicTarget"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
"""The API requires a limit; this one is used when the run gives none."""


class AnthropicTarget(HttpTarget):
    """The Anthropic Messages API.

    System messages (the run's system prompt, and any ``system`` turns of a conversation
    probe) go into the request's ``system`` field, as the API expects.

    Args:
        model: The model, e.g. ``claude-sonnet-4-5``.
        params: How requests are sent.
        base_url: The API base (default: ``ANTHROPIC_BASE_URL``, else the public API).
        api_key_env: The environment variable holding the key (required).
        concurrency: The most requests in flight.
    """

    provider = "anthropic"
    default_base_url = DEFAULT_BASE_URL
    base_url_env = "ANTHROPIC_BASE_URL"
    key_env = "ANTHROPIC_API_KEY"
    key_required_for_any_url = True

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The key and the API version."""
        return {"x-api-key": key or "", "anthropic-version": API_VERSION}

    async def complete(self, request: Request) -> Completion:
        """Ask for one message."""
        system = [m["content"] for m in request.messages if m["role"] in {"system", "developer"}]
        turns = [
            {"role": "assistant" if m["role"] == "assistant" else "user", "content": m["content"]}
            for m in request.messages
            if m["role"] not in {"system", "developer"}
        ]
        p = request.params
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": p.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": turns,
        }
        if system:
            body["system"] = "\n\n".join(system)
        if p.temperature is not None:
            body["temperature"] = p.temperature
        body.update(p.body_fields())
        data = await self.post_json("/v1/messages", body)
        if data.get("type") == "error":
            raise self.embedded_failure(data.get("error"))  # an error with a success status
        return _completion(data)


def _completion(data: dict[str, Any]) -> Completion:
    if data.get("type") == "error":
        raise CallError("malformed", "the answer is an error object with a success status")
    blocks = data.get("content")
    if not isinstance(blocks, list):
        raise CallError("malformed", "the answer has no 'content' list")
    text = "".join(
        b["text"]
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )
    # Extended thinking: "thinking" blocks before the answer (a "redacted_thinking" block
    # holds only ciphertext, nothing to show).
    thinking = [
        b["thinking"]
        for b in blocks
        if isinstance(b, dict)
        and b.get("type") == "thinking"
        and isinstance(b.get("thinking"), str)
        and b["thinking"].strip()
    ]
    reason = data.get("stop_reason")
    if reason == "refusal" and not text.strip():
        # The API's safety classifier stopped the answer before any text: as with OpenAI's
        # content filter, nothing the model wrote was seen, so there is nothing to score.
        raise CallError(
            "content_filter",
            "the provider stopped the answer before any text (stop_reason 'refusal')",
        )
    if not text.strip() and reason == "pause_turn":
        # The API paused a long turn (a server tool such as web search was running) before
        # any text: the model has not answered yet, so there is nothing to score (not an
        # empty answer, which is a fail); faultline does not continue turns.
        raise CallError(
            "no_answer",
            "the model paused its turn before answering (stop_reason 'pause_turn', no text: "
            "a server tool such as web search was running)",
        )
    tools = sorted({str(b["type"]) for b in blocks if isinstance(b, dict) and _is_tool(b)})
    if not text.strip() and tools:
        # The model asked for a tool (its own, or a server tool such as web search) instead
        # of answering: nothing to score (not an empty answer, which is a fail), and asking
        # again does the same.
        raise CallError(
            "no_answer",
            f"the model called a tool instead of answering ({', '.join(tools)} blocks, no text)",
        )
    return api_completion(
        data,
        text,
        reason,
        ("input_tokens", "output_tokens"),
        reasoning="\n\n".join(thinking) or None,
    )


def _is_tool(block: dict[str, Any]) -> bool:
    """Whether a content block is a tool call or a tool's result, not text.

    ``tool_use`` (a tool of the client's), ``server_tool_use`` and ``mcp_tool_use`` (run by
    the API), and their results (``web_search_tool_result``, ``mcp_tool_result``, ...).
    """
    kind = block.get("type")
    return isinstance(kind, str) and (kind.endswith("tool_use") or kind.endswith("tool_result"))
