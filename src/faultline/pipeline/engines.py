"""Where the batch function runs: this process, a pool of worker processes, or Dask.

Every engine runs :func:`faultline.pipeline.batch.score_piece` on the same pieces and yields
the results in input order, so the run they feed is the same whichever engine ran it. At most
a few pieces per worker are in flight, so memory stays flat however long the input is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import re
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any, NoReturn, Protocol

from faultline._util.env import env_seconds
from faultline._version import __version__
from faultline.errors import FaultlineError, TargetError, UsageError
from faultline.pipeline import batch
from faultline.pipeline.batch import BatchContext, BatchResult, Layout
from faultline.responses.sources import Piece

__all__ = ["ENGINES", "Engine", "open_engine"]

ENGINES = ("local", "dask")
_IN_FLIGHT_PER_WORKER = 2


class Engine(Protocol):
    """Runs the batch function over pieces."""

    workers: int

    def scan(self, pieces: Iterable[Piece]) -> Iterator[tuple[set[str | None], int] | None]:
        """The models and record count of each piece, in input order."""
        ...

    def score(self, pieces: Iterable[Piece], layout: Layout) -> Iterator[BatchResult]:
        """Each piece's result, in input order."""
        ...

    def close(self) -> None:
        """Stop the workers (waiting for the few in flight)."""
        ...


def open_engine(
    name: str, context: BatchContext, *, workers: int, scheduler: str | None = None
) -> Engine:
    """Start an engine.

    Args:
        name: ``local`` (this process when ``workers`` is 0, else a process pool) or ``dask``.
        context: The probes, rules and configuration, sent once to each worker.
        workers: Worker processes (``local``), or workers of a new LocalCluster (``dask``).
        scheduler: The address of a running Dask scheduler (``dask`` only).

    Raises:
        UsageError: An unknown engine, Dask not installed, or a scheduler for ``local``.
    """
    if name == "local":
        if scheduler is not None:
            raise UsageError("--scheduler needs --engine dask")
        return _InProcess(context) if workers == 0 else _Pool(context, workers)
    if name == "dask":
        return _Dask(context, workers=max(1, workers), scheduler=scheduler)
    raise UsageError(f"unknown engine '{name}'; expected one of {', '.join(ENGINES)}")


class _InProcess:
    def __init__(self, context: BatchContext) -> None:
        self.workers = 0
        batch.init(context)

    def scan(self, pieces: Iterable[Piece]) -> Iterator[tuple[set[str | None], int] | None]:
        return map(batch.scan, pieces)

    def score(self, pieces: Iterable[Piece], layout: Layout) -> Iterator[BatchResult]:
        for i, piece in enumerate(pieces):
            yield batch.score_piece(i, piece, layout)

    def close(self) -> None:
        pass


class _Pool:
    """Worker processes (forkserver where available); each gets the context when it starts."""

    def __init__(self, context: BatchContext, workers: int) -> None:
        self.workers = workers
        method = (
            "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        )
        self._executor = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context(method),
            initializer=_init_worker,
            initargs=(context,),
        )

    def scan(self, pieces: Iterable[Piece]) -> Iterator[tuple[set[str | None], int] | None]:
        return self._ordered((batch.scan, (p,)) for p in pieces)

    def score(self, pieces: Iterable[Piece], layout: Layout) -> Iterator[BatchResult]:
        return self._ordered((batch.score_piece, (i, p, layout)) for i, p in enumerate(pieces))

    def _ordered(self, calls: Iterable[tuple[Any, tuple[Any, ...]]]) -> Iterator[Any]:
        return _in_order(lambda fn, args: self._executor.submit(fn, *args), calls, self.workers)

    def close(self) -> None:
        # On an error or Ctrl-C, drop the queued pieces and wait for the few in flight, so no
        # worker outlives the run.
        self._executor.shutdown(wait=True, cancel_futures=True)


def _in_order(
    submit: Callable[[Any, tuple[Any, ...]], Any],
    calls: Iterable[tuple[Any, tuple[Any, ...]]],
    workers: int,
) -> Iterator[Any]:
    """Submit each call and yield the results in call order, a few per worker in flight.

    ``submit`` returns a future (concurrent.futures' or Dask's: both have ``result()``).
    """
    pending: deque[Any] = deque()
    for fn, args in calls:
        pending.append(submit(fn, args))
        while len(pending) > _IN_FLIGHT_PER_WORKER * workers:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _init_worker(context: BatchContext) -> None:
    """A worker's start: Ctrl-C is the parent's to handle (it stops the pool), then the state."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    batch.init(context)


#: The variable that sets how long a ``--scheduler`` has to answer.
SCHEDULER_TIMEOUT_VARIABLE = "FAULTLINE_SCHEDULER_TIMEOUT"

#: Seconds a ``--scheduler`` has to accept the connection and answer as a Dask scheduler,
#: unless the variable says otherwise: past it the run exits 3.
DEFAULT_SCHEDULER_TIMEOUT = 30.0

_GRACE = 0.5
_REMOTE_IMPORT_FAILURE = re.compile(r"^(ModuleNotFoundError|ImportError)\(")


def scheduler_timeout() -> float:
    """Seconds a scheduler has to answer: ``FAULTLINE_SCHEDULER_TIMEOUT``, default 30.

    Raises:
        UsageError: The variable is set but is not a finite number above 0.
    """
    return env_seconds(SCHEDULER_TIMEOUT_VARIABLE, DEFAULT_SCHEDULER_TIMEOUT)


class _Dask:
    """A ``dask.distributed`` cluster: the one at ``scheduler``, or a new LocalCluster.

    For the run's duration distributed's loggers (and its event loop's) print only CRITICAL
    records: its ERROR records carry tracebacks of failures the run reports in one line. The
    LocalCluster's worker processes ignore Ctrl-C: as with the local pool, the parent
    handles it and stops them.
    """

    def __init__(self, context: BatchContext, *, workers: int, scheduler: str | None) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise UsageError("--engine dask needs Dask: pip install 'faultline[dask]'") from None
        self._cluster: Any = None
        self._client: Any = None
        self._scheduler = scheduler
        self._where = (
            "the local Dask cluster" if scheduler is None else f"the Dask cluster at {scheduler}"
        )
        self._quiet = contextlib.ExitStack()
        self._quiet.enter_context(_quiet_distributed())
        try:
            if scheduler is None:
                with _sigint_ignored():  # the workers it starts ignore Ctrl-C
                    self._cluster = LocalCluster(
                        n_workers=workers,
                        threads_per_worker=1,
                        processes=True,
                        host="127.0.0.1",  # nothing listens beyond this machine
                        dashboard_address="127.0.0.1:0",  # any free port: never clash
                        worker_dashboard_address="127.0.0.1:0",
                        silence_logs=logging.CRITICAL,
                    )
                self._client = Client(self._cluster, set_as_default=False)
            else:
                self._client = _connect(scheduler)
            self.workers = max(1, len(self._client.scheduler_info().get("workers", {})))
            _check_faultline_on_workers(self._client, self._where, scheduler)
            self._context = self._client.scatter(context, broadcast=True)
        except BaseException as exc:
            self.close()
            if isinstance(exc, Exception):
                self._reraise(exc)
            raise

    def _reraise(self, exc: Exception) -> NoReturn:
        """Raise ``exc`` as the command line should report it: the cluster's failures exit 3.

        Called in an ``except`` block: bad input found by a worker, or a bug, goes on as it is.
        A worker that cannot import faultline (or a module of it: another version) is the
        cluster's failure too.
        """
        from concurrent.futures import CancelledError

        from distributed.scheduler import KilledWorker

        if isinstance(exc, FaultlineError):
            raise exc
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, ImportError) or _REMOTE_IMPORT_FAILURE.match(reason):
            raise TargetError(
                _cannot_import(f"{self._where}: {reason}"), target=self._scheduler
            ) from exc
        if not isinstance(exc, OSError | TimeoutError | CancelledError | KilledWorker):
            raise exc
        raise TargetError(f"{self._where} failed: {reason}", target=self._scheduler) from exc

    def scan(self, pieces: Iterable[Piece]) -> Iterator[tuple[set[str | None], int] | None]:
        return self._ordered((batch.scan, (p,)) for p in pieces)

    def score(self, pieces: Iterable[Piece], layout: Layout) -> Iterator[BatchResult]:
        return self._ordered(
            (batch.score_piece, (i, p, layout, self._context)) for i, p in enumerate(pieces)
        )

    def _ordered(self, calls: Iterable[tuple[Any, tuple[Any, ...]]]) -> Iterator[Any]:
        results = _in_order(
            lambda fn, args: self._client.submit(fn, *args, pure=False), calls, self.workers
        )
        try:
            yield from results
        except Exception as exc:
            self._reraise(exc)

    def close(self) -> None:
        try:
            if self._client is not None:
                self._client.close()
            if self._cluster is not None:
                self._cluster.close()
        finally:
            self._quiet.close()


def _connect(scheduler: str) -> Any:
    """A client of the scheduler at ``scheduler``, once it has answered as a Dask scheduler.

    Raises:
        UsageError: ``scheduler`` is not an address.
        TargetError: Nothing answers there within :func:`scheduler_timeout` seconds, or what
            answers is not a Dask scheduler.
    """
    from distributed import Client
    from distributed.comm.addressing import get_address_host_port

    try:
        if not isinstance(scheduler, str):
            raise TypeError(f"an address is a string, not {type(scheduler).__name__}")
        get_address_host_port(scheduler)
    except (ValueError, TypeError) as exc:  # not an address at all
        raise UsageError(
            f"--scheduler: got {scheduler!r}, expected the address of a Dask scheduler "
            f"such as tcp://10.0.0.5:8786 ({exc})"
        ) from None
    timeout = scheduler_timeout()
    _identify_scheduler(scheduler, timeout)
    try:
        return Client(scheduler, timeout=timeout, set_as_default=False)
    except Exception as exc:
        raise TargetError(
            f"cannot connect to the Dask scheduler at {scheduler}: {_describe(exc)}",
            target=scheduler,
        ) from None


def _identify_scheduler(address: str, timeout: float) -> None:
    """Ask ``address`` who it is, within ``timeout`` seconds for connecting and answering.

    distributed's own connect has a deadline for connecting but none for the answer: a
    service that accepts the connection and says nothing would hold the run for ever. This
    asks on an event loop of its own, in a thread, so it works whether or not the caller
    runs one.

    Raises:
        TargetError: Nothing answers, or what answers is not a Dask scheduler.
    """
    from distributed.comm.core import CommClosedError

    outcome: list[Any] = []

    def ask() -> None:
        try:
            # A moment past the connecting deadline, so that a refused or unreachable
            # address is reported as such, with distributed's reason.
            waited = asyncio.wait_for(_identity(address, timeout), timeout + _GRACE)
            outcome.append(asyncio.run(waited))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    asker = threading.Thread(target=ask, name="faultline-scheduler-check", daemon=True)
    asker.start()
    asker.join(timeout + 5)  # the deadline is the coroutine's: this only guards against a bug
    answer = outcome[0] if outcome else TimeoutError()
    not_dask = f"{address} did not answer as a Dask scheduler"
    if isinstance(answer, TimeoutError):
        reason = f"{not_dask} within {timeout:g} s ({SCHEDULER_TIMEOUT_VARIABLE} sets the wait)"
    elif isinstance(answer, CommClosedError):
        reason = f"{not_dask}: it closed the connection ({answer})"
    elif isinstance(answer, OSError):
        reason = f"cannot reach the Dask scheduler at {address}: {answer}"
    elif isinstance(answer, BaseException):
        if not isinstance(answer, Exception):
            raise answer
        # A web server's "HTTP/1.1" read as a frame length is a MemoryError, for one.
        reason = f"{not_dask}: what it sent back is not the Dask protocol ({type(answer).__name__})"
    elif not isinstance(answer, dict) or not isinstance(answer.get("type"), str):
        reason = f"{not_dask}: its answer is not a Dask server's"
    elif answer["type"] in {"Worker", "Nanny"}:
        reason = f"{not_dask}: it is a Dask {answer['type'].lower()}; give the scheduler's address"
    else:
        return
    raise TargetError(reason, target=address)


async def _identity(address: str, timeout: float) -> Any:
    """What the Dask server at ``address`` says it is (its ``identity``)."""
    from distributed.comm import connect
    from distributed.security import Security

    comm = await connect(address, timeout=timeout, **Security().get_connection_args("client"))
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


def _check_faultline_on_workers(client: Any, where: str, scheduler: str | None) -> None:
    """Check that every worker imports the faultline version of this process.

    Raises:
        TargetError: A worker cannot import faultline, or has another version.
    """

    def version() -> tuple[str | None, str]:  # sent by value: the worker may lack faultline
        try:
            from faultline._version import __version__ as found
        except ImportError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        return found, ""

    answers: dict[str, tuple[str | None, str]] = client.run(version)
    wrong = {w: a for w, a in sorted(answers.items()) if a[0] != __version__}
    if not wrong:
        return
    worker, (found, error) = next(iter(wrong.items()))
    what = error if found is None else f"it has faultline {found}"
    others = f" and {len(wrong) - 1} other worker(s)" if len(wrong) > 1 else ""
    raise TargetError(_cannot_import(f"{where}, worker {worker}{others}: {what}"), target=scheduler)


def _cannot_import(detail: str) -> str:
    return (
        f"the Dask workers cannot import faultline {__version__} ({detail}); install the "
        "same faultline version on every worker"
    )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: The loggers a Dask run quiets: distributed's, and those of the event loop it runs on (a
#: LocalCluster's scheduler runs in this process, and its tasks can fail as it stops).
_DASK_LOGGERS = ("distributed", "tornado", "asyncio")


@contextlib.contextmanager
def _quiet_distributed() -> Iterator[None]:
    """Let Dask's loggers print only CRITICAL records; restore their levels after."""
    loggers = [logging.getLogger(root) for root in _DASK_LOGGERS] + [
        logger
        for name, logger in list(logging.Logger.manager.loggerDict.items())
        if name.split(".")[0] in _DASK_LOGGERS
        and "." in name
        and isinstance(logger, logging.Logger)
    ]
    levels = [(logger, logger.level) for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.CRITICAL))
    try:
        yield
    finally:
        for logger, level in levels:
            logger.setLevel(level)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore Ctrl-C while worker processes start, so that they ignore it for good.

    An ignored signal stays ignored in the processes started meanwhile, through ``exec``,
    and Python then installs no KeyboardInterrupt handler: the LocalCluster's workers ignore
    Ctrl-C from their first instruction, like the local pool's (:func:`_init_worker`), and
    the parent stops them. The cost: a Ctrl-C in the second or two the cluster takes to
    start is lost. Outside the main thread, where handlers cannot be set, nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.getsignal(signal.SIGINT)
    if old is None:  # set outside Python: it could not be put back
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
