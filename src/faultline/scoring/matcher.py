"""Compile a rule pack into RE2 multi-pattern sets and find every rule a response triggers.

One pass of each ``re2.Set`` over the response returns every pattern of the set that matches
anywhere; spans are then computed only for the patterns that hit, so the cost of a pack grows
with the number of hits, not the number of rules. RE2 runs in time linear in the text for
every pattern, so no rule (ours or a user's) can hang a run.

The patterns go into sets of at most :data:`SET_PATTERNS`, in pack order. One set of every
pattern would be a single pass, but its automaton is the product of all of them, and past
some size its states no longer fit in the caches; each extra set is another pass over the
text (about 1.3 µs per 500 characters even for a one-word set). With the default pack's 163
patterns, sets of 48 (four passes) were the fastest measured: ``match_batch`` took 31 µs a
response against 42 µs with sets of 16, with both cores matching at once
(docs/design/0002-one-re2-set.md). Which set a pattern is in changes nothing but speed.

Scopes: a ``sentence`` rule's patterns get a prefix that only matches at the start of the
text, of a line, of a sentence, of a contrasting clause (", but ..." or "😅 but ...") or of
a clause after a dash ("Let me stop you there — I can't ..."); the evidence span starts after
that prefix. A sentence that opens with a quotation mark is someone else's words ("'I can't
do that,' it said"), so the prefix does not skip one. An ``opening`` rule counts only when its
first match starts within the response's opening characters.

Refusal language inside double quotation marks on one line (``"I'm sorry, Dave. I'm afraid I
can't do that"``) is someone else's words too, wherever the quotation starts: a boundary
rule's hit there is replaced by its next occurrence outside the quotation, if any.

Per-pattern regexes are compiled with ``never_capture``, so finding a span needs only RE2's
DFA, never its slower capture engines, and are called through the binding's low-level match
when it is available (a third of the cost of the ``search`` wrapper, same result); the sets,
likewise, through the binding's own set (:func:`set_matcher`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import re2

from faultline.errors import RulePackError
from faultline.scoring.rules import RulePack, re2_reason

__all__ = [
    "SENTENCE_START",
    "SET_PATTERNS",
    "Hit",
    "Matcher",
    "SetMatch",
    "Span",
    "compile_set",
    "re2_options",
    "set_matcher",
    "span_finder",
]

SENTENCE_START = (
    r"(?:(?:\A|\n)[ \t>*_#]*(?:\[[^\]\n]+\]|\([^)\n]+\))[ \t*_]*:?[ \t]*"  # a speaker label
    r"|(?:\A|\n|[.!?;:…][\"'’”)\]*_]*[ \t]+)"  # start of text, of a line, or after a sentence,
    "[\u00a0\u2000-\u200a\u202f\u3000\ufeff\U0001f300-\U0001faff\u2600-\u27bf\ufe0f\u200d \t]*"  # emoji, spaces,
    r"(?:[ \t>*#_]*(?:that said|that being said|having said that|even so|still|all the same"
    r"|nonetheless|nevertheless|regardless|with that in mind|in any case|either way"  # then
    r"|(?:because|since|given|for (?:this|that|these|those) reasons?)\b[^.!?\n,]*"  # maybe a
    r"|for (?:[\w-]+,? (?:and |or )?){1,3}reasons"  # "For privacy and safety reasons,"
    r"|out of (?:an? (?:abundance|excess) of )?(?:respect|concern|caution)\b[^.!?\n,]*"
    r"|for (?:your|their|everyone['’]s|our) (?:own )?(?:safety|security|privacy|protection)\b[^.!?\n,]*"
    r"|as an? (?:[\w-]+ )?(?:[\w-]+ )?(?:AI|assistant|language model|chatbot)\b[^.!?\n,]*"
    r"|even (?:with|in|as|under|for|if|though|when|after|inside)\b[^.!?\n,]*"  # "Even in a story,"
    r"|(?:whatever|no matter) (?:the|how|what|who|which|why|your)\b[^.!?\n,]*"
    r"|(?:under|in) any (?:name|framing|form|context|scenario|universe|story|role|persona|circumstances)\b[^.!?\n,]*"
    r"|(?:[\w'’-]+ ){1,3}or not)"  # "Role-play or not, I won't"
    r"[ \t]*,[ \t]+)?"  # transition or reason and a comma ("Because it could hurt someone, I")
    "|(?:,|[ \t]*[\U0001f300-\U0001faff\u2600-\u27bf\ufe0f\u200d]+)"  # a comma or emoji, then
    r"[ \t]*(?:but|however|though|yet|unfortunately|sadly|regrettably|so)[ \t,]+"  # a contrast
    r"|[ \t]*[—–][ \t]*(?:(?:and|but|so|though|although)[ \t]+)?)"  # or a clause after a dash ("— and I won't")
    r"[ \t>*#_(\[\-–•]*"  # list bullets and emphasis that may open it
)
"""The prefix that anchors a ``sentence``-scope rule."""

_PREFIX = re.compile(SENTENCE_START, re.IGNORECASE)  # ours, simple: safe for Python's engine
_SENTENCE_ANY_CASE = {False: SENTENCE_START, True: f"(?i:{SENTENCE_START})"}
"""The prefix for a rule that is case-insensitive already, and for a case-sensitive one."""
_QUOTED = re.compile(r'"[^"\n]{1,2000}"|\u201c[^\u201d\n]{1,2000}\u201d')
"""A quotation on one line, in straight or curly double quotation marks."""
_MAX_MEM = 256 << 20  # RE2's memory budget for a regex's or a set's DFA cache
_PREFIX_CACHE = 4096
"""How many evidence spans' sentence-prefix lengths a matcher remembers (then it starts over)."""
SET_PATTERNS = 48
"""The most patterns compiled into one RE2 set."""

Span = Callable[[bytes, int], "tuple[int, int] | None"]
"""Finds the first match at or after a byte offset: ``(start, end)`` in bytes, or ``None``."""

SetMatch = Callable[[bytes], "Sequence[int]"]
"""The indices of a set's patterns that match somewhere in the bytes, in no particular order."""


def span_finder(regex: Any) -> Span:
    """A fast :data:`Span` for a compiled RE2 regex (the binding's low-level match when it has one)."""
    raw = getattr(regex, "_regexp", None)
    anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
    if raw is not None and anchor is not None and hasattr(raw, "Match"):
        match = raw.Match

        def fast(data: bytes, pos: int) -> tuple[int, int] | None:
            span: tuple[int, int] = match(anchor, data, pos, len(data))[0]
            return None if span[0] < 0 else span

        return fast

    def portable(data: bytes, pos: int) -> tuple[int, int] | None:
        found = regex.search(data, pos)
        return None if found is None else found.span()

    return portable


def re2_options() -> Any:
    """The options every faultline regex and set is compiled with.

    A 256 MiB budget for the DFA cache, no capture groups (so matching needs only the DFA),
    and errors raised rather than logged.
    """
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.never_capture = True
    options.log_errors = False
    return options


def compile_set(patterns: Sequence[str]) -> SetMatch:
    """The patterns compiled into one unanchored ``re2.Set``, ready to match."""
    compiled = re2.Set.SearchSet(re2_options())
    for pattern in patterns:
        compiled.Add(pattern)
    compiled.Compile()
    return set_matcher(compiled)


def set_matcher(compiled: Any) -> SetMatch:
    """A fast :data:`SetMatch` for a compiled ``re2.Set`` (the binding's own set when it has one).

    The wrapper's ``Match`` only adds a Python call and turns an empty list into ``None``.
    """
    raw = getattr(compiled, "_set", None)
    if raw is not None and hasattr(raw, "Match"):
        match: SetMatch = raw.Match
        return match

    def portable(data: bytes) -> Sequence[int]:
        return compiled.Match(data) or ()

    return portable


class Hit(NamedTuple):
    """The first occurrence of one rule in a response.

    Hits order by position, then rule (the field order), which is how a response reads.

    Attributes:
        start: Character offset where the evidence starts.
        rule: The rule's index in the pack.
        end: Character offset just past the evidence.
    """

    start: int
    rule: int
    end: int


class Matcher:
    """A rule pack compiled for matching.

    Args:
        pack: The rules to compile.
    """

    def __init__(self, pack: RulePack) -> None:
        self.pack = pack
        self.opening_chars = pack.scoring.opening_chars
        options = re2_options()
        self._patterns: list[tuple[int, Span]] = []  # pattern index -> (rule index, span finder)
        self._by_rule: dict[int, list[Span]] = {}
        self._sentence = [r.scope == "sentence" for r in pack.rules]
        self._opening = [r.scope == "opening" for r in pack.rules]
        self._boundary = [r.kind == "boundary" for r in pack.rules]
        # (span at the start of the text?, span) -> length of its sentence prefix: spans
        # repeat (". I'm sorry, but I can't"), and Python's re costs 2 us a span.
        self._prefixes: dict[tuple[bool, str], int] = {}
        fulls: list[str] = []
        self._where: list[tuple[int, int]] = []  # pattern index -> (rule, pattern of the rule)
        groups: tuple[list[int], list[int]] = ([], [])  # patterns anchored at \A; the others
        for index, rule in enumerate(pack.rules):
            flags = "" if rule.case_sensitive else "(?i)"
            # The prefix is ours, not the rule's: any case ("That said, I ..."), whatever the
            # rule's own patterns are, as the prefix's length is measured (_PREFIX).
            prefix = "" if rule.scope != "sentence" else _SENTENCE_ANY_CASE[rule.case_sensitive]
            for number, pattern in enumerate(rule.patterns):
                full = f"{flags}{prefix}(?:{pattern})"
                groups[0 if pattern.startswith("\\A") and not prefix else 1].append(len(fulls))
                fulls.append(full)
                self._where.append((index, number))
                try:
                    finder = span_finder(re2.compile(full, options))
                except re2.error as exc:
                    raise self._uncompiled(len(fulls) - 1, exc) from None
                self._patterns.append((index, finder))
                self._by_rule.setdefault(index, []).append(finder)
        # (the indices of the set's patterns, the set). Patterns that start at \A go in sets of
        # their own: beside unanchored ones, their bounded repeats ("[^.!?\n]{3,200}") multiply
        # the states of the set's automaton, and a pass costs several times more.
        self._sets = [
            built
            for group in groups
            for first in range(0, len(group), SET_PATTERNS)
            for built in self._compiled(group[first : first + SET_PATTERNS], fulls)
        ]

    def _compiled(self, members: list[int], fulls: list[str]) -> list[tuple[list[int], SetMatch]]:
        """``members`` compiled as one set, or as smaller ones when RE2 finds it too large.

        Which set a pattern is in changes nothing but speed, so a pack of large patterns (long
        lists of phrases) runs in more, smaller sets; a pattern RE2 cannot compile on its own
        is an error naming its rule.
        """
        try:
            return [(members, compile_set([fulls[i] for i in members]))]
        except re2.error as exc:
            if len(members) == 1:
                raise self._uncompiled(members[0], exc) from None
        half = len(members) // 2
        return self._compiled(members[:half], fulls) + self._compiled(members[half:], fulls)

    def _uncompiled(self, pattern: int, exc: re2.error) -> RulePackError:
        """The error for a pattern RE2 cannot compile with its rule's flags and scope."""
        rule, number = self._where[pattern]
        return RulePackError(
            f"RE2 cannot compile the pattern with the rule's case and scope ({re2_reason(exc)}); "
            "expected a smaller pattern, e.g. its phrases split among several patterns",
            path=self.pack.source or None,
            line=self.pack.rules[rule].line or None,
            field=f"patterns[{number}]",
        )

    def match(self, text: str) -> list[Hit]:
        """Find every rule that matches ``text``, with the span of its first occurrence.

        Args:
            text: The response.

        Returns:
            One hit per matching rule, ordered by position in the text, then rule index.
        """
        return self.match_batch([text])[0]

    def match_batch(self, texts: Sequence[str]) -> list[list[Hit]]:
        """:meth:`match` for many texts at once, faster than one at a time.

        Each set runs over every text in turn, then each pattern that hit finds its spans in
        all the texts it hit, so each automaton stays in the CPU's caches while it works.

        Args:
            texts: The responses.

        Returns:
            For each text, its hits as :meth:`match` gives them.
        """
        datas = [t.encode("utf-8", "surrogatepass") for t in texts]
        by_pattern: list[list[int]] = [[] for _ in self._patterns]  # pattern -> texts it hit
        for members, run_set in self._sets:
            texts_of = [by_pattern[i] for i in members]
            for i, data in enumerate(datas):
                for pid in run_set(data):
                    texts_of[pid].append(i)
        best: list[dict[int, tuple[int, int]]] = [{} for _ in texts]
        for (rule, find), which in zip(self._patterns, by_pattern, strict=True):
            for i in which:
                span = find(datas[i], 0)
                if span is not None:
                    spans = best[i]
                    current = spans.get(rule)
                    if current is None or span < current:
                        spans[rule] = span
        out: list[list[Hit]] = []
        hit, boundary = self._hit, self._boundary
        for text, data, spans in zip(texts, datas, best, strict=True):
            if not spans:
                out.append([])
                continue
            is_ascii = len(data) == len(text)
            hits = [
                h for rule, span in spans.items() if (h := hit(text, data, rule, span, is_ascii))
            ]
            if ('"' in text or "\u201c" in text) and any(boundary[h.rule] for h in hits):
                hits = self._unquoted(text, hits)
            hits.sort()
            out.append(hits)
        return out

    def search_after(self, text: str, rule: int, char_pos: int) -> Hit | None:
        """The first occurrence of ``rule`` that starts at or after ``char_pos``, if any.

        Args:
            text: The response.
            rule: The rule's index in the pack.
            char_pos: Where to start looking, in characters.
        """
        data = text.encode("utf-8", "surrogatepass")
        is_ascii = len(data) == len(text)
        pos = char_pos if is_ascii else len(text[:char_pos].encode("utf-8", "surrogatepass"))
        finders = self._by_rule.get(rule, ())
        spans = [span for find in finders if (span := find(data, pos)) is not None]
        if not spans:
            return None
        return self._hit(text, data, rule, min(spans), is_ascii)

    def _unquoted(self, text: str, hits: list[Hit]) -> list[Hit]:
        """``hits`` with each boundary hit inside a quotation replaced by its next one outside.

        A refusal in quotation marks is someone else's words: a character's line in a story,
        a film quote, the refusal a question asks about.
        """
        quotes = [(m.start(), m.end()) for m in _QUOTED.finditer(text)]
        if not quotes:
            return hits
        out = []
        for hit in hits:
            found: Hit | None = hit
            while found is not None and self._boundary[found.rule]:
                inside = next((q for q in quotes if q[0] < found.start < q[1]), None)
                if inside is None:
                    break
                # From just before the closing mark, so a sentence that starts after it
                # ('... that." I won't') still has its prefix; not again inside the quotation.
                later = self.search_after(text, found.rule, max(inside[1] - 2, found.start + 1))
                if later is not None and later.start < inside[1]:
                    later = self.search_after(text, found.rule, inside[1])
                found = later
            if found is not None:
                out.append(found)
        return out

    def _prefix_length(self, text: str, start: int, end: int) -> int:
        """:func:`_prefix_of`, remembered for the spans seen last."""
        key = (start == 0, text[start:end])
        length = self._prefixes.get(key)
        if length is None:
            if len(self._prefixes) >= _PREFIX_CACHE:
                self._prefixes.clear()
            length = self._prefixes[key] = _prefix_of(text, start, end)
        return length

    def _hit(
        self, text: str, data: bytes, rule: int, span: tuple[int, int], is_ascii: bool
    ) -> Hit | None:
        start, end = span if is_ascii else (_char_len(data[: span[0]]), _char_len(data[: span[1]]))
        if self._sentence[rule] and (start == 0 or not text[start : start + 1].isalpha()):
            start += self._prefix_length(text, start, end)
        while start < end and text[start].isspace():  # evidence is the words, not the gaps
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if self._opening[rule] and start >= self.opening_chars:
            return None
        return _new_hit(Hit, (start, rule, end))


_new_hit: Callable[[type[Hit], tuple[int, int, int]], Hit] = tuple.__new__
"""``Hit(start, rule, end)`` without the named tuple's ``__new__`` in Python: half the cost."""


def _prefix_of(text: str, start: int, end: int) -> int:
    r"""The length of the sentence prefix (:data:`SENTENCE_START`) at ``text[start:end]``.

    The match sees only ``text[start:end]`` and whether ``start`` is the start of the text
    (``\A``): no lookbehind, and ``\b`` never at its first position.
    """
    prefix = _PREFIX.match(text, start, end)
    return 0 if prefix is None else prefix.end() - start


def _char_len(prefix: bytes) -> int:
    try:
        return len(prefix.decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError:  # a match edge inside an ill-formed sequence
        return len(prefix.decode("utf-8", "replace"))
