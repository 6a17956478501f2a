"""A loaded probe set: its probes in order, its name, version and content hash."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import msgspec

from faultline._util.files import sha256_bytes
from faultline.errors import ProbeError
from faultline.probes.model import Probe, digest_record

__all__ = ["ProbeSet"]


@dataclass(frozen=True)
class ProbeSet:
    """An ordered, id-unique collection of probes.

    Attributes:
        name: The built-in set's name, or the file or directory stem.
        probes: The probes, in file order (files of a directory in name order).
        version: The set's version when its file declares one.
        description: What the set is for, when its file says.
        locations: ``probe id -> "path:line"`` where each probe was defined, for messages.

    Raises:
        ProbeError: Two probes share an id (cases, metrics and reports find a probe by it).
        TypeError: An item of ``probes`` is not a :class:`Probe`.
    """

    name: str
    probes: tuple[Probe, ...]
    version: str | None = None
    description: str | None = None
    locations: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        seen: dict[str, int] = {}
        for i, probe in enumerate(self.probes):
            if not isinstance(probe, Probe):
                raise TypeError(
                    f"ProbeSet {self.name!r}: probes[{i}] is a {type(probe).__name__}, expected "
                    "a Probe; load a file or built-in set with faultline.load_probes"
                )
            if probe.id in seen:
                raise ProbeError(
                    f"probes[{i}] of '{self.name}' has the id '{probe.id}' of probes[{seen[probe.id]}]; "
                    "ids must be unique",
                    field="id",
                )
            seen[probe.id] = i

    def __len__(self) -> int:
        return len(self.probes)

    def __iter__(self) -> Iterator[Probe]:
        return iter(self.probes)

    @cached_property
    def by_id(self) -> dict[str, Probe]:
        """The probes keyed by id."""
        return {p.id: p for p in self.probes}

    @cached_property
    def index(self) -> dict[str, int]:
        """Each probe id's position in the set, used to order cases."""
        return {p.id: i for i, p in enumerate(self.probes)}

    @cached_property
    def sha256(self) -> str:
        """SHA-256 of the probes' canonical JSON.

        The same probes give the same hash whatever the file format, layout or comments.
        """
        return sha256_bytes(msgspec.json.encode([digest_record(p) for p in self.probes]))

    @cached_property
    def categories(self) -> list[str]:
        """The categories present, sorted."""
        return sorted({p.category for p in self.probes})
