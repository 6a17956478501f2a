"""Compile a rule pack into RE2 multi-pattern sets and find every rule a response triggers.

One pass of an ``re2.Set`` over the response returns every pattern that matches anywhere;
spans are then computed only for the rules that hit, so the cost of a pack grows with the
number of hits, not the number of rules. RE2 runs in time linear in the text for every
pattern, so no rule (ours or a user's) can hang a run.

Scopes are compiled into the patterns: ``sentence`` rules get a prefix that only matches at
the start of the text, of a line or of a sentence; ``opening`` rules run in a second set over
the response's opening characters only.
"""

from __future__ import annotations

from dataclasses import dataclass

import re2

from faultline.scoring.rules import RulePack

__all__ = ["SENTENCE_START", "Hit", "Matcher"]

SENTENCE_START = (
    r"(?:\A|\n|[.!?;:…][\"'’”)\]*_]*[ \t]+"  # start of text, of a line, or after a sentence
    r"|,[ \t]*(?:but|however|though|yet|unfortunately|sadly|regrettably|so)[ \t,]+)"  # or a contrast
    r"[ \t>*#_\"“'‘(\[\-–•]*"  # list bullets, quotes and emphasis that may open it
)
"""The prefix that anchors a ``sentence``-scope rule."""

_MAX_MEM = 256 << 20  # RE2's DFA budget; a Set that outgrows it would silently miss matches.


@dataclass(frozen=True, slots=True)
class Hit:
    """The first occurrence of one rule in a response.

    Attributes:
        rule: The rule's index in the pack.
        start: Character offset where the evidence starts.
        end: Character offset just past the evidence.
    """

    rule: int
    start: int
    end: int


class Matcher:
    """A rule pack compiled for matching.

    Args:
        pack: The rules to compile.
    """

    def __init__(self, pack: RulePack) -> None:
        self.pack = pack
        self.opening_chars = pack.scoring.opening_chars
        options = re2.Options()
        options.max_mem = _MAX_MEM
        self._options = options
        self._main = re2.Set.SearchSet(options)
        self._opening = re2.Set.SearchSet(options)
        self._main_ids: list[tuple[int, object]] = []
        self._opening_ids: list[tuple[int, object]] = []
        for index, rule in enumerate(pack.rules):
            flags = "" if rule.case_sensitive else "(?i)"
            prefix = SENTENCE_START if rule.scope == "sentence" else ""
            for pattern in rule.patterns:
                full = f"{flags}{prefix}({pattern})"
                target, ids = (
                    (self._opening, self._opening_ids)
                    if rule.scope == "opening"
                    else (self._main, self._main_ids)
                )
                target.Add(full)
                ids.append((index, re2.compile(full, options)))
        self._has_opening = bool(self._opening_ids)
        if self._main_ids:
            self._main.Compile()
        if self._has_opening:
            self._opening.Compile()

    def match(self, text: str) -> list[Hit]:
        """Find every rule that matches ``text``, with the span of its first occurrence.

        Args:
            text: The response.

        Returns:
            One hit per matching rule, ordered by position in the text, then rule index.
        """
        data = text.encode("utf-8", "surrogatepass")
        is_ascii = len(data) == len(text)
        best: dict[int, tuple[int, int]] = {}
        if self._main_ids:
            for pid in self._main.Match(data) or ():
                self._record(best, self._main_ids[pid], data)
        if self._has_opening:
            head = (
                data
                if len(text) <= self.opening_chars
                else text[: self.opening_chars].encode("utf-8", "surrogatepass")
            )
            for pid in self._opening.Match(head) or ():
                self._record(best, self._opening_ids[pid], head)
        hits = [Hit(rule, *_to_chars(data, span, is_ascii)) for rule, span in best.items()]
        hits.sort(key=lambda h: (h.start, h.rule))
        return hits

    def search_after(self, text: str, rule: int, char_pos: int) -> Hit | None:
        """The first occurrence of ``rule`` that starts at or after ``char_pos``, if any.

        Args:
            text: The response.
            rule: The rule's index in the pack.
            char_pos: Where to start looking, in characters.
        """
        if self.pack.rules[rule].scope == "opening" and char_pos >= self.opening_chars:
            return None
        tail = text[char_pos:]
        data = tail.encode("utf-8", "surrogatepass")
        found: dict[int, tuple[int, int]] = {}
        for index, regex in self._main_ids + self._opening_ids:
            if index == rule:
                self._record(found, (index, regex), data)
        if rule not in found:
            return None
        start, end = _to_chars(data, found[rule], len(data) == len(tail))
        return Hit(rule, start + char_pos, end + char_pos)

    @staticmethod
    def _record(best: dict[int, tuple[int, int]], entry: tuple[int, object], data: bytes) -> None:
        index, regex = entry
        found = regex.search(data)  # type: ignore[attr-defined]
        if found is None:
            return
        span: tuple[int, int] = found.span(1)
        if index not in best or span < best[index]:
            best[index] = span


def _to_chars(data: bytes, span: tuple[int, int], is_ascii: bool) -> tuple[int, int]:
    if is_ascii:
        return span
    return _char_len(data[: span[0]]), _char_len(data[: span[1]])


def _char_len(prefix: bytes) -> int:
    try:
        return len(prefix.decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError:  # a match edge inside an ill-formed sequence
        return len(prefix.decode("utf-8", "replace"))
