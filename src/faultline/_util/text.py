"""Small text helpers: suggestions for typos and one-line excerpts."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["describe_value", "did_you_mean", "excerpt", "one_of"]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``"; did you mean 'x'?"`` for the closest choice, or ``""`` when none is close.

    Args:
        word: What the user wrote.
        choices: The valid names.
    """
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def one_of(choices: Iterable[str]) -> str:
    """Format valid choices for a message: ``"one of a, b, c"``."""
    return "one of " + ", ".join(choices)


def excerpt(text: str, limit: int = 80) -> str:
    """Collapse whitespace and cut ``text`` to at most ``limit`` characters, marking the cut.

    Args:
        text: Any text, possibly multi-line.
        limit: The largest length of the result (at least 2).
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


def describe_value(value: object) -> str:
    """Describe a value's type in a user's words: ``a number (3)``, ``a list``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    kinds = {list: "a list", tuple: "a list", dict: "a mapping"}
    return next(
        (name for kind, name in kinds.items() if isinstance(value, kind)),
        f"a {type(value).__name__}",
    )
