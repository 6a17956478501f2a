"""The command line: a thin click app, one module per command.

Each command parses its options, calls the Python API, renders the result and returns an
exit code: 0 success, 1 a gate failed, 2 bad usage or input, 3 the target or another
outside service failed, 4 an internal error (with the traceback), 130 interrupted.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence

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
    """Run the command line and return its exit code."""
    from faultline.cli._console import err

    try:
        result = app.main(
            args=list(argv) if argv is not None else None,
            prog_name="faultline",
            standalone_mode=False,
        )
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        err.print("faultline: interrupted")
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except FaultlineError as exc:
        from rich.text import Text

        err.print(Text.assemble(("faultline: error: ", "red"), str(exc)))
        return exc.exit_code
    except Exception:  # the CLI's top level: an internal error, reported with its traceback
        err.print("faultline: internal error (please report it with the traceback below)")
        traceback.print_exc(file=sys.stderr)
        return 4
    return result if isinstance(result, int) else 0
