"""What every target shares: the request, the completion, the failure, the protocol."""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from faultline.errors import TargetError, UsageError

__all__ = [
    "BODY_RESERVED",
    "CallError",
    "Completion",
    "FailureKind",
    "GenerationParams",
    "Request",
    "Target",
    "answer_identity",
    "parse_retry_after",
    "redact",
]

FailureKind = Literal[
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "malformed",
    "bad_request",
    "content_filter",
    "auth",
    "not_found",
    "no_answer",
    "exception",
]
"""Why a call failed; the first five are worth retrying."""

BODY_RESERVED: dict[str, str] = {
    "model": "the target spec names the model",
    "messages": "the probes are the messages",
    "system": "use --system",
    "temperature": "use --temperature",
    "max_tokens": "use --max-tokens",
    "seed": "use --request-seed",
    "stream": "faultline reads whole answers",
    "n": "use --samples",
}
"""Request body fields faultline sets itself, and what to use instead of ``--body``."""

RETRYABLE: frozenset[str] = frozenset(
    {"rate_limited", "server_error", "timeout", "connection", "malformed"}
)


@dataclass(frozen=True)
class GenerationParams:
    """How every request of a run is sent.

    Attributes:
        system: A system prompt put before each probe's messages (``None``: none).
        temperature: The sampling temperature (``None``: the server's default).
        max_tokens: The longest answer, in tokens (``None``: the server's default; the
            Anthropic adapter needs one and uses 1024).
        seed: Sent as the request's ``seed``; sample ``k`` gets ``seed + k`` so that the
            samples of a probe differ (``None``: not sent).
        headers: Extra HTTP headers, e.g. for a gateway; their values are treated as secrets.
        timeout: Seconds one request may take before it is abandoned (and retried).
        body: Extra fields of the API request's body, each ``(name, JSON text of its value)``:
            what a provider offers beyond the common parameters (``reasoning_effort``,
            Anthropic's ``thinking``, vLLM's ``chat_template_kwargs``). Sent by the API
            targets only; recorded, so a change is another request to ``--resume`` and the
            cache. Never one of :data:`BODY_RESERVED`.

    Raises:
        UsageError: A body field is one faultline sets, its value is not JSON text, or a
            field is given twice.
    """

    system: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 120.0
    body: tuple[tuple[str, str], ...] = ()

    def record(self) -> dict[str, Any]:
        """The parameters as recorded in the run directory: header values left out.

        ``body`` is recorded only when given, so the record of every other run is as it was.
        """
        record: dict[str, Any] = {
            "system": self.system,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "headers": sorted({name for name, _ in self.headers}),
            "timeout": self.timeout,
        }
        if self.body:
            record["body"] = self.body_fields()
        return record

    def __post_init__(self) -> None:
        names = [name for name, _ in self.body]
        for name, value in self.body:
            if name in BODY_RESERVED:
                raise UsageError(f"body: faultline sets '{name}' itself ({BODY_RESERVED[name]})")
            try:
                json.loads(value)
            except ValueError as exc:
                raise UsageError(f"body {name}: the value is not JSON text ({exc})") from None
        if len(set(names)) != len(names):
            raise UsageError(f"body: a field is given twice ({', '.join(names)})")

    def body_fields(self) -> dict[str, Any]:
        """The extra body fields, decoded, by name."""
        return {name: json.loads(value) for name, value in self.body}


@dataclass(frozen=True)
class Request:
    """One generation to ask for.

    Attributes:
        probe_id: The probe the request comes from.
        sample: Which generation for that probe (0, 1, ...).
        messages: The conversation, as ``{"role", "content"}`` objects, system prompt first.
        params: How to send it.
    """

    probe_id: str
    sample: int
    messages: tuple[Mapping[str, str], ...]
    params: GenerationParams = field(default_factory=GenerationParams)

    @property
    def seed(self) -> int | None:
        """The seed sent with this request: the run's seed plus the sample number."""
        return None if self.params.seed is None else self.params.seed + self.sample

    def estimated_tokens(self) -> int:
        """A cautious guess of the tokens the request costs, before it is sent.

        About four characters a token for the input, plus the answer's limit (or 256).
        """
        chars = sum(len(m["content"]) for m in self.messages)
        return math.ceil(chars / 4) + (self.params.max_tokens or 256)


@dataclass(frozen=True)
class Completion:
    """A target's answer.

    Attributes:
        text: The answer.
        model: The model that answered, as the server named it.
        finish_reason: Why generation stopped, as the server said.
        input_tokens: Tokens of the request, when the server counted them.
        output_tokens: Tokens of the answer, when the server counted them.
        reasoning: A reasoning model's reasoning, when the server returned it apart from the
            answer (``None`` otherwise).
    """

    text: str
    model: str | None = None
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning: str | None = None


class CallError(TargetError):
    """One call to a target failed.

    The runner retries the retryable kinds with backoff; others become an ``error`` case at
    once, and a ``fatal`` one (a rejected key, an unknown model) stops the run, since every
    other request would fail the same way.

    Attributes:
        kind: Why it failed.
        message: What the target or the network said, secrets removed.
        status: The HTTP status, when there was one.
        retry_after: Seconds the server asked to wait before trying again.
        fatal: Whether the whole run should stop.
        final: Whether trying again gives the same failure whatever its kind (a recorded
            failure, replayed).
        attempts: The requests the failure took when it was recorded (a replayed failure);
            ``None`` for a failure of this run, whose attempts the runner counts.
    """

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        fatal: bool = False,
        final: bool = False,
        attempts: int | None = None,
    ) -> None:
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.fatal = fatal
        self.final = final
        self.attempts = attempts
        super().__init__(message)

    @property
    def retryable(self) -> bool:
        """Whether trying again may succeed."""
        return self.kind in RETRYABLE and not self.fatal and not self.final

    def record(self) -> dict[str, Any]:
        """The failure as an error case records it."""
        out: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.status is not None:
            out["status"] = self.status
        return out


class Target(Protocol):
    """A model to send probes to.

    Attributes:
        spec: The target as the user named it, ``provider:model``, without secrets.
        provider: ``openai``, ``anthropic``, ``python`` or ``replay``.
        model: The model (or function, or file) part of the spec.
        secrets: Values that must never be written anywhere (keys, header values).
    """

    spec: str
    provider: str
    model: str
    secrets: tuple[str, ...]

    def describe(self) -> dict[str, Any]:
        """The target as the report records it: spec, provider, model, endpoint; no secrets."""
        ...

    async def complete(self, request: Request) -> Completion:
        """Send one request and return the answer.

        Raises:
            CallError: The call failed.
        """
        ...

    async def aclose(self) -> None:
        """Release connections and threads."""
        ...


def answer_identity(target: Target) -> dict[str, Any]:
    """What decides the target's answers besides the request: for the response cache's key.

    :meth:`Target.describe`, plus, each only when it applies: ``private``, a digest of the
    settings kept secret that select what answers (an API target's base-URL query and user
    info, and its ``--header`` names and values; never the values themselves), and
    ``probe_ids``, true when the target is given each request's probe id (a Python function
    that declares ``probe_id`` may answer two probes with the same messages differently).
    """
    who = dict(target.describe())
    private = getattr(target, "private_digest", None)
    if isinstance(private, str):
        who["private"] = private
    if getattr(target, "passes_probe_id", False) is True:
        who["probe_ids"] = True
    return who


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date).

    Returns ``None`` when neither header is there or parses; never a negative number. A
    negative number of seconds is no delay the server could mean, so it is ignored (normal
    backoff applies); a date in the past means now (0).
    """
    lower = {k.lower(): v for k, v in headers.items()}
    value = lower.get("retry-after-ms")
    if value is not None:
        try:
            millis = float(value)
        except ValueError:
            millis = math.nan
        if math.isfinite(millis) and millis >= 0:
            return millis / 1000
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = max(0.0, when.timestamp() - (time.time() if now is None else now))
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret (of four characters or more) replaced by ``***``.

    Longer secrets go first, so one that contains another is hidden whole.
    """
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text
