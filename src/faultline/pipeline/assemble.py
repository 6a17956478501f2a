"""The parent side of scoring: merge batch results into one run, then lay its cases out.

Batch results arrive in input order. Their metrics, verdict tables, pairs and counts merge
exactly. The cases then go one of two ways:

- **inline** (up to ``cases_inline_max``): each case's report.json line is kept, the lines are
  put in the report's stable order (model, probe-set order, sample) by sorting a few integer
  columns, and the geometry's fields are spliced into each line: the same bytes
  ``build_report`` writes for the same cases.
- **cases.parquet** (above it): each batch's Arrow table is appended to a spill file as it
  arrives, so the parent holds 24 bytes a case (the duplicate check's key and the exact
  quantiles' values) and not the case. Once the geometry is known, cases.parquet is written
  from the spill (:mod:`faultline.pipeline.spill`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from faultline._util.memory import release_free_memory
from faultline.errors import ResponseError
from faultline.metrics.aggregate import MetricsAccumulator
from faultline.observability.documents import VerdictTable, probe_document
from faultline.observability.geometry import PairGeometry, pair_geometry
from faultline.observability.pairs import PairStats
from faultline.pipeline.batch import BatchResult
from faultline.pipeline.spill import Spill, write_cases
from faultline.probes.probeset import ProbeSet
from faultline.report.model import CaseLines, CasesFile
from faultline.report.sampling import StratifiedSampler

__all__ = ["RunAssembly"]

_FLOAT = msgspec.json.Encoder()
_TRIM_EVERY = 16
"""Pieces between two returns of freed memory to the system (a few milliseconds each)."""


@dataclass
class _Inline:
    json: list[bytes] = field(default_factory=list)
    case_ids: list[str] = field(default_factory=list)
    verdict: list[NDArray[np.int64]] = field(default_factory=list)


class RunAssembly:
    """Collects batch results and turns them into the run's cases, metrics and geometry.

    Args:
        probe_set: The probes the responses answer.
        severity_weights: The run's severity weights.
        model_names: The run's models in rank order (``""``, first, for no model).
        spill: Where large runs spill their cases (``None``: cases stay inline).
    """

    def __init__(
        self,
        probe_set: ProbeSet,
        severity_weights: dict[str, float],
        *,
        model_names: list[str],
        spill: Path | None,
    ) -> None:
        self.probe_set = probe_set
        self.model_names = model_names
        self.metrics = MetricsAccumulator(severity_weights)
        self.verdicts = VerdictTable()
        self.probe_counts = np.zeros((4, len(probe_set)), dtype=np.int64)
        self.strata: Counter[tuple[str, str]] = Counter()
        self.rules: Counter[tuple[str, str]] = Counter()
        self.models: set[str] = set()
        self._pairs: list[PairStats] = []
        self._keys: list[NDArray[np.int64]] = []
        self._lines: list[NDArray[np.int64]] = []
        self._paths: list[Path] = []
        self._inline = _Inline() if spill is None else None
        self._spill = None if spill is None else Spill(spill)

    @property
    def inline(self) -> bool:
        """Whether the cases are kept inline."""
        return self._inline is not None

    def add(self, result: BatchResult, path: Path) -> None:
        """Fold in one piece's result (pieces must arrive in input order)."""
        self.metrics.merge(result.metrics)
        mapping = self.verdicts.merge(result.verdicts)
        self._pairs.append(result.pairs.with_verdicts(mapping))
        self.probe_counts += result.probe_counts
        self.strata.update(result.strata)
        self.rules.update(result.rules)
        self.models |= result.models
        self._keys.append(_pack(result.keys))
        self._paths.append(path)
        if self._inline is not None:
            self._lines.append(result.lines)
            assert result.verdict is not None
            verdict = result.verdict.copy()
            known = verdict >= 0
            verdict[known] = mapping[verdict[known]]
            self._inline.verdict.append(verdict)
            self._inline.json.extend(result.json)
            self._inline.case_ids.extend(result.case_ids)
        else:
            assert self._spill is not None
            self._spill.append(result.table, mapping)
        if len(self._pairs) >= 64:  # keep the pair list short on long inputs
            self._pairs = [PairStats.merged(self._pairs)]
        if len(self._keys) % _TRIM_EVERY == 0:
            release_free_memory()  # results and merges freed, but held by the heap

    @property
    def n_cases(self) -> int:
        """How many cases so far."""
        return sum(k.shape[0] for k in self._keys)

    def answered(self) -> set[int]:
        """The indices of the probes some response answers."""
        return set(np.flatnonzero(self.probe_counts[0]).tolist())

    def failed_per_probe(self) -> dict[str, int]:
        """Failed cases per probe id."""
        probes = self.probe_set.probes
        return {probes[i].id: int(n) for i, n in enumerate(self.probe_counts[3].tolist()) if n}

    def check_unique(self) -> None:
        """Raise when two responses answer the same probe, sample and model."""
        if not self._keys:
            return
        keys = self._all_keys()
        if keys.ndim == 1:
            keys.sort()  # in place: a fresh copy, sorted without another one
            if not np.any(keys[1:] == keys[:-1]):
                return
            flat = self._all_keys()
        else:
            if np.unique(keys, axis=0).shape[0] == keys.shape[0]:
                return
            flat = np.unique(keys, axis=0, return_inverse=True)[1].ravel()
        order = np.argsort(flat, kind="stable")
        repeat = np.flatnonzero(flat[order][1:] == flat[order][:-1])
        # The repeat that comes first in input order, and the answer it repeats.
        second = int(np.min(order[repeat + 1]))
        first = int(np.flatnonzero(flat == flat[second])[0])
        self._raise_repeat(first, second)

    def _all_keys(self) -> NDArray[np.int64]:
        """Every case's key: packed, or rows of three when some batch's keys do not pack."""
        if all(k.ndim == 1 for k in self._keys):
            return np.concatenate(self._keys)
        return np.concatenate([np.stack(_columns(k), axis=1) for k in self._keys])

    def _raise_repeat(self, first: int, second: int) -> None:
        (first_path, first_line), (path, line) = self._places([first, second])
        model, probe, sample = _unpack(self._all_keys()[second])
        name = self.model_names[model] if model < len(self.model_names) else ""
        by = f" by model '{name}'" if name else ""
        unit = "row" if first_path.name.lower().endswith(".parquet") else "line"
        where = (
            f"{unit} {first_line}" if first_path == path else f"{first_path}, {unit} {first_line}"
        )
        raise ResponseError(
            f"probe '{self.probe_set.probes[probe].id}' sample {sample} is answered twice{by} "
            f"(first at {where}); give each generation its own sample number",
            path=path,
            line=line,
            field="sample",
        )

    def _places(self, rows: Sequence[int]) -> list[tuple[Path, int]]:
        """The file and line of each of some cases, given their places in the input."""
        sizes = np.cumsum([k.shape[0] for k in self._keys])
        out = []
        for row in rows:
            piece = int(np.searchsorted(sizes, row, side="right"))
            offset = row - (int(sizes[piece - 1]) if piece else 0)
            out.append((self._paths[piece], self._line_of(piece, offset)))
        return out

    def _line_of(self, piece: int, offset: int) -> int:
        if self._inline is not None:
            return int(self._lines[piece][offset])
        assert self._spill is not None
        return self._spill.line(piece, offset)

    # ------------------------------------------------------------------------ geometry

    def geometry(self, *, seed: int, min_cases: int) -> tuple[PairStats, PairGeometry | None]:
        """The run's pairs in report order, and their geometry (``None`` below ``min_cases``)."""
        pairs = PairStats.merged(self._pairs).in_report_order()
        self._pairs = [pairs]
        if int(pairs.count.sum()) < min_cases or pairs.count.size == 0:
            return pairs, None
        probes = self.probe_set.probes
        present = set(pairs.probe.tolist())
        probe_texts = [
            probe_document(p.category, p.severity, p.expect, p.task, p.input_text)
            if i in present
            else ""
            for i, p in enumerate(probes)
        ]
        geometry = pair_geometry(
            pairs,
            probe_texts,
            self.verdicts.texts(),
            probe_category=np.asarray([p.category for p in probes], dtype=object),
            probe_severity=np.asarray([p.severity for p in probes], dtype=object),
            verdict_passed=np.asarray(
                [key[0] == "pass" for key in self.verdicts.verdict_keys()], dtype=bool
            ),
            seed=seed,
            min_cases=min_cases,
        )
        return pairs, geometry

    # -------------------------------------------------------------------------- inline

    def inline_cases(self, pairs: PairStats, geometry: PairGeometry | None) -> CaseLines:
        """The cases in report order, with the geometry's fields attached."""
        assert self._inline is not None
        keys = self._all_keys() if self._keys else np.zeros(0, dtype=np.int64)
        model, probe, sample = _columns(keys)
        order = np.lexsort((sample, probe, model))
        json = [self._inline.json[i] for i in order.tolist()]
        case_ids = [self._inline.case_ids[i] for i in order.tolist()]
        if geometry is None:
            return CaseLines(json, case_ids)
        verdict = np.concatenate(self._inline.verdict)[order]
        scored = verdict >= 0
        at = pairs.locate(probe[order][scored], verdict[scored])
        return CaseLines(json, case_ids, _tails(len(json), scored, geometry, at))

    # ---------------------------------------------------------------------- cases.parquet

    def write_cases(
        self,
        path: Path,
        pairs: PairStats,
        geometry: PairGeometry | None,
        *,
        worst: list[str],
        sample_size: int,
        seed: int,
    ) -> CasesFile:
        """Write cases.parquet from the spill (:func:`faultline.pipeline.spill.write_cases`)."""
        assert self._spill is not None
        release_free_memory()  # what the duplicate check and the geometry freed
        sampler = StratifiedSampler(self.strata, sample_size, seed)
        return write_cases(self._spill, path, pairs, geometry, worst=worst, sampler=sampler)


_PROBE_BITS, _SAMPLE_BITS, _MODEL_BITS = 21, 31, 11


def _pack(keys: NDArray[np.int64]) -> NDArray[np.int64]:
    """(model rank, probe, sample) rows as one int64 each when they fit, else the rows."""
    if keys.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    fits = (
        keys[:, 0].max() < 1 << _MODEL_BITS
        and keys[:, 1].max() < 1 << _PROBE_BITS
        and keys[:, 2].min() >= 0
        and keys[:, 2].max() < 1 << _SAMPLE_BITS
    )
    if not fits:
        return keys
    packed: NDArray[np.int64] = (
        (keys[:, 0] << (_PROBE_BITS + _SAMPLE_BITS)) | (keys[:, 1] << _SAMPLE_BITS) | keys[:, 2]
    )
    return packed


def _columns(
    keys: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    if keys.ndim == 2:
        return keys[:, 0], keys[:, 1], keys[:, 2]
    mask = (1 << _SAMPLE_BITS) - 1
    return (
        keys >> (_PROBE_BITS + _SAMPLE_BITS),
        (keys >> _SAMPLE_BITS) & ((1 << _PROBE_BITS) - 1),
        keys & mask,
    )


def _unpack(key: Any) -> tuple[int, int, int]:
    if np.ndim(key) == 1:
        return int(key[0]), int(key[1]), int(key[2])
    model, probe, sample = _columns(np.asarray([key], dtype=np.int64))
    return int(model[0]), int(probe[0]), int(sample[0])


def _tails(
    n: int, scored: NDArray[np.bool_], geometry: PairGeometry, at: NDArray[np.int64]
) -> list[bytes]:
    """For each case, what replaces its line's closing brace.

    A scored case gets the geometry fields and the brace (they are the last fields of a
    case, so this gives exactly the bytes that encoding the case with them set would); an
    error case keeps its brace.
    """
    tails = [b"}"] * n
    clusters = _FLOAT.encode(geometry.cluster[at].tolist())[1:-1].split(b",")
    xs = _FLOAT.encode(geometry.x[at].tolist())[1:-1].split(b",")
    ys = _FLOAT.encode(geometry.y[at].tolist())[1:-1].split(b",")
    for i, c, x, y in zip(np.flatnonzero(scored).tolist(), clusters, xs, ys, strict=True):
        tails[i] = b',"cluster":' + c + b',"scatter_x":' + x + b',"scatter_y":' + y + b"}"
    return tails
