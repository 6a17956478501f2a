"""Rate limits and retry delays.

:class:`Pacer` spaces requests so that a per-minute limit holds over *every* window, not just
on average: each unit of work books ``60 / limit`` seconds of a shared timeline, and a
request waits until its booking starts. There is no initial burst, so a short run is as
well-behaved as a long one. Token limits book an estimate first and correct it when the
server reports what the request really used.

:class:`Backoff` gives the delay before a retry: exponential with jitter, or what the
server asked for in ``Retry-After``, which then also pauses every other request.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

__all__ = ["Backoff", "Pacer"]


class Pacer:
    """Keeps a per-minute rate.

    Args:
        per_minute: The most units (requests, or tokens) in any minute.
        clock: A monotonic clock, in seconds.
    """

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not per_minute > 0:
            raise ValueError(f"per_minute must be above 0, got {per_minute}")
        self.interval = 60.0 / per_minute
        self._clock = clock
        self._next = clock()

    async def acquire(self, units: float = 1.0) -> None:
        """Wait until ``units`` may be spent, and book them."""
        now = self._clock()
        start = max(self._next, now)
        self._next = start + units * self.interval
        if start > now:
            await asyncio.sleep(start - now)

    def correct(self, units: float) -> None:
        """Book ``units`` more (or, when negative, give back), once the true cost is known."""
        self._next += units * self.interval
        if units < 0:
            self._next = max(self._next, self._clock())


class Backoff:
    """Delays before retries, and a pause shared by all requests after a ``Retry-After``.

    Args:
        base: The first retry's delay, in seconds (before jitter).
        cap: The longest delay computed by backoff.
        seed: Seeds the jitter.
        clock: A monotonic clock, in seconds.
    """

    def __init__(
        self,
        base: float = 1.0,
        cap: float = 60.0,
        *,
        seed: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base = base
        self.cap = cap
        self._random = random.Random(seed)
        self._clock = clock
        self._paused_until = 0.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """The wait before retry number ``attempt`` (1, 2, ...).

        With ``retry_after``, at least that (plus up to 10% so that waiting requests do
        not return all at once), and every request is paused as long; otherwise
        ``min(cap, base * 2**(attempt-1))`` scaled by a random factor in [0.5, 1).
        """
        if retry_after is not None:
            wait = retry_after * (1.0 + 0.1 * self._random.random())
            self.pause(retry_after)
            return wait
        step = min(self.cap, self.base * 2.0 ** (attempt - 1))
        return step * (0.5 + 0.5 * self._random.random())

    def pause(self, seconds: float) -> None:
        """Hold every request for ``seconds`` (a ``Retry-After``), or longer if already paused."""
        self._paused_until = max(self._paused_until, self._clock() + seconds)

    async def wait_if_paused(self) -> None:
        """Sleep until a server-requested pause is over."""
        while (left := self._paused_until - self._clock()) > 0:
            await asyncio.sleep(left)
