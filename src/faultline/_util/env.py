"""Settings read from environment variables."""

from __future__ import annotations

import math
import os

from faultline.errors import UsageError

__all__ = ["env_seconds"]


def env_seconds(variable: str, default: float, *, zero: str | None = None) -> float:
    """Seconds from ``variable``: ``default`` when it is unset or empty.

    Args:
        variable: The environment variable.
        default: The seconds when it is unset or empty.
        zero: What 0 means, when 0 is allowed ("a line at every case"); ``None``: it is not.

    Raises:
        UsageError: The variable is not a finite number of seconds in range, naming it.
    """
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and (seconds > 0 or (zero is not None and seconds == 0))):
        allowed = "above 0" if zero is None else f"of 0 or more (0: {zero})"
        raise UsageError(
            f"{variable}={text!r} is not a number of seconds; give a finite number {allowed}, "
            "or unset it"
        )
    return seconds
