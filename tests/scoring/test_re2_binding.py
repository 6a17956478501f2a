"""The fast paths into the RE2 binding agree with its public API, which is the fallback.

``span_finder`` and ``set_matcher`` call the binding's own objects when they are there and
fall back to ``search`` and ``Set.Match`` otherwise (another version of google-re2). Both
paths must give the same answers.
"""

from __future__ import annotations

from typing import Any

import pytest
import re2

from faultline.scoring.matcher import set_matcher, span_finder

TEXTS = [
    b"",
    b"I can't help with that.",
    b"Sure, here is how: first, mix it. Then I can't stop.",
    "Caf\u00e9 \u2014 I can\u2019t help, sorry.".encode(),
    b"no match here",
]
PATTERNS = ["(?i)can[\u2019']?t help", r"\bhere is\b", r"(?i)sorry"]


class _PublicOnly:
    """Exposes only the binding's public method, as another binding version would."""

    def __init__(self, target: Any, method: str) -> None:
        setattr(self, method, getattr(target, method))


def _options() -> Any:
    options = re2.Options()
    options.never_capture = True
    return options


@pytest.mark.parametrize("pattern", PATTERNS)
def test_span_finder_paths_agree(pattern: str) -> None:
    regex = re2.compile(pattern, _options())
    fast, portable = span_finder(regex), span_finder(_PublicOnly(regex, "search"))
    for data in TEXTS:
        for pos in range(0, len(data) + 1, 5):
            assert fast(data, pos) == portable(data, pos)


def test_set_matcher_paths_agree() -> None:
    compiled = re2.Set.SearchSet(_options())
    for pattern in PATTERNS:
        compiled.Add(pattern)
    compiled.Compile()
    fast, portable = set_matcher(compiled), set_matcher(_PublicOnly(compiled, "Match"))
    found = [sorted(fast(data)) for data in TEXTS]
    assert found == [sorted(portable(data)) for data in TEXTS]
    assert found == [[], [0], [1], [0, 2], []]
