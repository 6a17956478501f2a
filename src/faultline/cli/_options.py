"""Options shared by commands, and their parsing into configuration objects."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from faultline.errors import UsageError
from faultline.probes.model import SEVERITIES
from faultline.scoring.case import DEFAULT_SEVERITY_WEIGHTS, ScoringConfig

F = TypeVar("F", bound=Callable[..., Any])

#: A seed: what NumPy and scikit-learn take (0 to 2**32 - 1), checked where it is given.
SEED = click.IntRange(0, 2**32 - 1)


class FiniteFloat(click.FloatRange):
    """A finite number, within optional bounds, as every float option of the commands takes.

    click's ``FloatRange`` lets NaN through (every comparison with it is false), and the
    infinities when no bound stops them: ``--temperature nan`` was sent to the server, and
    ``--max-error-rate nan`` turned its gate off. Here they exit 2 naming the option, before
    any work.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


def non_empty(_ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A click callback refusing an empty path, glob or built-in name.

    An unset shell variable (``--responses "$ANSWERS"``) gives an empty value, which a path
    reads as the current directory: every responses file in it and below was scored, exit 0,
    and ``--out ""`` wrote the report there. Here it exits 2 naming the option (or the
    argument, each of whose values is checked).
    """
    values = value if isinstance(value, tuple) else (value,)
    if any(isinstance(v, str) and not v.strip() for v in values):
        raise click.BadParameter(
            "is empty; expected a path or a name (is a shell variable unset?)", param=param
        )
    return value


def warn_workers(workers: int | None) -> None:
    """Warn on stderr when ``--workers`` asks for more processes than this process has CPUs.

    Scoring is CPU-bound: past the CPUs the process may use (its affinity and its cgroup's
    quota), each extra worker adds its memory and the switching between them, and the run is
    slower (64 workers on 2 CPUs took about twice as long as 1). The reports are the same.
    """
    from faultline._util.cpus import usable_cpus

    if workers is None or workers <= (usable := usable_cpus()):
        return
    from rich.text import Text

    from faultline.cli._console import err

    err.print(
        Text.assemble(
            ("Warning: ", "yellow"),
            f"--workers {workers} is more than the {usable} CPU{'s' if usable > 1 else ''} this "
            "process may use; scoring is CPU-bound, so the extra workers only add memory and "
            "make the run slower.",
        )
    )


#: A pass threshold: a case passes when its risk score is below it.
PASS_THRESHOLD = FiniteFloat(0, 1, min_open=True)


def scoring_options(func: F) -> F:
    """Add the options that shape scoring and the report."""
    options = [
        click.option(
            "--rules",
            callback=non_empty,
            default="default",
            show_default=True,
            metavar="PACK",
            help="Rule pack: a built-in name or a YAML file.",
        ),
        click.option(
            "--rules-only",
            is_flag=True,
            help="Score with the rules alone, without the learned signal.",
        ),
        click.option(
            "--learned",
            callback=non_empty,
            default="default",
            show_default=True,
            metavar="MODEL",
            help="Learned signal: a built-in name or a model file from 'faultline calibrate --train'.",
        ),
        click.option(
            "--pass-threshold",
            type=PASS_THRESHOLD,
            default=0.5,
            show_default=True,
            help="A case passes when its risk score is below this.",
        ),
        click.option(
            "--severity-weights",
            default=None,
            metavar="low=W,medium=W,high=W,critical=W",
            help="Weights of the severity tiers, each above 0 and at most 1e6 "
            "(default low=0.5,medium=1,high=1.5,critical=2).",
        ),
        click.option(
            "--seed", type=SEED, default=0, show_default=True, help="Seed of the failure geometry."
        ),
        click.option(
            "--observability-min-cases",
            type=click.IntRange(min=1),
            default=5,
            show_default=True,
            help="The fewest scored cases for which the failure geometry is built.",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            default=None,
            help="Worker processes for scoring large inputs (default: one per CPU this process may "
            "use, counting its affinity and its container's CPU quota).",
        ),
        click.option(
            "--fail-on",
            "fail_on",
            multiple=True,
            metavar="GATE",
            help="Exit 1 when a gate trips, e.g. 'pass_rate<0.95' or 'high_stakes_failure_rate>0'. Repeatable.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def parse_config(
    pass_threshold: float,
    severity_weights: str | None,
    *,
    rules_only: bool = False,
    learned: str = "default",
) -> ScoringConfig:
    """Build the scoring configuration from command-line values.

    Raises:
        UsageError: A weight is malformed or a tier is missing, or ``--rules-only`` is given
            with another ``--learned`` model.
    """
    if rules_only and learned != "default":
        raise UsageError(
            "--rules-only turns the learned signal off; drop --learned or --rules-only"
        )
    weights = dict(DEFAULT_SEVERITY_WEIGHTS)
    if severity_weights:
        for part in severity_weights.split(","):
            tier, sep, value = part.partition("=")
            tier = tier.strip()
            if not sep or tier not in SEVERITIES:
                raise UsageError(
                    f"--severity-weights: {part.strip()!r} is not TIER=WEIGHT with TIER one of {', '.join(SEVERITIES)}"
                )
            try:
                weights[tier] = float(value)
            except ValueError:
                raise UsageError(
                    f"--severity-weights: weight {value.strip()!r} for {tier} is not a number"
                ) from None
            if not (math.isfinite(weights[tier]) and weights[tier] > 0):
                raise UsageError(
                    f"--severity-weights: weight {value.strip()!r} for {tier} is not a finite "
                    "number above 0"
                )
    return ScoringConfig(
        pass_threshold=pass_threshold,
        severity_weights=weights,
        learned=None if rules_only else learned,
    )


def body_fields(given: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``--body NAME=VALUE`` options as ``(name, JSON text)`` pairs, each name once."""
    from faultline.targets.base import BODY_RESERVED

    fields: dict[str, str] = {}
    for text in given:
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep or not name or any(c.isspace() for c in name):
            raise UsageError(f"--body: expected 'NAME=VALUE', got {text!r}")
        if name in BODY_RESERVED:
            raise UsageError(f"--body: faultline sets '{name}' itself ({BODY_RESERVED[name]})")
        if name in fields:
            raise UsageError(f"--body: '{name}' is given twice")
        sendable(name, "--body: the name")
        fields[name] = sendable(_json_value(name, value), f"--body {name}: the value")
    return tuple(fields.items())


def _json_value(name: str, value: str) -> str:
    """VALUE as JSON text: JSON as written, or a bare word as a string."""

    def finite(number: str) -> float:
        if not math.isfinite(float(number)):
            # JSON has no infinity: it was sent as null, and the report could not be written.
            raise UsageError(f"--body {name}: {number} is not a finite number")
        return float(number)

    try:
        decoded = json.loads(value, parse_constant=_no_constant, parse_float=finite)
        return json.dumps(decoded, ensure_ascii=False)
    except ValueError as exc:
        if value.strip()[:1] in ("{", "[", '"'):
            raise UsageError(
                f"--body {name}: the value is not valid JSON ({exc}); expected JSON, or a "
                "bare word for a string"
            ) from None
    return json.dumps(value, ensure_ascii=False)


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number")


def sendable(text: str, what: str) -> str:
    r"""``text``, if UTF-8 can encode it: a request cannot carry a lone surrogate.

    One comes from a byte the shell passed that is not UTF-8 (``--system $'caf\xe9'``), or a
    JSON escape such as ``"\ud800"``; every request failed to encode, then the report could
    not be written.

    Raises:
        UsageError: It holds one; ``what`` names the option.
    """
    bad = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        raise UsageError(
            f"{what} holds U+{ord(bad):04X}, which is not a character (a byte that is not "
            "UTF-8, or half of a surrogate pair) and cannot be sent; expected UTF-8 text"
        )
    return text
