"""Targets: the models probes are sent to, addressed as ``provider:model``.

=============  ==========================================================================
``openai``     any OpenAI-compatible chat-completions server (hosted, vLLM, Ollama,
               llama.cpp, LM Studio): ``openai:MODEL`` with ``base_url``
``anthropic``  the Anthropic Messages API: ``anthropic:MODEL``
``python``     a sync or async callable: ``python:package.module:function``
``replay``     recorded answers: ``replay:responses.jsonl`` (``#MODEL`` picks one model)
=============  ==========================================================================

Every target implements :class:`Target`: ``complete(request)`` returns a
:class:`Completion` or raises :class:`CallError`, whose ``kind`` tells the runner whether
to retry. To add a provider, write a class with that shape and add it to
:func:`open_target`; the contract tests in ``tests/contracts`` run over every provider.
"""

from __future__ import annotations

from dataclasses import dataclass

from faultline.errors import UsageError
from faultline.targets.base import (
    CallError,
    Completion,
    FailureKind,
    GenerationParams,
    Request,
    Target,
    parse_retry_after,
    redact,
)

__all__ = [
    "PROVIDERS",
    "CallError",
    "Completion",
    "FailureKind",
    "GenerationParams",
    "Request",
    "Target",
    "TargetOptions",
    "open_target",
    "parse_retry_after",
    "redact",
]

PROVIDERS = ("openai", "anthropic", "python", "replay")


@dataclass(frozen=True)
class TargetOptions:
    """How to reach an API target.

    Attributes:
        base_url: The API base URL (``None``: the provider's environment variable, else its
            public API).
        api_key_env: The environment variable holding the key (``None``: the provider's
            usual one, ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY``).
        concurrency: The most requests in flight.
    """

    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8


def open_target(
    spec: str, params: GenerationParams | None = None, options: TargetOptions | None = None
) -> Target:
    """Open the target a ``provider:model`` spec names.

    Args:
        spec: E.g. ``openai:gpt-4o-mini``, ``anthropic:claude-sonnet-4-5``,
            ``python:mypkg.model:generate``, ``replay:responses.jsonl``.
        params: How requests are sent.
        options: Endpoint, key variable and concurrency, for the API targets.

    Raises:
        UsageError: The spec names no known provider or no model, or an API key is missing.
        ResponseError: A replay file is malformed.
    """
    provider, sep, model = spec.partition(":")
    params = params or GenerationParams()
    options = options or TargetOptions()
    if not sep or not model.strip() or provider not in PROVIDERS:
        raise UsageError(
            f"--target: got {spec!r}, expected PROVIDER:MODEL with PROVIDER one of "
            f"{', '.join(PROVIDERS)}, e.g. openai:gpt-4o-mini or replay:responses.jsonl"
        )
    if provider in {"python", "replay"} and (options.base_url or options.api_key_env):
        raise UsageError(f"--base-url and --api-key-env apply to API targets, not {provider}:")
    if provider in {"openai", "anthropic"}:
        from faultline.targets.anthropic import AnthropicTarget
        from faultline.targets.openai import OpenAITarget

        api = OpenAITarget if provider == "openai" else AnthropicTarget
        return api(
            model,
            params,
            base_url=options.base_url,
            api_key_env=options.api_key_env,
            concurrency=options.concurrency,
        )
    if provider == "python":
        from faultline.targets.python import PythonTarget

        return PythonTarget(model, params, concurrency=options.concurrency)
    from faultline.targets.replay import ReplayTarget

    return ReplayTarget(model)
