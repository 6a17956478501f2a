"""Answers written in their probe's disguise, read with the disguise undone.

A model asked in base64, ROT13, leetspeak or homoglyphs (docs/probes.md, "Attack
transforms") may answer in the same disguise, and the rules, which read plain text, would
find nothing in it. :func:`undone_readings` gives, for an answer to such a variant, the
answer as it reads with the disguise undone; the scorer scores those readings too and keeps
the riskier verdict (:meth:`~faultline.scoring.scorer.Scorer.score_batch`).

Every span of a reading maps back to a span of the answer as written
(:meth:`Reading.span`), so evidence always quotes the response itself:

* ROT13, leetspeak and homoglyphs are undone character for character (each code point
  becomes one code point), so a span of the reading is the same span of the answer.
  Leetspeak is undone by reading each of its digits as the letter it stands for (``4`` as
  ``a``, ``3`` as ``e``, ``1`` as ``i``, ``0`` as ``o``, ``5`` as ``s``, ``7`` as ``t``): digits
  that were digits become letters too, which is why the plain reading is always scored
  as well.
* Base64 is undone run by run: each run of at least :data:`MIN_BASE64_CHARS` base64
  characters (line breaks allowed inside, ``=`` padding optional) that decodes to UTF-8 text
  is decoded; the reading is the decoded runs, a blank line between two, and a span in a
  decoded run maps to the whole run it was decoded from.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass

from faultline._util.text import blank
from faultline.probes.model import Probe
from faultline.probes.transforms import HOMOGLYPHS, LEETSPEAK, transform_lineage

__all__ = ["DISGUISES", "MIN_BASE64_CHARS", "Reading", "undone_readings"]

DISGUISES: dict[str, str] = {
    "base64": "base64",
    "rot13": "ROT13",
    "leetspeak": "leetspeak",
    "homoglyph": "homoglyph",
}
"""The transforms whose disguise an answer may be written in, and how a sentence names it."""

MIN_BASE64_CHARS = 16
"""The shortest run of base64 characters read as base64 (12 bytes): shorter runs are words."""

_ROT13 = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
)
# Each digit leetspeak writes, read as the lower-case letter it stands for.
_LEET = str.maketrans({digit: letter for letter, digit in LEETSPEAK.items() if letter.islower()})
_HOMOGLYPHS = str.maketrans({glyph: letter for letter, glyph in HOMOGLYPHS.items()})
_TABLES: dict[str, Mapping[int, int | str | None]] = {
    "rot13": _ROT13,
    "leetspeak": _LEET,
    "homoglyph": _HOMOGLYPHS,
}
_MANY_TO_ONE = ("leetspeak", "homoglyph")  # their tables read two characters as one letter
_BASE64_RUN = re.compile(
    r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]+(?:\r?\n[A-Za-z0-9+/]+)*={0,2}(?![A-Za-z0-9+/=])"
)
_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class Reading:
    """An answer read with its disguise undone.

    Attributes:
        text: What the answer says with the disguise undone.
        disguise: The transform undone (a key of :data:`DISGUISES`).
        runs: For base64, ``(start in text, end in text, start, end)`` of each decoded run:
            where it is in ``text`` and in the answer; empty for a disguise undone character
            for character.
    """

    text: str
    disguise: str
    runs: tuple[tuple[int, int, int, int], ...] = ()

    @property
    def named(self) -> str:
        """The disguise as a sentence names it: ``ROT13``, ``homoglyph``."""
        return DISGUISES[self.disguise]

    def canary(self, canary: str) -> str:
        """``canary`` as it reads in this reading's text.

        Leetspeak and homoglyphs are undone many to one (``4`` and ``a`` both read ``a``), so a
        canary is read through the same table: ``FAKE-PASS-7731`` reads ``FAKE-PASS-ttei``, as
        ``F4K3-P455-7731`` and the canary itself do. ROT13 and base64 are undone one to one, so
        their readings hold the canary as written.
        """
        if self.disguise in _MANY_TO_ONE:
            return canary.translate(_TABLES[self.disguise])
        return canary

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the answer that ``text[start:end]`` was read from."""
        if not self.runs:
            return start, end
        starts = [run[0] for run in self.runs]
        first = self.runs[max(0, bisect.bisect_right(starts, start) - 1)]
        last = self.runs[max(0, bisect.bisect_right(starts, max(start, end - 1)) - 1)]
        return first[2], last[3]


def undone_readings(probe: Probe, response: str) -> list[Reading]:
    """The readings of ``response`` with each disguise of ``probe``'s transforms undone.

    Empty for an original probe, for a transform that is no disguise of the answer (role-play,
    personas ...), and when undoing changes nothing (a plain-text answer to a homoglyph
    variant) or leaves nothing to read.
    """
    lineage = transform_lineage(probe)
    if lineage is None:
        return []
    readings = []
    for name in dict.fromkeys(lineage[1].split("+")):
        if name not in DISGUISES:
            continue
        reading = _base64(response) if name == "base64" else _undone(response, name)
        if reading is not None and not blank(reading.text):
            readings.append(reading)
    return readings


def _undone(response: str, name: str) -> Reading | None:
    text = response.translate(_TABLES[name])
    return None if text == response else Reading(text, name)


def _base64(response: str) -> Reading | None:
    parts: list[str] = []
    runs: list[tuple[int, int, int, int]] = []
    at = 0
    for match in _BASE64_RUN.finditer(response):
        decoded = _decoded(match.group())
        if decoded is None:
            continue
        if parts:
            parts.append(_SEPARATOR)
            at += len(_SEPARATOR)
        parts.append(decoded)
        runs.append((at, at + len(decoded), match.start(), match.end()))
        at += len(decoded)
    return Reading("".join(parts), "base64", tuple(runs)) if runs else None


def _decoded(run: str) -> str | None:
    """The UTF-8 text ``run`` encodes, or ``None`` when it encodes none."""
    packed = "".join(run.split())
    body = packed.rstrip("=")
    if len(body) < MIN_BASE64_CHARS or len(body) % 4 == 1:
        return None
    try:
        data = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        text = data.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    if not all(ch.isprintable() or ch in "\t\n\r" for ch in text):
        return None
    return text
