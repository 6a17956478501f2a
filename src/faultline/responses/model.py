"""The recorded answer of a model to one probe."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["FIELDS", "TRUNCATION_REASONS", "Response", "Usage", "truncation_reason"]

TRUNCATION_REASONS = frozenset({"length", "max_tokens", "max_output_tokens", "model_length"})
"""``finish_reason`` values that mean the answer was cut off by a token limit, in lower case
with ``_`` between words: ``length`` (OpenAI, vLLM, llama.cpp), ``max_tokens`` (Anthropic,
Bedrock; ``MAX_TOKENS`` from Gemini, Vertex and Cohere), ``max_output_tokens`` (OpenAI's
Responses API), ``model_length`` (Mistral: the context window)."""


class Usage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """The tokens one generation cost, as the target counted them.

    Attributes:
        input_tokens: Tokens of the request.
        output_tokens: Tokens of the answer.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None


class Response(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One generation of a model for one probe, as recorded in a responses file.

    Attributes:
        probe_id: The id of the probe answered.
        response: The model's answer; may be missing only when ``error`` is set.
        sample: Which generation for the same probe (0, 1, ...).
        model: The model that answered, if recorded.
        error: What went wrong when the target failed for this case (text or an object).
        finish_reason: Why generation stopped, as the API reported it; ``length`` (OpenAI),
            ``max_tokens`` (Anthropic) and the others of :data:`TRUNCATION_REASONS`, in any
            case and with ``-`` or a space for ``_``, mean the answer was truncated.
        usage: The tokens the generation cost, when recorded.
        reasoning: A reasoning model's reasoning, when the target returned it apart from the
            answer (``reasoning_content``, Anthropic's ``thinking`` blocks). Verdicts read the
            answer only; reasoning written inside ``response`` as a ``<think>`` block is set
            apart the same way (:mod:`faultline.responses.reasoning`).
    """

    probe_id: str
    response: str | None = None
    sample: int = 0
    model: str | None = None
    error: str | dict[str, Any] | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    reasoning: str | None = None

    @property
    def truncated(self) -> bool:
        """Whether the answer was cut off by a token limit."""
        reason = self.finish_reason
        return reason is not None and truncation_reason(reason)


FIELDS: tuple[str, ...] = Response.__struct_fields__
"""The fields of a responses record (a JSONL key or a Parquet column each), in order."""


def truncation_reason(reason: str) -> bool:
    """Whether a ``finish_reason`` says a token limit cut the answer (``MAX_TOKENS``, ``Length``)."""
    return (
        reason in TRUNCATION_REASONS
        or reason.strip().lower().replace("-", "_").replace(" ", "_") in TRUNCATION_REASONS
    )
