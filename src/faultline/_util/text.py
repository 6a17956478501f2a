"""Small text helpers: suggestions for typos, one-line excerpts, control characters shown."""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable

__all__ = [
    "blank",
    "describe_value",
    "did_you_mean",
    "excerpt",
    "one_of",
    "short_id",
    "shown_value",
    "visible",
    "well_formed",
]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``"; did you mean 'x'?"`` for the closest choice, or ``""`` when none is close.

    Args:
        word: What the user wrote.
        choices: The valid names.
    """
    by_lower = {c.lower(): c for c in sorted(choices, reverse=True)}  # the first one wins
    if (same := by_lower.get(word.lower())) is not None:  # BASE64 for base64
        return f"; did you mean '{same}'?"
    close = difflib.get_close_matches(word.lower(), sorted(by_lower), n=1, cutoff=0.6)
    return f"; did you mean '{by_lower[close[0]]}'?" if close else ""


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
    return flat[: _cluster_start(flat, limit - 1)].rstrip() + "…"


# What continues the character before it: a joiner, a variation selector, a skin tone, a tag
# (the letters of a subdivision flag), and combining marks (below).
_CONTINUES = re.compile(
    "[\u200d\ufe00-\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f\U000e0100-\U000e01ef]"
)
_REGIONAL = re.compile("[\U0001f1e6-\U0001f1ff]")  # two of them are one flag


def _cluster_start(text: str, cut: int) -> int:
    """``cut`` moved back to the start of the user-perceived character it falls inside.

    A cut between a letter and its accent, inside an emoji joined with U+200D (a family) or
    between the two letters of a flag would show another character than the text holds. When
    moving back would leave nothing, ``cut`` is kept.
    """
    at = cut
    while 0 < at < len(text):
        char, before = text[at], text[at - 1]
        if (
            _CONTINUES.match(char)
            or before == "\u200d"
            or unicodedata.category(char) in ("Mn", "Mc", "Me")
            or (_REGIONAL.match(char) and _regional_run(text, at) % 2 == 1)
        ):
            at -= 1
            continue
        break
    return at or cut


def _regional_run(text: str, end: int) -> int:
    """How many regional indicator letters come just before ``end``."""
    start = end
    while start > 0 and _REGIONAL.match(text[start - 1]):
        start -= 1
    return end - start


def short_id(case_id: str, limit: int = 60) -> str:
    r"""A case id for a table cell: cut in its middle, so that it keeps its end.

    What tells a probe's cases apart is at the end of their ids: ``#sample@model``, and
    often the end of the probe id (``variant-0042``). A long id keeps its start and its end,
    ``…`` between them: ``jailbreak-dan-person…extraction-variant-0042#0@claude-sonnet``.
    The end is at least two thirds of ``limit``, and all of ``#sample@model`` when that
    leaves a sixth for the start. Control characters are shown as escapes (:func:`visible`,
    ``\x1b``) before the cut, and whitespace is collapsed as :func:`excerpt` does; a short
    id is only that.

    Args:
        case_id: The id, as report.json holds it.
        limit: The largest length of the result (at least 2).
    """
    flat = " ".join(visible(case_id).split())
    if len(flat) <= limit:
        return flat
    room = limit - 1  # and the ellipsis
    tail = room * 2 // 3
    if "#" in flat:  # the first # ends the probe id (a # in it is written %23)
        tail = max(tail, min(len(flat) - flat.index("#"), room * 5 // 6))
    return flat[: room - tail].rstrip() + "…" + flat[len(flat) - tail :].lstrip()


# C0 controls but tab, line feed and carriage return; DEL and the C1 controls; the characters
# that reorder or hide text (bidirectional embeddings, overrides and isolates, the zero-width
# space, the BOM): a terminal runs escape sequences, and a reader is shown text in another
# order than it is written. Joiners and direction marks stay: emoji and right-to-left scripts
# need them.
_BEYOND_C0 = "\x7f-\x9f\u200b\u202a-\u202e\u2066-\u2069\ufeff"
_HIDDEN = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{_BEYOND_C0}]")
# The same and tab, line feed and carriage return, for one-line names.
_HIDDEN_INLINE = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")


def visible(text: str, *, one_line: bool = False) -> str:
    r"""Show the control characters of untrusted ``text`` as escapes (``\x1b``, ``\u202e``).

    For text that reaches a terminal or a Markdown file: an ESC would run as a terminal
    escape sequence, NUL makes tools read the file as binary, and a right-to-left override
    makes the text read in another order than it is written. Tabs and line breaks are kept,
    unless ``one_line``: for a name from the data (a category, a model, an id), where a
    carriage return would print the rest of the line over its start.
    """
    return (_HIDDEN_INLINE if one_line else _HIDDEN).sub(_escape_char, text)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
    kinds = {
        list: "a list",
        tuple: "a list",
        dict: "a mapping",
        bytes: "binary data",
        bytearray: "binary data",
    }
    name = type(value).__name__
    return next(
        (name for kind, name in kinds.items() if isinstance(value, kind)),
        f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}",
    )


def shown_value(value: object) -> str:
    """A bad value for a message: a string quoted, anything else described (never expanded)."""
    return repr(value) if isinstance(value, str) else describe_value(value)


def well_formed(text: str) -> str:
    r"""``text`` as valid Unicode: each lone surrogate replaced by U+FFFD.

    A Python string may hold lone surrogates (``surrogateescape`` decoding leaves them for
    bytes that are not UTF-8; a JSON ``"\ud800"`` makes one), which no UTF-8 file or SQLite
    text can store. A correctly paired surrogate is joined into its character.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


# Characters that print as nothing but are neither whitespace nor a format character: the
# Mongolian vowel separator, the Hangul fillers, the Braille blank, the variation selectors.
_BLANK_MARKS = frozenset(
    "\u180e\u115f\u1160\u3164\uffa0\u2800" + "".join(map(chr, range(0xFE00, 0xFE10)))
)


def blank(text: str) -> bool:
    """Whether ``text`` shows nothing: whitespace, control and format characters only.

    ``str.strip`` leaves the zero-width space, the joiners, the word joiner, the soft hyphen
    and the BOM (format characters, ``Cf``), so an answer of U+200B alone is not empty to it,
    yet a reader sees none. Stops at the first visible character, which is almost always the
    first.
    """
    return all(
        char.isspace() or char in _BLANK_MARKS or unicodedata.category(char) in ("Cc", "Cf")
        for char in text
    )
