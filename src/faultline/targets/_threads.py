"""The threads that run a sync Python target's calls.

A :class:`~concurrent.futures.ThreadPoolExecutor` of ``concurrency`` threads queues a call
behind the calls running before it, so a call that is stuck (a stalled socket, a deadlock)
holds its thread, and every later call waits in the queue, its timeout spent before the
function is even called. And the executor's threads are joined at exit, so a stuck call
keeps the process alive after Ctrl-C.

:class:`CallThreads` starts a thread whenever no idle one is free: a call never waits for a
thread, so its timeout measures the call alone. A call that timed out is left running (a
thread cannot be stopped) and its thread is reused once it returns. The runner bounds the
calls in flight, so there are ``concurrency`` threads plus one per call still stuck. The
threads are daemons: the process exits without waiting for a stuck call.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["CallThreads"]

_Job = tuple[Future[Any], Callable[[], Any]]


class CallThreads:
    """Daemon threads that take calls; a new one starts when none is idle.

    Args:
        name: The threads' name prefix.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._closed = False
        self._numbers = itertools.count(1)

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` in an idle thread, or a new one, and return its future.

        Raises:
            RuntimeError: The threads were shut down.
        """
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: the threads were shut down")
            start = self._idle == 0
            if not start:
                self._idle -= 1  # that idle thread takes this job
        self._jobs.put((future, fn))
        if start:
            thread = threading.Thread(
                target=self._work, name=f"{self.name}-{next(self._numbers)}", daemon=True
            )
            thread.start()
        return future

    def shutdown(self) -> None:
        """End the idle threads; a thread still in a call ends when the call returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn = job
            del job
            if future.set_running_or_notify_cancel():
                try:
                    result = fn()
                except BaseException as exc:  # handed to the caller, whatever it is
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn
            with self._lock:
                if self._closed:
                    return
                self._idle += 1
