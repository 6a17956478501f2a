"""A reasoning model's answer, with its reasoning set apart.

Reasoning models (DeepSeek-R1, Qwen3, QwQ, gpt-oss, Claude with extended thinking, the
OpenAI o-series) think before they answer. Servers return that reasoning apart from the
answer (``reasoning_content`` or ``reasoning`` beside ``content``, Anthropic's ``thinking``
blocks), and faultline records it as the response's ``reasoning``; a server without a
reasoning parser leaves it inside the text, as a ``<think>`` block. Verdicts are about the
answer: a chain of thought that weighs "I can't help with that" and then answers a benign
question is not an over-refusal, and one that resolves "I should refuse" before writing the
phishing email is not a refusal. :func:`split_reasoning` finds the reasoning inside a text
in these forms (docs/scoring.md, "Reasoning models"):

* a leading block: ``<think>…</think>`` (also ``<thinking>``, ``<reasoning>`` and
  ByteDance Seed's ``<seed:think>``, in any case, and Mistral's ``[THINK]…[/THINK]``),
  possibly several in a row; a block that is never closed is reasoning to the end of
  the text: the model was cut off while it thought, and gave no answer;
* the closing tag alone: ``…</think>`` followed by a space, a line break or the end of the
  text, with no opening tag before it. DeepSeek-R1's chat template writes the opening tag
  into the prompt, so the model's own text starts inside its reasoning. Not when the target
  returned the reasoning apart: its server parsed it, so a closing tag left in the answer
  is the answer's;
* the gpt-oss "harmony" format as raw text: ``<|channel|>analysis<|message|>…<|end|>`` (one
  analysis message or several in a row), then the answer of the ``final`` channel (up to
  ``<|return|>`` or ``<|end|>``); or the same with its special tokens dropped, as servers
  that skip them write it: ``analysis…assistantfinal…`` (only once the ``final`` channel
  has begun).

A tag anywhere else is part of the answer: an opening tag after the start, a closing tag
followed by something other than a space (``split('</think>')``), or one with an opening tag
before it. A lone ``</think>`` followed by a space does end the reasoning, even inside a fenced
code block, when the target returned no reasoning apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Reasoned", "answer_of", "split_reasoning"]

_NAMES = "think|thinking|reasoning|seed:think"
_LEADING = re.compile(rf"[\s\ufeff]*(?:<({_NAMES})>|(\[THINK\]))", re.IGNORECASE)
_CLOSE_ONLY = re.compile(rf"</({_NAMES})>(?=\s|\Z)", re.IGNORECASE)
_HARMONY = re.compile(r"[\s\ufeff]*(?:<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>")
_HARMONY_FINAL = re.compile(r"<\|channel\|>final<\|message\|>")
_HARMONY_STOP = re.compile(r"<\|(?:return|end|call)\|>")
_BARE_HARMONY = re.compile(r"[\s\ufeff]*(?:assistant)?analysis")
_BARE_FINAL = "assistantfinal"
_SPACE = re.compile(r"\s*")
_JOIN = "\n\n"


@dataclass(frozen=True, slots=True)
class Reasoned:
    """Where a text's answer is, once its reasoning is set apart.

    Attributes:
        reasoning: The reasoning found in the text (blocks joined by a blank line), stripped.
        start: Where the answer starts in the text (after the reasoning and the space after it).
        end: Where the answer ends in the text.
    """

    reasoning: str
    start: int
    end: int


def split_reasoning(text: str, *, closing_alone: bool = True) -> Reasoned | None:
    """The reasoning inside ``text`` and where its answer is, or ``None`` when it has none.

    The answer is ``text[start:end]``: a part of the text as written, so every offset into it
    is an offset into the text less ``start``. It is empty when the model never finished
    reasoning.

    Args:
        text: The response as the target returned it.
        closing_alone: Whether a closing tag alone ends reasoning; ``False`` when the target
            returned the reasoning apart from ``text``.
    """
    bare = _BARE_HARMONY.match(text)
    if bare is not None and (final := text.find(_BARE_FINAL, bare.end())) >= 0:
        answer = _after_space(text, final + len(_BARE_FINAL))
        return Reasoned(text[bare.end() : final].strip(), answer, len(text))
    leading = _LEADING.match(text)
    if leading is not None:
        return _leading(text, leading)
    if "<" not in text:  # most answers: one scan of the text
        return None
    harmony = _HARMONY.match(text)
    if harmony is not None:
        return _harmony(text, harmony.end())
    close = _CLOSE_ONLY.search(text) if closing_alone else None
    if close is None or re.search(f"<{close.group(1)}>", text[: close.start()], re.IGNORECASE):
        return None
    return Reasoned(text[: close.start()].strip(), _after_space(text, close.end()), len(text))


def answer_of(text: str, recorded: str | None = None) -> tuple[str, str | None]:
    """The answer in ``text`` and the model's reasoning: ``recorded``, then any inside ``text``.

    Args:
        text: The response as the target returned it.
        recorded: The reasoning the target returned apart from the text, if any (a closing
            tag alone in ``text`` is then part of the answer).

    Returns:
        The answer (``text`` itself when it holds no reasoning) and the reasoning, ``None``
        when there is none to show (an empty ``<think></think>`` block sets nothing apart).
    """
    given = recorded is not None and bool(recorded.strip())
    split = split_reasoning(text, closing_alone=not given)
    if split is None:
        return text, recorded if given else None
    parts = [p for p in (recorded, split.reasoning) if p is not None and p.strip()]
    return text[split.start : split.end], _JOIN.join(parts) or None


def _leading(text: str, opening: re.Match[str]) -> Reasoned:
    """One or more leading blocks; the answer is what follows the last one."""
    parts: list[str] = []
    match: re.Match[str] | None = opening
    at = 0
    while match is not None:
        tag = f"</{match.group(1)}>" if match.group(1) else "[/THINK]"
        closing = re.compile(re.escape(tag), re.IGNORECASE).search(text, match.end())
        if closing is None:  # cut off while reasoning: no answer
            parts.append(text[match.end() :].strip())
            return Reasoned(_joined(parts), len(text), len(text))
        parts.append(text[match.end() : closing.start()].strip())
        at = _after_space(text, closing.end())
        match = _LEADING.match(text, at)
    return Reasoned(_joined(parts), at, len(text))


def _harmony(text: str, begin: int) -> Reasoned:
    """One or more analysis messages in a row; the answer is the final channel's message."""
    parts: list[str] = []
    while True:
        stop = _HARMONY_STOP.search(text, begin)
        if stop is None:  # cut off while reasoning
            parts.append(text[begin:].strip())
            return Reasoned(_joined(parts), len(text), len(text))
        parts.append(text[begin : stop.start()].strip())
        again = _HARMONY.match(text, stop.end())
        if again is None:
            break
        begin = again.end()
    reasoning = _joined(parts)
    final = _HARMONY_FINAL.search(text, stop.end())
    start = _after_space(text, final.end() if final is not None else stop.end())
    end = _HARMONY_STOP.search(text, start) if final is not None else None
    return Reasoned(reasoning, start, len(text) if end is None else end.start())


def _after_space(text: str, at: int) -> int:
    space = _SPACE.match(text, at)
    return at if space is None else space.end()


def _joined(parts: list[str]) -> str:
    return _JOIN.join(p for p in parts if p)
