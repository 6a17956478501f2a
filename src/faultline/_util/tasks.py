"""asyncio helpers shared by the runner and the targets."""

from __future__ import annotations

import asyncio

__all__ = ["being_cancelled"]


def being_cancelled() -> bool:
    """Whether the running task is being cancelled: faultline stops the run or a call.

    A ``CancelledError`` raised while it is not was raised by a target's own code (a future
    another task cancelled): that case's error, not a reason to stop.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
