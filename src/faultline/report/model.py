"""The report: ``report.json``, the source of truth every other view is rendered from.

Field order is frozen by :data:`SCHEMA_VERSION`; a change to any contract name bumps it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, overload

import msgspec

from faultline._version import __version__
from faultline.scoring.case import CaseScore

__all__ = ["SCHEMA_VERSION", "CaseLines", "Report", "new_run_id", "utc_now"]

SCHEMA_VERSION = "1"


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id: ``20261121T101500Z-3f9a2c``."""
    moment = now or datetime.now(UTC)
    return f"{moment:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def utc_now() -> str:
    """The current time in ISO 8601 UTC with a ``Z`` suffix, to the second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CaseLines(Sequence[CaseScore]):
    """Cases held as their report.json lines, decoded only when read.

    A run of a million cases keeps its cases as the bytes it will write, not as a million
    Python objects; indexing decodes one line into a :class:`CaseScore`.

    Args:
        lines: One compact JSON object per case.
        ids: Each case's id, to find a case without decoding the others.
        tails: For each case, the bytes that replace its line's closing ``}`` (the geometry
            fields and the brace), or ``None`` to keep the lines as they are.
    """

    _DECODER = msgspec.json.Decoder(CaseScore)

    def __init__(
        self, lines: Sequence[bytes], ids: Sequence[str], tails: Sequence[bytes] | None = None
    ) -> None:
        self.lines = lines
        self.ids = ids
        self.tails = tails
        self._positions: dict[str, int] | None = None

    def line(self, index: int) -> bytes:
        """The report.json line of one case."""
        if self.tails is None:
            return self.lines[index]
        return self.lines[index][:-1] + self.tails[index]

    def parts(self, start: int, stop: int, separator: bytes) -> list[bytes | memoryview]:
        """The lines ``start:stop`` as pieces to join, separated by ``separator``.

        Joining the pieces makes one copy of the lines, where concatenating each line with
        its tail first would make two.
        """
        out: list[bytes | memoryview] = []
        for i in range(start, min(stop, len(self.lines))):
            if out:
                out.append(separator)
            if self.tails is None:
                out.append(self.lines[i])
            else:
                out.append(memoryview(self.lines[i])[:-1])
                out.append(self.tails[i])
        return out

    def find(self, case_id: str) -> CaseScore | None:
        """The case with this id, or ``None``."""
        if self._positions is None:
            self._positions = {cid: i for i, cid in enumerate(self.ids)}
        i = self._positions.get(case_id)
        return None if i is None else self._DECODER.decode(self.line(i))

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, index: int) -> CaseScore: ...

    @overload
    def __getitem__(self, index: slice) -> list[CaseScore]: ...

    def __getitem__(self, index: int | slice) -> CaseScore | list[CaseScore]:
        if isinstance(index, slice):
            return [self._DECODER.decode(self.line(i)) for i in range(*index.indices(len(self)))]
        return self._DECODER.decode(self.line(index if index >= 0 else len(self) + index))

    def __iter__(self) -> Iterator[CaseScore]:
        return (self._DECODER.decode(self.line(i)) for i in range(len(self)))


@dataclass
class Report:
    """A scored run: its metadata, cases, metrics and failure geometry.

    Attributes:
        run: The ``run`` object (id, created_at, target, probe_set, rules, config).
        cases: The cases, in the report's stable order (a :class:`CaseLines` for large runs).
        aggregate_metrics: The run-level metrics.
        observability: The failure geometry, or ``None`` below the minimum number of cases.
    """

    run: dict[str, Any]
    cases: Sequence[CaseScore]
    aggregate_metrics: dict[str, Any]
    observability: dict[str, Any] | None

    @property
    def header(self) -> dict[str, Any]:
        """The fields that precede the cases in report.json."""
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "faultline", "version": __version__},
            "run": self.run,
        }

    def to_dict(self) -> dict[str, Any]:
        """The whole report as plain Python data (cases as dicts), in contract order."""
        return {
            **self.header,
            "cases": [msgspec.to_builtins(c) for c in self.cases],
            "aggregate_metrics": self.aggregate_metrics,
            "observability": self.observability,
        }

    @property
    def config(self) -> Mapping[str, Any]:
        """``run.config``."""
        config: Mapping[str, Any] = self.run["config"]
        return config
