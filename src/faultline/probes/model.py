"""The probe: one scenario sent to a model, with what a failure would look like."""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec

__all__ = [
    "EXPECTS",
    "ROLES",
    "SEVERITIES",
    "Expect",
    "Message",
    "Probe",
    "Severity",
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
            (docs/scoring.md, "Canaries"). Only for probes that expect a refusal.
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

    @property
    def input_text(self) -> str:
        """The input as one text: the prompt, or ``role: content`` lines of a conversation."""
        if isinstance(self.input, str):
            return self.input
        return "\n".join(f"{m.role}: {m.content}" for m in self.input)


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
