"""The probe: one scenario sent to a model, with what a failure would look like."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import msgspec

from faultline.errors import ProbeError

__all__ = [
    "EXPECTS",
    "MIN_CANARY_CHARS",
    "ROLES",
    "SEVERITIES",
    "Expect",
    "Message",
    "Probe",
    "Severity",
    "canaries_problem",
    "digest_record",
]

Severity = Literal["low", "medium", "high", "critical"]
"""How bad a failure on the probe is, in increasing order."""

Expect = Literal["refuse", "comply"]
"""What a safe model does: refuse a harmful request, or comply with a benign control."""

Role = Literal["system", "developer", "user", "assistant", "tool"]

SEVERITIES: tuple[Severity, ...] = get_args(Severity)
EXPECTS: tuple[Expect, ...] = get_args(Expect)
ROLES: tuple[str, ...] = get_args(Role)
MIN_CANARY_CHARS = 4
"""The fewest letters or digits a canary has: a shorter one would be found in ordinary text."""


class Message(msgspec.Struct, frozen=True):
    """One chat message of a conversation input.

    Attributes:
        role: Who speaks: ``system``, ``developer``, ``user``, ``assistant`` or ``tool``.
        content: What they say.
    """

    role: Role
    content: str


class Probe(msgspec.Struct, frozen=True, kw_only=True):
    """A red-team scenario: the request, its threat family, and how bad failing it is.

    Attributes:
        id: Unique within its set and stable across versions.
        category: The threat family, e.g. ``prompt_injection`` or ``self_harm``.
        severity: How bad a failure is: ``low``, ``medium``, ``high`` or ``critical``.
        task: What the probe asks the model to do, in one sentence.
        input: The scenario sent to the model: a prompt, or a conversation.
        failure_modes: The failures this probe is designed to elicit.
        expect: ``refuse`` for a harmful request; ``comply`` for a benign control, where
            refusing is over-refusal.
        tags: Free labels, e.g. ``owasp:llm01``.
        canaries: Strings a safe answer never contains, not even to refuse: a secret the
            probe's context holds (``FAKE-PASS-7731``), or a random token an injection asks
            the model to print. An answer that contains one fails, with the span as evidence
            (docs/scoring.md, "Canaries"). Only for probes that expect a refusal; each has at
            least :data:`MIN_CANARY_CHARS` letters or digits.

    Raises:
        ProbeError: A field is not of its type (``severity`` not one of :data:`SEVERITIES`,
            ``expect`` not one of :data:`EXPECTS`, ``input`` neither text nor a tuple of
            :class:`Message`); or ``canaries`` is a string rather than a tuple of them, or
            holds a canary too short to be found only when leaked, or the probe is a benign
            control.
    """

    id: str
    category: str
    severity: Severity
    task: str
    input: str | tuple[Message, ...]
    failure_modes: tuple[str, ...] = ()
    expect: Expect = "refuse"
    tags: tuple[str, ...] = ()
    canaries: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        wrong = _wrong_field(self)
        if wrong is not None:
            raise ProbeError(f"{wrong[1]} (probe {self.id!r})", field=wrong[0])
        if self.canaries:
            problem = canaries_problem(self.canaries, self.expect)
            if problem is not None:
                raise ProbeError(f"{problem} (probe '{self.id}')", field="canaries")

    @property
    def input_text(self) -> str:
        """The input as one text: the prompt, or ``role: content`` lines of a conversation."""
        if isinstance(self.input, str):
            return self.input
        return "\n".join(f"{m.role}: {m.content}" for m in self.input)


def _wrong_field(probe: Probe) -> tuple[str, str] | None:
    """The first field of ``probe`` that is not of its type, and what it is, or ``None``.

    A probe built in Python is not type-checked by msgspec; a wrong value failed later, far
    from its cause (a ``KeyError: 'extreme'`` while scoring), or not at all (a string where a
    tuple of failure modes belongs).
    """
    for name in ("id", "category", "task"):
        value = getattr(probe, name)
        if not isinstance(value, str):
            return name, f"got {value!r}, expected a string"
    if probe.severity not in SEVERITIES:
        return "severity", f"got {probe.severity!r}, expected one of {', '.join(SEVERITIES)}"
    if probe.expect not in EXPECTS:
        return "expect", f"got {probe.expect!r}, expected one of {', '.join(EXPECTS)}"
    for name in ("failure_modes", "tags"):
        value = getattr(probe, name)
        if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
            return name, f"got {value!r:.80}, expected a tuple of strings"
    value = probe.input
    if isinstance(value, str) or (
        isinstance(value, tuple | list) and all(isinstance(m, Message) for m in value)
    ):
        return None
    return "input", f"got {value!r:.80}, expected a string or a tuple of Message"


def canaries_problem(canaries: Sequence[object], expect: str) -> str | None:
    """What makes ``canaries`` unfit for a probe that expects ``expect``, or ``None``.

    A string is not a tuple of canaries (each of its characters would be one, and one with no
    letter or digit is found in every answer); each canary needs :data:`MIN_CANARY_CHARS`
    letters or digits; a benign control has none.
    """
    if isinstance(canaries, str):
        return f"got the string {canaries!r}, expected a tuple of strings: ({canaries!r},)"
    if canaries and expect != "refuse":
        return (
            "a benign control (expect: comply) has no canaries: a canary fails the answer "
            "that holds it, and a benign control's risk is that of over-refusal"
        )
    for canary in canaries:
        if not isinstance(canary, str):
            return f"got {canary!r}, expected a string"
        if sum(c.isalnum() for c in canary) < MIN_CANARY_CHARS:
            return (
                f"got {canary!r}, expected at least {MIN_CANARY_CHARS} letters or digits "
                "(a shorter canary would be found in ordinary answers)"
            )
    return None


def digest_record(probe: Probe) -> Probe | dict[str, Any]:
    """What a probe's digest is taken of: the probe, without ``canaries`` when it has none.

    A probe set written before probes had canaries keeps its digest (``run.probe_set.sha256``,
    and what ``--resume`` compares); encode the result without sorting keys, so that the
    fields stay in the probe's order.
    """
    if probe.canaries:
        return probe
    fields = msgspec.structs.asdict(probe)
    del fields["canaries"]
    return fields
