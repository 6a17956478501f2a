"""The command line: a thin click app, one module per command.

Each command parses its options, calls the Python API, renders the result and returns an
exit code: 0 success, 1 a gate failed, 2 bad usage or input, 3 the target or another
outside service failed, 4 an internal error (with the traceback), 130 interrupted.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import traceback
from collections.abc import Iterator, Sequence
from types import FrameType

import click

from faultline._version import __version__
from faultline.errors import FaultlineError

__all__ = ["app", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="faultline")
def app() -> None:
    """faultline: find where language models fail on safety.

    Scores model answers with transparent rules (every verdict explained, with evidence),
    measures the run, and maps the failure geometry. Offline and deterministic by default.
    """


def _register() -> None:
    from faultline.cli.calibrate import calibrate_command
    from faultline.cli.compare import compare_command
    from faultline.cli.demo import demo_command
    from faultline.cli.probes import probes_group
    from faultline.cli.report import report_command
    from faultline.cli.rules import rules_group
    from faultline.cli.run import run_command
    from faultline.cli.score import score_command

    commands = (
        score_command,
        run_command,
        report_command,
        compare_command,
        demo_command,
        calibrate_command,
        probes_group,
        rules_group,
    )
    for command in commands:
        app.add_command(command)


_register()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code.

    This is the process's entry point: once a command has been interrupted, it leaves SIGINT
    and SIGTERM ignored, so that the exit code stays 130 while the process winds down.
    """
    try:
        with _terminate_interrupts():
            try:
                result = app.main(
                    args=list(argv) if argv is not None else None,
                    prog_name="faultline",
                    standalone_mode=False,
                )
            except KeyboardInterrupt:
                code = _failed(click.exceptions.Abort())
            except Exception as exc:  # the CLI's top level: every error becomes an exit code
                code = _failed(exc)
            else:
                code = result if isinstance(result, int) else 0
            if code == 130:
                _ignore_interrupts()
    except KeyboardInterrupt:  # a second Ctrl-C while the first was being reported
        _ignore_interrupts()
        code = 130
    return code


class _Stopping:
    """Where the command stands with interrupts."""

    terminating = False  # a SIGTERM is being handled: the command is stopping
    ignoring = False  # the command was interrupted: interrupts are ignored until exit


_stopping = _Stopping()


@contextlib.contextmanager
def _terminate_interrupts() -> Iterator[None]:
    """Handle SIGTERM as Ctrl-C while a command runs.

    SIGTERM is what a cancelled CI job, ``timeout``, ``docker stop`` and Kubernetes send: the
    command stops the same way as on Ctrl-C (what was recorded is committed, a message, exit
    130) instead of dying with 143 and nothing said. A supervisor may send it again (``timeout``
    and the CI runner both, ``docker stop`` retrying): once the command is stopping, a further
    SIGTERM is ignored, and so is every one after an interrupted command, until the process
    has exited with 130.
    """
    _stopping.terminating = _stopping.ignoring = False
    try:
        previous = signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    finally:
        if not _stopping.ignoring:
            signal.signal(signal.SIGTERM, previous)


def _ignore_interrupts() -> None:
    """Ignore SIGINT and SIGTERM from now on: the process is exiting with 130."""
    _stopping.ignoring = True
    with contextlib.suppress(ValueError):  # not the main thread: not ours to change
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupt(_signum: int, frame: FrameType | None) -> None:
    """Do what SIGINT would: asyncio's handler cancels a run gracefully; else interrupt.

    Only the first SIGTERM does: the command is stopping already when another arrives.
    """
    if _stopping.terminating:
        return
    _stopping.terminating = True
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt  # SIGINT ignored (a background job): interrupt all the same


def _failed(exc: Exception) -> int:
    """Report an error the way its kind asks for, and return the exit code."""
    from rich.text import Text

    from faultline.cli._console import err, shown

    if isinstance(exc, click.exceptions.Exit):
        return exc.exit_code
    if isinstance(exc, click.exceptions.Abort):
        err.print("faultline: interrupted")
        return 130
    if isinstance(exc, click.ClickException):
        exc.show()
        return exc.exit_code
    message, code = None, 4
    if isinstance(exc, FaultlineError):
        message, code = str(exc), exc.exit_code
    elif isinstance(exc, OSError) and exc.filename is not None:  # a path the user gave
        message, code = _path_problem(exc), 2
    if message is None:  # an internal error, reported with its traceback
        err.print("faultline: internal error (please report it with the traceback below)")
        traceback.print_exception(exc, file=sys.stderr)
    else:
        err.print(Text.assemble(("faultline: error: ", "red"), shown(message)))
    return code


def _path_problem(exc: OSError) -> str:
    """A file system error on a path the user gave (an --out inside a file, no permission)."""
    where = str(exc.filename)
    if isinstance(exc, NotADirectoryError):
        reason = "part of this path is a file, not a directory"
    elif isinstance(exc, FileExistsError):
        reason = "a file is in the way of a directory"
    else:
        reason = (exc.strerror or type(exc).__name__).lower()
    return f"{where}: {reason}; expected a path faultline can read or write"
