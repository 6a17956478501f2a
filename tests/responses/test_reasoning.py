"""Reasoning set apart from the answer: the forms servers and models write it in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultline.responses.reasoning import Reasoned, answer_of, split_reasoning


@pytest.mark.parametrize(
    ("text", "reasoning", "answer"),
    [
        (
            "<think>\nIs this safe? Yes.\n</think>\n\nUse `kill <pid>`.",
            "Is this safe? Yes.",
            "Use `kill <pid>`.",
        ),
        ("<thinking>Hm.</thinking>Answer.", "Hm.", "Answer."),
        ("<reasoning>Hm.</reasoning> Answer.", "Hm.", "Answer."),
        ("  \n<THINK>Hm.</THINK>\nAnswer.", "Hm.", "Answer."),
        ("\ufeff<think>Hm.</think>Answer.", "Hm.", "Answer."),
        # ByteDance Seed's tag, and Mistral's bracketed tokens as a server without a parser
        # leaves them.
        ("<seed:think>Hm.</seed:think>\nAnswer.", "Hm.", "Answer."),
        ("[THINK]Is it safe? Yes.[/THINK]Sure: use a pin.", "Is it safe? Yes.", "Sure: use a pin."),
        ("[THINK]Still thinking", "Still thinking", ""),
        # Two blocks in a row (a model that thinks again before it answers).
        ("<think>One.</think>\n<think>Two.</think>\nAnswer.", "One.\n\nTwo.", "Answer."),
        # Never closed: cut off while it thought, no answer.
        ("<think>\nStep one of my plan", "Step one of my plan", ""),
        ("<think>One.</think><think>Still thinking", "One.\n\nStill thinking", ""),
        # The closing tag alone: the chat template wrote the opening tag into the prompt.
        (
            "The user asks X. I should answer.\n</think>\n\nHere it is.",
            "The user asks X. I should answer.",
            "Here it is.",
        ),
        ("Thinking...</think>", "Thinking...", ""),
        # gpt-oss's harmony format as raw text.
        (
            "<|channel|>analysis<|message|>User wants X. Fine.<|end|><|start|>assistant"
            "<|channel|>final<|message|>Here is X.<|return|>",
            "User wants X. Fine.",
            "Here is X.",
        ),
        ("<|start|>assistant<|channel|>analysis<|message|>Hm.<|end|>Answer.", "Hm.", "Answer."),
        ("<|channel|>analysis<|message|>Still thinking", "Still thinking", ""),
        # Two analysis messages before the answer (the second was dropped), or cut off in
        # the second (it was scored as the answer, tokens and all).
        (
            "<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>analysis"
            "<|message|>Two.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|return|>",
            "One.\n\nTwo.",
            "Answer.",
        ),
        (
            "<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>analysis"
            "<|message|>Still",
            "One.\n\nStill",
            "",
        ),
        # The same from a server that drops special tokens (skip_special_tokens).
        (
            "analysisUser wants X. Fine.assistantfinalHere is X.",
            "User wants X. Fine.",
            "Here is X.",
        ),
        ("\nassistantanalysisHm.assistantfinal\nAnswer.", "Hm.", "Answer."),
    ],
)
def test_reasoning_is_set_apart(text: str, reasoning: str, answer: str) -> None:
    split = split_reasoning(text)
    assert split is not None
    assert split.reasoning == reasoning
    assert text[split.start : split.end] == answer


@pytest.mark.parametrize(
    "text",
    [
        "I can't help with that.",
        "Wrap the model's thoughts in <think> tags, then strip them.",
        "To drop the reasoning: `answer = text.split('</think>')[-1]`.",  # not followed by a space
        "Here is the parser:\n<think>x</think> is removed by the regex below.\n",  # mid-text
        "Before.<think>mid</think>\nAfter.",  # a block that does not lead
        "Mistral writes [THINK] tokens around its reasoning.",
        "<b>bold</b> answer",
        "<|channel|>final<|message|>an answer with no analysis channel",
        "analysis of the data: the trend is up.",  # no final channel: not harmony
        "The assistantfinal flag is set.",  # does not start with an analysis channel
    ],
)
def test_tags_that_do_not_mark_reasoning_are_part_of_the_answer(text: str) -> None:
    assert split_reasoning(text) is None


def test_an_empty_block_sets_nothing_apart_but_leaves_the_answer() -> None:
    # Qwen3 with thinking switched off writes an empty block before every answer.
    assert answer_of("<think>\n\n</think>\n\nParis.") == ("Paris.", None)


def test_recorded_reasoning_comes_before_reasoning_found_in_the_text() -> None:
    assert answer_of("<think>second</think>Answer.", "first") == ("Answer.", "first\n\nsecond")
    assert answer_of("Answer.", "first") == ("Answer.", "first")
    assert answer_of("Answer.", "  \n") == ("Answer.", None)


def test_a_closing_tag_alone_does_not_end_reasoning_the_target_returned_apart() -> None:
    # The target set the reasoning apart (its server parses it), so a </think> left in the
    # answer is the answer's: the text before it was set apart as reasoning, unscored.
    text = "Dear customer, click here to verify your password. </think> Anything else?"
    assert answer_of(text, "They want a phishing email.") == (text, "They want a phishing email.")
    assert split_reasoning(text, closing_alone=False) is None
    # Without it, the closing tag alone is DeepSeek-R1's (its template opens the block).
    assert answer_of(text)[0] == "Anything else?"
    # A leading block is set apart either way (servers that return reasoning and leave it).
    assert answer_of("<think>b</think> Answer.", "a") == ("Answer.", "a\n\nb")


_PLAIN = st.text(st.characters(exclude_characters="<>|"), max_size=80)


@given(st.text(max_size=300))
def test_the_answer_is_a_part_of_the_text(text: str) -> None:
    split = split_reasoning(text)
    if split is None:
        assert answer_of(text) == (text, None)
        return
    assert isinstance(split, Reasoned)
    assert 0 <= split.start <= split.end <= len(text)
    answer, reasoning = answer_of(text)
    assert answer == text[split.start : split.end]
    assert reasoning == (split.reasoning or None)


@given(_PLAIN, _PLAIN, st.sampled_from(["think", "thinking", "reasoning"]), st.text(" \n\t"))
def test_a_leading_block_gives_back_what_was_written(
    reasoning: str, answer: str, name: str, gap: str
) -> None:
    text = f"<{name}>{reasoning}</{name}>{gap}{answer}"
    split = split_reasoning(text)
    assert split is not None
    assert split.reasoning == reasoning.strip()
    assert text[split.start : split.end] == answer.lstrip()


@given(st.text(st.characters(exclude_characters="<"), max_size=200))
def test_a_text_without_a_tag_is_all_answer(text: str) -> None:
    assert split_reasoning(text) is None
