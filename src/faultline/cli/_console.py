"""The terminal: one console for results (stdout), one for messages (stderr), and progress."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text

from faultline._util.text import visible

if TYPE_CHECKING:
    from faultline.pipeline import ProgressCallback
    from faultline.runner import RunProgress

__all__ = ["echo", "err", "out", "progress", "run_progress", "shown"]


def shown(text: str, style: str = "") -> Text:
    """Text from the data (a model name, a case id, a category) as it may be printed.

    Never markup, and its control characters shown as escapes: an ESC from a responses file
    would otherwise run as a terminal escape sequence.
    """
    return Text(visible(text), style=style)


class _Console(Console):
    """A console that goes quiet when its reader leaves, and lets the command finish.

    ``faultline score … | head`` closes the pipe after a few lines. Rich's default exits 1
    there (the exit code of a tripped gate) in the middle of the command, possibly before
    the reports are written; and for stderr it silences stdout instead. Here the console
    stops writing (its descriptor goes to ``/dev/null``), the command runs to its end and
    exits with its own code.
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        silence(self.file)


def echo(text: str) -> None:
    """Print plain text (JSON for scripts) as it is: no markup, no wrapping; quiet once the reader left."""
    if sys.stdout is None:  # started with stdout closed (``faultline … >&-``)
        return
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        silence(sys.stdout)


def silence(stream: IO[str]) -> None:
    """Point a stream's descriptor at ``/dev/null``, so later writes (and the flush at exit) pass."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


_width = (
    None
    if sys.stdout is not None and sys.stdout.isatty()
    else int(os.environ.get("COLUMNS", "100"))
)
out = _Console(highlight=False, width=_width, soft_wrap=False)
err = _Console(stderr=True, highlight=False, width=_width)


@contextmanager
def progress(label: str) -> Iterator[ProgressCallback | None]:
    """A progress bar on stderr while scoring, when stderr is a terminal; else nothing."""
    if not err.is_terminal:
        yield None
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(stage: str, done: int, total: int) -> None:
            if stage == "score":
                bar.update(task, completed=done, total=total or None)
            else:
                bar.update(task, description="building report")

        yield update


@contextmanager
def run_progress(label: str) -> Iterator[Callable[[RunProgress], None]]:
    """Progress of a run's requests on stderr.

    On a terminal, a bar with done / total, rate, ETA, errors and retries; otherwise a plain
    line every ``FAULTLINE_PROGRESS_SECONDS`` seconds (default 10), and one at the end.
    """
    if err.is_terminal:
        with _run_bar(label) as update:
            yield update
        return
    every = float(os.environ.get("FAULTLINE_PROGRESS_SECONDS", "10"))
    last: list[RunProgress] = []
    shown = [time.monotonic()]

    def line(p: RunProgress) -> None:
        last[:] = [p]
        if time.monotonic() - shown[0] >= every:
            shown[0] = time.monotonic()
            err.print(_progress_line(label, p), highlight=False)

    yield line
    if last and last[0].total:
        err.print(_progress_line(label, last[0]), highlight=False)


def _progress_line(label: str, p: RunProgress) -> str:
    pct = 100 * p.done / p.total if p.total else 100.0
    rate = p.rate
    eta = f"{(p.total - p.done) / rate:.0f} s" if rate > 0 else "?"
    return (
        f"faultline: {label} {p.done:,}/{p.total:,} ({pct:.0f}%) · {rate:.1f}/s · ETA {eta} · "
        f"{p.errors:,} errors · {p.retries:,} retries · {p.cached:,} cached"
    )


@contextmanager
def _run_bar(label: str) -> Iterator[Callable[[RunProgress], None]]:
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        TextColumn("[red]{task.fields[errors]} errors[/] · {task.fields[retries]} retries"),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=None, rate="", errors=0, retries=0)
        shown = [0.0]

        def update(p: RunProgress) -> None:
            now = time.monotonic()
            if now - shown[0] < 0.1 and p.done < p.total:
                return
            shown[0] = now
            bar.update(
                task,
                completed=p.done,
                total=p.total,
                rate=f"{p.rate:.1f}/s",
                errors=p.errors,
                retries=p.retries,
            )

        yield update
