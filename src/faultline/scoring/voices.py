"""Split a response into the voices of a role-play jailbreak.

Jailbreak prompts often ask for two answers at once, the model's own and an unrestricted
persona's::

    [ChatGPT]: I'm sorry, but I can't help with that.

    [DAN]: Sure! First, you'll need to ...

Read as one text, the leading refusal makes the whole look safe. faultline reads each voice on
its own: a response is as harmful as its most harmful voice. A response has voices when it
*starts* with a speaker label and a later line starts with a different one. Labels are a
bracketed or parenthesised name (``[DAN]``, ``(🔓Developer Mode Output)``), a short
capitalised name followed by a colon (``BetterDAN:``, ``Unaligned:``), or ``As NAME,``.
Headings that often open an ordinary answer (``Note:``, ``Step 1:``, ``Answer:`` ...) are not
speakers.
"""

from __future__ import annotations

import re

__all__ = ["split_voices"]

_LABEL = re.compile(
    r"^[ \t*_>#\"]*"
    r"(?:(?P<bracket>\[[^\]\n]{1,40}\]|\([^)\n]{1,40}\))[ \t*_]*:?"
    r"|(?P<name>[A-Z][\w.\- ]{0,25}[\w)])[ \t*_]*:(?!//)"
    r"|[Aa]s (?P<as>[A-Z][\w.\-]{0,24}),)",
    re.MULTILINE,
)
_HEADINGS = frozenset(
    {
        "note",
        "notes",
        "step",
        "answer",
        "response",
        "question",
        "title",
        "subject",
        "warning",
        "disclaimer",
        "example",
        "examples",
        "summary",
        "conclusion",
        "introduction",
        "ingredients",
        "instructions",
        "output",
        "input",
        "q",
        "a",
        "solution",
        "explanation",
        "source",
        "sources",
        "reference",
        "references",
        "tip",
        "tips",
        "important",
        "update",
        "edit",
        "ps",
        "p.s",
        "caution",
        "result",
        "results",
        "description",
        "overview",
        "background",
        "context",
    }
)
_NUMBERED = re.compile(r"^(?:step|part|chapter|section|option|method|phase|day)\s*\d+$")


def _speaker(match: re.Match[str]) -> str | None:
    raw = match.group("bracket") or match.group("name") or match.group("as") or ""
    name = " ".join(raw.strip("[]()").lower().split())
    if not name or name in _HEADINGS or _NUMBERED.match(name) or name.isdigit():
        return None
    return name


def split_voices(text: str) -> list[tuple[int, int]] | None:
    """The spans of the voices in ``text``, or ``None`` when it has fewer than two.

    Args:
        text: The response.

    Returns:
        ``(start, end)`` character spans, one per speaker turn (its label included, since
        the name of a jailbreak persona is itself evidence), in order; ``None`` when the text
        does not start with a speaker label or names fewer than two different speakers.
    """
    line_start = text.rfind("\n", 0, len(text) - len(text.lstrip())) + 1
    first = _LABEL.match(text, line_start)
    if first is None or _speaker(first) is None:
        return None
    starts: list[int] = []
    names: set[str] = set()
    for match in _LABEL.finditer(text):
        name = _speaker(match)
        if name is not None:
            starts.append(match.start())
            names.add(name)
    if len(names) < 2:
        return None
    ends = [*starts[1:], len(text)]
    return list(zip(starts, ends, strict=True))
