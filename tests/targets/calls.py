"""Calling a target from a synchronous test: one event loop per call, the target closed after."""

from __future__ import annotations

import asyncio
from typing import Any

from faultline.targets import CallError, Completion, Request, Target


def run(target: Target, *requests: Request) -> list[Any]:
    """Send the requests concurrently on one loop, close the target, return answers or errors."""

    async def go() -> list[Any]:
        try:
            return await asyncio.gather(
                *(target.complete(r) for r in requests), return_exceptions=True
            )
        finally:
            await target.aclose()

    return asyncio.run(go())


def answer(target: Target, req: Request) -> Completion:
    """The answer to one request (the test fails if it is an error)."""
    [result] = run(target, req)
    assert isinstance(result, Completion), result
    return result


def failure(target: Target, req: Request) -> CallError:
    """The failure of one request (the test fails if it is answered)."""
    [result] = run(target, req)
    assert isinstance(result, CallError), result
    return result
