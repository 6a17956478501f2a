"""``python:package.module:function``: a Python callable as the target.

For in-process models and for custom HTTP clients. The function gets the conversation and
the keyword arguments it declares among ``probe_id``, ``sample``, ``temperature``,
``max_tokens`` and ``seed``, and returns the answer as a string, a :class:`Completion`, or a
mapping with ``response`` (and optionally ``model``, ``finish_reason``, ``input_tokens``,
``output_tokens``, ``reasoning``)::

    def generate(messages, *, temperature=None):
        return my_model.chat(messages, temperature=temperature)

Sync functions run in threads, at most ``concurrency`` calls at once; a call never waits for
a thread, so the timeout measures the call, and a call that timed out is left to finish in
its thread (a daemon: the process does not wait for it at exit). Async ones are awaited. A function
signals a failure worth retrying by raising ``TimeoutError``, ``ConnectionError`` or
:class:`CallError`; any other exception makes the case an ``error`` with its message, and so
does any ``BaseException`` the function raises: ``SystemExit`` (``sys.exit``, a command-line
parser that gives up), ``KeyboardInterrupt``, ``asyncio.CancelledError`` (a future another
task cancelled) and the rest. The function failed, not the run. (A Ctrl-C or SIGTERM does
not come this way: faultline cancels the run's task, and that cancellation is not caught.)
A sync function that returns an awaitable (a wrapper around an ``async`` function) has it
awaited. A return value of the wrong type is an error that is not retried, as calling again
returns the same type.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from faultline._util.tasks import being_cancelled
from faultline._util.text import well_formed
from faultline.errors import UsageError
from faultline.targets._http import token_count
from faultline.targets._threads import CallThreads
from faultline.targets.base import CallError, Completion, GenerationParams, Request

__all__ = ["PythonTarget", "import_callable"]

_OFFERED = ("probe_id", "sample", "temperature", "max_tokens", "seed")


def import_callable(ref: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (the current directory is importable, as with ``python -m``).

    Raises:
        UsageError: The reference is malformed, the module cannot be imported, or the name
            is not a callable.
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(
            f"python target {ref!r}: expected package.module:function, e.g. python:mymodel:generate"
        )
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise  # Ctrl-C while the module loads: the command is interrupted
    except BaseException as exc:  # the user's module: any import-time failure is theirs to see
        raise UsageError(_import_failed(module_name, exc)) from exc
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    if not callable(obj):
        raise UsageError(
            f"python target: {module_name}.{attr} is not a callable in {module_name!r}"
        )
    return obj  # type: ignore[no-any-return]


def _import_failed(module_name: str, exc: BaseException) -> str:
    """Why the module could not be imported, and what a target module is expected to do.

    ``SystemExit`` (``sys.exit()``, an ``argparse`` parser run at import that rejects
    faultline's own command line) would otherwise end faultline with that code, exit 0 with
    nothing run among them.
    """
    said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, SystemExit):
        return (
            f"python target: cannot import module {module_name!r}: it raised {said} while "
            "being imported (sys.exit(), or a command-line parser that read faultline's "
            "arguments); expected a module that only defines the function at import: put "
            'that code under `if __name__ == "__main__":`'
        )
    return f"python target: cannot import module {module_name!r}: {said}"


class PythonTarget:
    """A sync or async Python callable.

    Args:
        ref: ``package.module:function``.
        params: How requests are sent (its timeout applies to each call).
        concurrency: The most calls in flight; a call that timed out no longer counts.
    """

    provider = "python"
    secrets: tuple[str, ...] = ()

    def __init__(self, ref: str, params: GenerationParams, *, concurrency: int = 8) -> None:
        self.model = ref
        self.spec = f"python:{ref}"
        self.params = params
        self._fn = import_callable(ref)
        self._async = inspect.iscoroutinefunction(self._fn) or inspect.iscoroutinefunction(
            getattr(self._fn, "__call__", None)  # noqa: B004 - an object whose __call__ is async
        )
        self._accepts = _accepted(self._fn)
        self.passes_probe_id = "probe_id" in self._accepts
        """Whether the function is given each request's probe id (so may answer by it)."""
        # A call never waits for a thread: its timeout measures the call (see _threads).
        self._threads = None if self._async else CallThreads("faultline-target")
        self._slots = asyncio.Semaphore(concurrency)

    def describe(self) -> dict[str, Any]:
        """The target as the report records it."""
        return {"spec": self.spec, "provider": self.provider, "model": self.model}

    async def complete(self, request: Request) -> Completion:
        """Call the function once."""
        offered = {
            "probe_id": request.probe_id,
            "sample": request.sample,
            "temperature": request.params.temperature,
            "max_tokens": request.params.max_tokens,
            "seed": request.seed,
        }
        kwargs = {k: v for k, v in offered.items() if k in self._accepts}
        messages = [dict(m) for m in request.messages]
        try:
            async with self._slots:  # waiting for a slot is not part of the call's timeout
                if self._threads is None:
                    call = self._fn(messages, **kwargs)
                else:
                    call = asyncio.wrap_future(
                        self._threads.submit(partial(self._fn, messages, **kwargs))
                    )
                result = await asyncio.wait_for(_exits_caught(call), self.params.timeout)
        except CallError:
            raise
        except TimeoutError as exc:  # wait_for's: the function's own is a CallError already
            raise CallError("timeout", f"no answer within {self.params.timeout:g} s") from exc
        except ConnectionError as exc:
            raise CallError("connection", well_formed(f"{type(exc).__name__}: {exc}")) from exc
        except Exception as exc:  # the per-case boundary: the user's code failed for this case
            raise CallError("exception", well_formed(f"{type(exc).__name__}: {exc}")) from exc
        return _completion(result, self.spec)

    async def aclose(self) -> None:
        """Let the threads go; a call still running is not waited for."""
        if self._threads is not None:
            self._threads.shutdown()


async def _exits_caught(call: Awaitable[Any]) -> Any:
    """Await ``call`` (and the awaitable it returns, if any), its failures made :class:`CallError`.

    A ``TimeoutError`` raised by the function is its own (an upstream timeout), not faultline's
    ``--timeout``: it is retried, and its message says the function raised it.

    Any ``BaseException`` the function raises is its failure, not a request to end the run:
    ``SystemExit``, ``KeyboardInterrupt``, ``asyncio.CancelledError``, ``GeneratorExit``, a
    class of its own. They must be caught here, inside the task that awaits the call: a task
    re-raises ``SystemExit`` and ``KeyboardInterrupt`` out of the event loop (a traceback and
    no report), a ``CancelledError`` ends the worker silently, and any other one ends the run
    with an exception group. A ``CancelledError`` is faultline's own only when this task is
    being cancelled (Ctrl-C, SIGTERM, a fatal failure, the timeout): that one goes on.
    """
    try:
        result = await call
        if inspect.isawaitable(result):  # a sync wrapper around an async function
            result = await result
        return result
    except CallError:
        raise
    except TimeoutError as exc:
        said = well_formed(f": {exc}") if str(exc) else ""
        raise CallError(
            "timeout", f"TimeoutError{said} (raised by the function, not faultline's --timeout)"
        ) from exc
    except Exception:
        raise  # the per-case boundary in PythonTarget.complete words these
    except asyncio.CancelledError as exc:
        if being_cancelled():
            raise  # faultline is cancelling the call: the run stops, or the call timed out
        said = well_formed(f": {exc}") if str(exc) else ""
        raise CallError(
            "exception", f"CancelledError{said} (raised by the function, not by faultline)"
        ) from exc
    except BaseException as exc:
        name = type(exc).__name__
        said = well_formed(f": {exc}") if str(exc) else ""
        why = " (the function exited instead of returning)" if isinstance(exc, SystemExit) else ""
        raise CallError("exception", f"{name}{said}{why}") from exc


def _accepted(fn: Callable[..., Any]) -> frozenset[str]:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return frozenset(_OFFERED)
    return frozenset(p.name for p in parameters if p.name in _OFFERED)


def _completion(result: object, spec: str) -> Completion:
    """The function's answer as a :class:`Completion`, its text valid Unicode.

    Lone surrogates (what ``surrogateescape`` decoding leaves for bytes that are not UTF-8)
    cannot be written to the journal or any file; each becomes U+FFFD, and the rest of the
    answer is kept and scored.
    """
    if isinstance(result, Completion):
        return _well_formed(result)
    if isinstance(result, str):
        return Completion(text=well_formed(result))
    if isinstance(result, Mapping) and isinstance(result.get("response"), str):
        model, reason = result.get("model"), result.get("finish_reason")
        reasoning = result.get("reasoning")
        return _well_formed(
            Completion(
                text=result["response"],
                model=model if isinstance(model, str) else None,
                finish_reason=reason if isinstance(reason, str) else None,
                input_tokens=token_count(result.get("input_tokens")),
                output_tokens=token_count(result.get("output_tokens")),
                reasoning=reasoning if isinstance(reasoning, str) else None,
            )
        )
    returned = "None" if result is None else type(result).__name__
    raise CallError(
        "malformed",
        f"{spec} returned {returned}; expected a string, a Completion, "
        "or a mapping with a 'response' string (not retried: it would return the same)",
        final=True,  # the function's code decides the type: calling again cannot change it
    )


def _well_formed(completion: Completion) -> Completion:
    return dataclasses.replace(
        completion,
        text=well_formed(completion.text),
        model=None if completion.model is None else well_formed(completion.model),
        finish_reason=(
            None if completion.finish_reason is None else well_formed(completion.finish_reason)
        ),
        reasoning=None if completion.reasoning is None else well_formed(completion.reasoning),
    )
