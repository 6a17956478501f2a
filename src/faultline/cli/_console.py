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

from faultline._util.env import env_seconds
from faultline._util.text import visible

if TYPE_CHECKING:
    from faultline.pipeline import ProgressCallback
    from faultline.runner import RunProgress

__all__ = [
    "echo",
    "err",
    "out",
    "output_width",
    "progress",
    "progress_seconds",
    "run_progress",
    "shown",
]


def shown(text: str, style: str = "", *, one_line: bool = False) -> Text:
    """Text from the data (a model name, a case id, a category) as it may be printed.

    Never markup, and its control characters shown as escapes: an ESC from a responses file
    would otherwise run as a terminal escape sequence. ``one_line`` escapes line breaks and
    tabs too, for a name that is one cell or one line.
    """
    return Text(visible(text, one_line=one_line), style=style)


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


#: The output's width when it is not a terminal, unless ``COLUMNS`` gives one.
DEFAULT_WIDTH = 100

#: The variable that sets the seconds between a run's progress lines off a terminal.
PROGRESS_SECONDS_VARIABLE = "FAULTLINE_PROGRESS_SECONDS"

#: Seconds between a run's progress lines off a terminal, unless the variable says otherwise.
DEFAULT_PROGRESS_SECONDS = 10.0


def output_width() -> int | None:
    """The width to lay the output out in: ``None`` on a terminal (rich measures it).

    Otherwise ``COLUMNS`` when it is a whole number above 0, else :data:`DEFAULT_WIDTH`: an
    empty, malformed, zero or negative ``COLUMNS`` is ignored, as most tools do (a width of
    0 would drop every line).
    """
    if sys.stdout is not None and sys.stdout.isatty():
        return None
    text = os.environ.get("COLUMNS", "").strip()
    columns = int(text) if text.isascii() and text.isdigit() else 0
    return columns if columns > 0 else DEFAULT_WIDTH


def progress_seconds() -> float:
    """Seconds between a run's progress lines: ``FAULTLINE_PROGRESS_SECONDS``, default 10.

    Unset or empty gives the default; 0 prints a line at every recorded case.

    Raises:
        UsageError: The variable is not a finite number of 0 or more.
    """
    return env_seconds(
        PROGRESS_SECONDS_VARIABLE, DEFAULT_PROGRESS_SECONDS, zero="a line at every case"
    )


_width = output_width()
out = _Console(highlight=False, width=_width, soft_wrap=False)
# Messages are never wrapped: they quote the data (an id, a value, a path), and where a line
# wraps, spaces in a quoted value would start a line of the log with what the data says
# ("gate ... held"). A long message is one line; a terminal folds it for the eye.
err = _Console(stderr=True, highlight=False, width=_width, soft_wrap=True)


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
def run_progress(label: str, every: float) -> Iterator[Callable[[RunProgress], None]]:
    """Progress of a run's requests on stderr.

    On a terminal, a bar with done / total, rate, ETA, errors and retries; otherwise a plain
    line every ``every`` seconds (see :func:`progress_seconds`), and one at the end.
    """
    if err.is_terminal:
        with _run_bar(label) as update:
            yield update
        return
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
