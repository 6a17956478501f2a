"""The asyncio engine: send requests concurrently, retry what may succeed, record everything.

``concurrency`` workers take requests from one list in order. Each request is paced by the
rate limits, sent, and on a retryable failure (429, 5xx, a timeout, a dropped connection, a
garbled body) retried with backoff, honouring ``Retry-After``. Its outcome, an answer or
the final failure, goes to the journal at once. A *fatal* failure (a rejected key, an
unknown model) stops the run: every other request would fail the same way, and recording
them as errors would only have to be undone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from faultline._util.tasks import being_cancelled
from faultline.errors import TargetError
from faultline.runner.cache import ResponseCache, cache_key
from faultline.runner.journal import Entry, Journal
from faultline.runner.limits import Backoff, Pacer
from faultline.targets.base import (
    CallError,
    Completion,
    Request,
    Target,
    answer_identity,
    redact,
)

__all__ = ["RunProgress", "RunnerConfig", "execute", "request_record"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerConfig:
    """How hard the runner pushes the target.

    Attributes:
        concurrency: The most requests in flight.
        rpm: The most requests in any minute (``None``: no limit).
        tpm: The most tokens (in and out) in any minute (``None``: no limit).
        retries: Retries of a request after its first attempt.
        backoff_base: The first retry's delay in seconds, doubled each retry, jittered.
        backoff_max: The longest backoff delay.
        max_retry_after: The longest ``Retry-After`` honoured; a longer one makes the
            case an error instead of stalling the run.
        seed: Seeds the jitter.
    """

    concurrency: int = 8
    rpm: float | None = None
    tpm: float | None = None
    retries: int = 5
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    max_retry_after: float = 600.0
    seed: int | None = None


@dataclass
class RunProgress:
    """Counts that grow as the run goes, for progress displays.

    Attributes:
        total: Cases this sitting has to record.
        done: Cases recorded so far in this sitting.
        errors: Of those, error cases.
        retries: Retries sent so far.
        cached: Cases answered from the cache.
        input_tokens: Input tokens the target reported so far.
        output_tokens: Output tokens the target reported so far.
        started: When the sitting started (monotonic seconds).
        ended: When its last case was recorded (``None`` while running).
    """

    total: int
    done: int = 0
    errors: int = 0
    retries: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def rate(self) -> float:
        """Cases recorded per second so far."""
        elapsed = (self.ended or time.monotonic()) - self.started
        return self.done / elapsed if elapsed > 0 else 0.0


ProgressCallback = Callable[[RunProgress], None]


def request_record(request: Request) -> dict[str, Any]:
    """What the journal and the cache key record of a request: messages and parameters."""
    return {
        "messages": [dict(m) for m in request.messages],
        **request.params.record(),
        "seed": request.seed,
    }


async def execute(
    target: Target,
    requests: Sequence[Request],
    journal: Journal,
    *,
    config: RunnerConfig,
    cache: ResponseCache | None = None,
    on_progress: ProgressCallback | None = None,
) -> RunProgress:
    """Send every request and record every outcome in the journal.

    Raises:
        TargetError: A fatal failure (the target rejected the key, or does not know the
            model); what was recorded before it stays recorded.
    """
    progress = RunProgress(total=len(requests))
    engine = _Engine(
        target, journal, config=config, cache=cache, progress=progress, on_progress=on_progress
    )
    pending = iter(requests)
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(config.concurrency, len(requests))):
                group.create_task(engine.work(pending))
    except ExceptionGroup as failed:  # a fatal failure, or a journal that cannot be written
        raise failed.exceptions[0] from None
    progress.ended = time.monotonic()
    return progress


class _Engine:
    def __init__(
        self,
        target: Target,
        journal: Journal,
        *,
        config: RunnerConfig,
        cache: ResponseCache | None,
        progress: RunProgress,
        on_progress: ProgressCallback | None,
    ) -> None:
        self.target = target
        self.who = answer_identity(target)
        self.journal = journal
        self.config = config
        self.cache = cache
        self.progress = progress
        self.on_progress = on_progress
        self.requests = None if config.rpm is None else Pacer(config.rpm)
        self.tokens = None if config.tpm is None else Pacer(config.tpm)
        self.backoff = Backoff(config.backoff_base, config.backoff_max, seed=config.seed)

    async def work(self, pending: Any) -> None:
        for request in pending:
            entry = await self.one(request)
            self.journal.record(entry)
            p = self.progress
            p.done += 1
            p.errors += entry.error is not None
            p.cached += entry.cached
            p.input_tokens += entry.input_tokens or 0
            p.output_tokens += entry.output_tokens or 0
            if self.on_progress is not None:
                self.on_progress(p)

    async def one(self, request: Request) -> Entry:
        """The outcome of one request: from the cache, or sent (and retried)."""
        record = request_record(request)
        key = (
            None
            if self.cache is None
            else cache_key(self.who, record, request.sample, request.probe_id)
        )
        hit = None if self.cache is None or key is None else self.cache.get(key)
        if hit is not None:
            return _entry(request, record, completion=hit, attempts=0, cached=True, latency=0.0)
        start = time.monotonic()
        completion, error, attempts = await self.attempt(request)
        # The answer goes to the cache once the journal has committed it (run_probes).
        return _entry(
            request,
            record,
            completion=completion,
            error=error,
            attempts=attempts,
            latency=time.monotonic() - start,
        )

    async def attempt(
        self, request: Request
    ) -> tuple[Completion | None, dict[str, Any] | None, int]:
        """Send until an answer, a final failure, or a fatal one (raised)."""
        attempts = 0
        while True:
            attempts += 1
            try:
                return await self.send(request), None, attempts
            except CallError as failure:
                if failure.fatal:
                    raise TargetError(
                        f"{self.target.spec} refused the run ({failure.kind}): {failure.message}; "
                        "every request would fail the same way, so the run stopped",
                        target=self.target.spec,
                    ) from None
                wait = self.retry_wait(failure, attempts)
                if wait is None:
                    recorded = failure.attempts  # a replayed failure keeps its own count
                    error = {**failure.record(), "attempts": recorded or attempts}
                    if self.refused_wait(failure):
                        error["message"] += (
                            f"; the server asked to wait {failure.retry_after:g} s, more than "
                            f"the {self.config.max_retry_after:g} s faultline waits"
                        )
                    return None, error, attempts
            except Exception as exc:  # the per-case boundary: a target's bug is this case's error
                return None, self.exception(exc, attempts), attempts
            except (KeyboardInterrupt, SystemExit, GeneratorExit):
                raise  # the run is interrupted, exits, or this coroutine is being closed
            except asyncio.CancelledError as exc:
                if being_cancelled():
                    raise  # faultline stops the run (Ctrl-C, SIGTERM, a fatal failure)
                # The target's own (a future it awaited was cancelled): ending this worker
                # would silently drop this case and every one it had still to send.
                return None, self.exception(exc, attempts, " (raised by the target)"), attempts
            except BaseException as exc:  # a class of the target's own: still this case's error
                return None, self.exception(exc, attempts), attempts
            self.progress.retries += 1
            log.debug(
                "retry %d of %s#%d in %.2fs", attempts, request.probe_id, request.sample, wait
            )
            await asyncio.sleep(wait)

    def exception(self, exc: BaseException, attempts: int, note: str = "") -> dict[str, Any]:
        """The error case for an exception the target raised."""
        message = redact(f"{type(exc).__name__}: {exc}{note}", self.target.secrets)
        return {"kind": "exception", "message": message, "attempts": attempts}

    async def send(self, request: Request) -> Completion:
        await self.backoff.wait_if_paused()
        if self.requests is not None:
            await self.requests.acquire()
        estimate = 0
        if self.tokens is not None:
            estimate = request.estimated_tokens()
            await self.tokens.acquire(estimate)
        completion = await self.target.complete(request)
        if self.tokens is not None and completion.input_tokens is not None:
            used = completion.input_tokens + (completion.output_tokens or 0)
            self.tokens.correct(used - estimate)
        return completion

    def retry_wait(self, failure: CallError, attempts: int) -> float | None:
        """Seconds to wait before retrying, or ``None`` when the case is an error now.

        A ``Retry-After`` pauses every other request even when this one is not retried (its
        last attempt): the limit it reports is usually the account's.
        """
        if not failure.retryable or self.refused_wait(failure):
            return None
        if attempts > self.config.retries:
            if failure.retry_after is not None:
                self.backoff.pause(failure.retry_after)
            return None
        return self.backoff.delay(attempts, failure.retry_after)

    def refused_wait(self, failure: CallError) -> bool:
        """Whether the failure asks for a longer wait than ``max_retry_after``."""
        return failure.retryable and (
            failure.retry_after is not None and failure.retry_after > self.config.max_retry_after
        )


def _entry(
    request: Request,
    record: dict[str, Any],
    *,
    completion: Completion | None,
    error: dict[str, Any] | None = None,
    attempts: int,
    cached: bool = False,
    latency: float,
) -> Entry:
    return Entry(
        probe_id=request.probe_id,
        sample=request.sample,
        response=None if completion is None else completion.text,
        model=None if completion is None else completion.model,
        finish_reason=None if completion is None else completion.finish_reason,
        error=error,
        input_tokens=None if completion is None else completion.input_tokens,
        output_tokens=None if completion is None else completion.output_tokens,
        attempts=attempts,
        cached=cached,
        latency_s=latency,
        request=record,
        reasoning=None if completion is None else completion.reasoning,
    )
