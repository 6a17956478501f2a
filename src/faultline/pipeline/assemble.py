"""The parent side of scoring a file: merge chunk results into one run, in report order.

Chunks arrive in file order. Their metrics merge exactly; their verdict tables merge into one;
their cases are put in the report's stable order (model, probe-set order, sample) by sorting
a few integer columns, and only then is the failure geometry computed and spliced into each
case's line — the same bytes ``build_report`` would write for the same cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from faultline.errors import ResponseError
from faultline.metrics.aggregate import MetricsAccumulator
from faultline.metrics.transforms import transform_metrics
from faultline.observability.documents import VerdictTable, pair_documents, probe_document
from faultline.observability.geometry import CaseColumns, Geometry, geometry_of
from faultline.pipeline.chunks import ChunkResult
from faultline.probes.probeset import ProbeSet
from faultline.report.model import CaseLines

__all__ = ["RunAssembly"]

_FLOAT = msgspec.json.Encoder()


@dataclass
class _Columns:
    lines: list[int]
    case_ids: list[str]
    probe: list[NDArray[np.int64]]
    sample: list[NDArray[np.int64]]
    models: list[str | None]
    scored: list[NDArray[np.bool_]]
    passed: list[NDArray[np.bool_]]
    risk: list[NDArray[np.float64]]
    verdict: list[NDArray[np.int64]]
    json: list[bytes]


class RunAssembly:
    """Collects chunk results and turns them into the run's cases, metrics and geometry.

    Args:
        probe_set: The probes the responses answer.
        path: The responses file, for messages.
        severity_weights: The run's severity weights.
    """

    def __init__(self, probe_set: ProbeSet, path: Path, severity_weights: dict[str, float]) -> None:
        self.probe_set = probe_set
        self.path = path
        self.metrics = MetricsAccumulator(severity_weights)
        self.verdicts = VerdictTable()
        self._c = _Columns([], [], [], [], [], [], [], [], [], [])

    def add(self, result: ChunkResult) -> None:
        """Fold in one chunk's result (chunks must arrive in file order)."""
        c = self._c
        c.lines.extend(result.lines)
        c.case_ids.extend(result.case_ids)
        c.probe.append(result.probe)
        c.sample.append(result.sample)
        c.models.extend(result.models)
        c.scored.append(result.scored)
        c.passed.append(result.passed)
        c.risk.append(result.risk)
        mapping = self.verdicts.merge(result.verdicts)
        # Error cases keep -1; a chunk of errors only has an empty mapping, so index by mask.
        verdict = np.full_like(result.verdict, -1)
        known = result.verdict >= 0
        verdict[known] = mapping[result.verdict[known]]
        c.verdict.append(verdict)
        c.json.extend(result.json)
        self.metrics.merge(result.metrics)

    def failed_per_probe(self) -> dict[str, int]:
        """Failed cases per probe id."""
        c = self._c
        failed = _cat(c.scored, np.bool_) & ~_cat(c.passed, np.bool_)
        counts = np.bincount(_cat(c.probe, np.int64)[failed], minlength=len(self.probe_set))
        probes = self.probe_set.probes
        return {probes[i].id: int(n) for i, n in enumerate(counts.tolist()) if n}

    def transform_metrics(self) -> dict[str, Any] | None:
        """``by_transform``: outcomes per attack transform, or ``None`` when none was applied."""
        c = self._c
        return transform_metrics(
            self.probe_set.probes,
            _cat(c.probe, np.int64),
            _cat(c.scored, np.bool_),
            _cat(c.passed, np.bool_),
        )

    @property
    def models(self) -> list[str]:
        """The models that answered, sorted."""
        return sorted({m for m in self._c.models if m is not None})

    def finish(self, *, seed: int, min_cases: int) -> tuple[CaseLines, Geometry | None, set[int]]:
        """Order the cases, check them, and compute the geometry of the scored ones.

        Returns:
            ``(cases, geometry, answered)``: the cases in report order, with the geometry's
            fields attached; the geometry (or ``None``); the indices of answered probes.

        Raises:
            ResponseError: Two responses answer the same probe, sample and model.
        """
        c = self._c
        probe, sample = _cat(c.probe, np.int64), _cat(c.sample, np.int64)
        model_names = sorted({m or "" for m in c.models})
        model_rank = {name: i for i, name in enumerate(model_names)}
        model = np.asarray([model_rank[m or ""] for m in c.models], dtype=np.int64)
        self._check_unique(probe, sample, model, model_names)
        order = np.lexsort((sample, probe, model))
        json = [c.json[i] for i in order.tolist()]
        case_ids = [c.case_ids[i] for i in order.tolist()]
        scored = _cat(c.scored, np.bool_)[order]
        if int(scored.sum()) < min_cases or not scored.any():
            return CaseLines(json, case_ids), None, set(np.unique(probe).tolist())
        geometry = self._geometry(order, scored, probe, seed=seed, min_cases=min_cases)
        return (
            CaseLines(json, case_ids, _tails(len(json), scored, geometry)),
            geometry,
            set(np.unique(probe).tolist()),
        )

    def _geometry(
        self,
        order: NDArray[np.int64],
        scored: NDArray[np.bool_],
        probe: NDArray[np.int64],
        *,
        seed: int,
        min_cases: int,
    ) -> Geometry:
        c = self._c
        rows = order[scored]
        case_probe = probe[rows]
        probes = self.probe_set.probes
        present = set(np.unique(case_probe).tolist())
        probe_texts = [
            probe_document(p.category, p.severity, p.expect, p.task, p.input_text)
            if i in present
            else ""
            for i, p in enumerate(probes)
        ]
        docs = pair_documents(
            probe_texts, self.verdicts.texts(), case_probe, _cat(c.verdict, np.int64)[rows]
        )
        category = np.asarray([p.category for p in probes], dtype=object)
        severity = np.asarray([p.severity for p in probes], dtype=object)
        columns = CaseColumns(
            category=category[case_probe],
            severity=severity[case_probe],
            passed=_cat(c.passed, np.bool_)[rows],
            risk=_cat(c.risk, np.float64)[rows],
        )
        return geometry_of(docs, columns, seed=seed, min_cases=min_cases)

    def _check_unique(
        self,
        probe: NDArray[np.int64],
        sample: NDArray[np.int64],
        model: NDArray[np.int64],
        names: Sequence[str],
    ) -> None:
        if probe.size == 0:
            return
        if int(sample.min()) >= 0 and int(sample.max()) < 1 << 31 and len(names) < 1 << 11:
            keys = (probe << 42) | (model << 31) | sample
            repeated = np.unique(keys).size < keys.size
        else:
            repeated = (
                np.unique(np.stack([probe, sample, model], axis=1), axis=0).shape[0] < probe.size
            )
        if not repeated:
            return
        # Name the first repeat in file order, and the answer it repeats.
        seen: dict[tuple[int, int, int], int] = {}
        for i, key in enumerate(zip(probe.tolist(), sample.tolist(), model.tolist(), strict=True)):
            if key in seen:
                by = f" by model '{names[key[2]]}'" if names[key[2]] else ""
                raise ResponseError(
                    f"probe '{self.probe_set.probes[key[0]].id}' sample {key[1]} is answered twice{by} "
                    f"(first at line {self._c.lines[seen[key]]}); give each generation its own sample number",
                    path=self.path,
                    line=self._c.lines[i],
                    field="sample",
                )
            seen[key] = i


def _cat(parts: Sequence[NDArray[Any]], dtype: type[np.generic]) -> NDArray[Any]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _tails(n: int, scored: NDArray[np.bool_], geometry: Geometry) -> list[bytes]:
    """For each case, what replaces its line's closing brace.

    A scored case gets the geometry fields and the brace (they are the last fields of a
    case, so this gives exactly the bytes that encoding the case with them set would); an
    error case keeps its brace.
    """
    tails = [b"}"] * n
    clusters = _FLOAT.encode(geometry.cluster)[1:-1].split(b",")
    xs = _FLOAT.encode(geometry.x)[1:-1].split(b",")
    ys = _FLOAT.encode(geometry.y)[1:-1].split(b",")
    for i, c, x, y in zip(np.flatnonzero(scored).tolist(), clusters, xs, ys, strict=True):
        tails[i] = b',"cluster":' + c + b',"scatter_x":' + x + b',"scatter_y":' + y + b"}"
    return tails
