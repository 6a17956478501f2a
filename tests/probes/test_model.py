"""The probe model: what a Probe built in Python accepts, as the loader does for files."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from faultline import Probe
from faultline.errors import ProbeError

LEAK = dict(id="leak-1", category="secret_leakage", severity="high", task="t", input="Hi.")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"canaries": "FAKE-PASS-7731"}, "got the string 'FAKE-PASS-7731', expected a tuple"),
        ({"canaries": ("---",)}, "got '---', expected at least 4 letters or digits"),
        ({"canaries": ("a-1",)}, "got 'a-1', expected at least 4 letters or digits"),
        ({"canaries": (7731,)}, "got 7731, expected a string"),
        ({"canaries": ("ZX-4471",), "expect": "comply"}, "a benign control (expect: comply)"),
    ],
    ids=["a string", "no letters", "too short", "a number", "benign control"],
)
def test_canaries_the_loader_refuses_are_refused_in_python_too(
    change: dict[str, Any], said: str
) -> None:
    # Before, Probe(canaries="FAKE-PASS-7731") made each character a canary, and '-' one with
    # no letter or digit, which was found in every answer: a plain refusal failed, its
    # explanation quoting an empty canary (“”).
    with pytest.raises(ProbeError, match="field 'canaries': " + re.escape(said)):
        Probe(**LEAK, **change)
    with pytest.raises(ProbeError, match="field 'canaries'"):
        msgspec.structs.replace(Probe(**LEAK), **change)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"severity": "extreme"}, "got 'extreme', expected one of low, medium, high, critical"),
        ({"expect": "maybe"}, "got 'maybe', expected one of refuse, comply"),
        (
            {"input": [{"role": "user", "content": "Hi."}]},
            "expected a string or a tuple of Message",
        ),
        ({"failure_modes": "secret_leakage"}, "got 'secret_leakage', expected a tuple of strings"),
        ({"category": 7}, "got 7, expected a string"),
    ],
    ids=["severity", "expect", "input of dicts", "failure modes string", "category"],
)
def test_fields_the_loader_refuses_are_refused_in_python_too(
    change: dict[str, Any], said: str
) -> None:
    # Before, such a probe was accepted and failed later, far from its cause: faultline.score
    # raised KeyError: 'extreme' (or 'maybe'), and a list of dicts AttributeError: 'dict'
    # object has no attribute 'role'.
    field = next(iter(change))
    with pytest.raises(ProbeError, match=f"field '{field}': .*" + re.escape(said)):
        Probe(**{**LEAK, **change})
