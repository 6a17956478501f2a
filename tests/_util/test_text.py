"""Text helpers: ``short_id`` keeps the end of a long case id, which tells cases apart;
``excerpt`` cuts between the characters a reader sees."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from faultline._util.text import describe_value, excerpt, short_id, visible

LONG_PROBE = "jailbreak-dan-persona-system-prompt-extraction-variant-0042"


def test_a_long_id_keeps_its_sample_and_model() -> None:
    shown = {m: short_id(f"{LONG_PROBE}#0@{m}") for m in ("gpt-4o", "llama-3.1-70b")}
    assert shown == {
        "gpt-4o": "jailbreak-dan-person…prompt-extraction-variant-0042#0@gpt-4o",
        "llama-3.1-70b": "jailbreak-dan-person…extraction-variant-0042#0@llama-3.1-70b",
    }
    model = "anthropic/claude-3-5-sonnet-20241022-v2:0"  # longer than two thirds: all of it
    assert short_id(f"{LONG_PROBE}#3@{model}") == f"jailbreak-dan-p…#3@{model}"


def test_a_short_id_is_as_it_is_and_controls_are_escaped_before_the_cut() -> None:
    assert short_id("wpn-1#0@gpt-4o") == "wpn-1#0@gpt-4o"
    assert short_id("a\x1bb#0") == "a\\x1bb#0"
    assert short_id("a\x1b" * 30 + "#0@m", 20) == "a\\x1ba\\…x1ba\\x1b#0@m"  # cut as shown


ID_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)


@given(ID_TEXT, ID_TEXT, st.integers(2, 120))
@example("0" * 19 + "…" + "0" * 39, "", 59)  # an id with an ellipsis of its own
def test_a_short_id_fits_and_keeps_the_start_and_the_end(probe: str, rest: str, limit: int) -> None:
    case_id = f"{probe.replace('#', '%23')}#{rest}"
    flat = " ".join(visible(case_id).split())
    got = short_id(case_id, limit)
    assert len(got) <= limit
    if len(flat) <= limit:
        assert got == flat
        return
    # The id may hold "…" of its own: the cut is an ellipsis with the start before it and
    # the end after it.
    cuts = [
        i
        for i, char in enumerate(got)
        if char == "…" and flat.startswith(got[:i]) and flat.endswith(got[i + 1 :])
    ]
    assert cuts
    tail = got[cuts[0] + 1 :]
    assert len(tail) >= (limit - 1) * 2 // 3 - 1  # less only by a space at the cut
    end = flat[flat.index("#") :]
    if len(end) <= (limit - 1) * 5 // 6:
        assert got.endswith(end.lstrip())  # the sample and model whole


FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"  # one emoji, 7 code points


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ab" + FAMILY + "cd", "ab…"),  # a family, not a man and a woman
        ("abc\U0001f44d\U0001f3fdd", "abc…"),  # a thumbs up with its skin tone
        ("abc" + "\U0001f1eb\U0001f1f7" * 2, "abc…"),  # not half a flag
        ("ab" + "\U0001f1eb\U0001f1f7" * 2, "ab\U0001f1eb\U0001f1f7…"),  # 🇫🇷, not 🇫🇷🇫
        ("abce\u0301fg", "abc…"),  # é, not e
        ("a" + "\u0301" * 9, "a\u0301\u0301\u0301…"),  # one character only: cut anyway
    ],
)
def test_an_excerpt_is_not_cut_inside_a_character(text: str, shown: str) -> None:
    assert excerpt(text, 5) == shown


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (b"\x00\x01", "binary data"),  # it said "a bytes"
        (object(), "an object"),  # it said "a object"
        (datetime.date(2026, 1, 2), "a date"),
        ([1], "a list"),
    ],
)
def test_a_value_is_described_in_plain_words(value: object, said: str) -> None:
    assert describe_value(value) == said
