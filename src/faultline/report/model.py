"""The report: ``report.json``, the source of truth every other view is rendered from.

Field order is frozen by :data:`SCHEMA_VERSION`; a change to any contract name bumps it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any, overload

import msgspec

from faultline._version import __version__
from faultline.scoring.case import CaseScore

__all__ = [
    "CASES_FILE",
    "REPORT_FILE",
    "REPORT_FILES",
    "SCHEMA_VERSION",
    "SPLIT_SCHEMA_VERSION",
    "CaseLines",
    "CasesFile",
    "Report",
    "count_rules",
    "new_run_id",
    "rule_table",
    "utc_now",
]

SCHEMA_VERSION = "1"
SPLIT_SCHEMA_VERSION = "2"
"""The schema of a report whose cases are in cases.parquet (docs/report-format.md)."""

CASES_FILE = "cases.parquet"
"""The name of that file, beside report.json."""

REPORT_FILE = "report.json"
"""The report, the source of truth, in a run directory."""

REPORT_FILES = (REPORT_FILE, "report.md", "report.html")
"""What a scored run writes in its directory, besides cases.parquet: the report and its views."""


def count_rules(matched: Iterable[Any]) -> Counter[tuple[str, str]]:
    """How many cases each rule matched in, by ``(kind, label)``.

    Args:
        matched: Cases, or anything with their three ``matched_*_patterns`` lists.
    """
    cases = matched if isinstance(matched, Sequence) else list(matched)
    counts: Counter[tuple[str, str]] = Counter()
    for kind, labels in (
        ("boundary", attrgetter("matched_boundary_patterns")),
        ("unsafe", attrgetter("matched_unsafe_patterns")),
        ("safe", attrgetter("matched_safe_patterns")),
    ):
        for label, n in Counter(chain.from_iterable(map(labels, cases))).items():
            counts[kind, label] += n
    return counts


def rule_table(counts: Mapping[tuple[str, str], int]) -> list[list[Any]]:
    """Rule counts as ``[kind, label, count]`` rows, by kind and label (report.md's table)."""
    return [[kind, label, n] for (kind, label), n in sorted(counts.items())]


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id: ``20261121T101500Z-3f9a2c``."""
    moment = now or datetime.now(UTC)
    return f"{moment:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def utc_now() -> str:
    """The current time in ISO 8601 UTC with a ``Z`` suffix, to the second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _CategoryRisk(msgspec.Struct):
    category: str
    risk_score: float | None = None


_CATEGORY_RISK = msgspec.json.Decoder(_CategoryRisk)


class CaseLines(Sequence[CaseScore]):
    """Cases held as their report.json lines, decoded only when read.

    A run of a million cases keeps its cases as the bytes it will write, not as a million
    Python objects; indexing decodes one line into a :class:`CaseScore`. Each line is kept as
    a head (the compact JSON object without its closing brace) and a tail (the fields added
    after scoring, such as the geometry's, and the brace), so adding fields never copies a line.

    Args:
        heads: Each case's JSON object without its closing ``}``.
        ids: Each case's id, to find a case without decoding the others.
        tails: What follows each head (default: just ``}``).
    """

    _DECODER = msgspec.json.Decoder(CaseScore)

    def __init__(
        self, heads: Sequence[bytes], ids: Sequence[str], tails: Sequence[bytes] | None = None
    ) -> None:
        self.heads = heads
        self.ids = ids
        self.tails = tails if tails is not None else [b"}"] * len(heads)
        self._positions: dict[str, int] | None = None

    def line(self, index: int) -> bytes:
        """The report.json line of one case."""
        return self.heads[index] + self.tails[index]

    def parts(self, start: int, stop: int, separator: bytes) -> list[bytes]:
        """The lines ``start:stop`` as pieces to join, separated by ``separator``."""
        heads = self.heads[start:stop]
        if not heads:
            return []
        out = [separator] * (3 * len(heads) - 1)
        out[0::3] = heads
        out[1::3] = self.tails[start:stop]
        return out

    def category_risks(self) -> Iterator[tuple[str, float | None]]:
        """Each case's ``(category, risk_score)``, in order, decoding only those two fields."""
        decode = _CATEGORY_RISK.decode
        for head in self.heads:
            found = decode(head + b"}")  # the tail holds only fields added after scoring
            yield found.category, found.risk_score

    def find(self, case_id: str) -> CaseScore | None:
        """The case with this id, or ``None``."""
        if self._positions is None:
            self._positions = {cid: i for i, cid in enumerate(self.ids)}
        i = self._positions.get(case_id)
        return None if i is None else self._DECODER.decode(self.line(i))

    def __len__(self) -> int:
        return len(self.heads)

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
class CasesFile:
    """The cases of a large run, kept in cases.parquet beside report.json.

    Attributes:
        name: The file's name (beside report.json).
        rows: How many cases it holds.
        sha256: Its SHA-256.
        worst: The worst cases (``aggregate_metrics.worst_cases``), as full case objects.
        sample: The HTML report's seeded, stratified sample of cases, as case objects.
        rules: How many cases each rule matched in, as ``[kind, label, count]``.
        directory: Where the file is, once written.
    """

    name: str
    rows: int
    sha256: str
    worst: list[dict[str, Any]]
    sample: list[dict[str, Any]] = field(default_factory=list, repr=False)
    rules: list[list[Any]] = field(default_factory=list, repr=False)
    directory: Path | None = field(default=None, repr=False)

    @property
    def path(self) -> Path:
        """The file."""
        return (self.directory or Path()) / self.name

    def describe(self) -> dict[str, Any]:
        """What report.json says of the file."""
        return {
            "path": self.name,
            "format": "parquet",
            "rows": self.rows,
            "sha256": self.sha256,
            "order": "input",
        }


@dataclass
class Report:
    """A scored run: its metadata, cases, metrics and failure geometry.

    Attributes:
        run: The ``run`` object (id, created_at, target, probe_set, rules, config).
        cases: The cases, in the report's stable order (a :class:`CaseLines` for large runs).
        aggregate_metrics: The run-level metrics.
        observability: The failure geometry, or ``None`` below the minimum number of cases.
        cases_file: For a large run, the cases.parquet that holds its cases (``cases`` is
            then empty).
    """

    run: dict[str, Any]
    cases: Sequence[CaseScore]
    aggregate_metrics: dict[str, Any]
    observability: dict[str, Any] | None
    cases_file: CasesFile | None = None

    @property
    def header(self) -> dict[str, Any]:
        """The fields that precede the cases in report.json."""
        return {
            "schema_version": SCHEMA_VERSION if self.cases_file is None else SPLIT_SCHEMA_VERSION,
            "tool": {"name": "faultline", "version": __version__},
            "run": self.run,
        }

    def to_dict(self) -> dict[str, Any]:
        """The whole report as plain Python data (cases as dicts), in contract order."""
        if self.cases_file is not None:
            return {
                **self.header,
                "cases_file": self.cases_file.describe(),
                "worst_cases": self.cases_file.worst,
                "aggregate_metrics": self.aggregate_metrics,
                "observability": self.observability,
            }
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
