"""Observability at scale: time and peak memory of ``compute_observability`` on N cases.

Two commands. ``cache`` turns the cases of a ``faultline score`` report (report.json, or the
cases.parquet beside it above ``--cases-inline-max`` cases) back into the order of the
responses file and stores them as length-prefixed msgpack frames, so that the first N cases
(the cases of the corpus's first N responses) can be read without the rest::

    python bench/observe.py cache --report OUT/report.json --responses R --out CASES

``run`` reads the first N cases, resets the process's peak-memory mark, runs
``faultline.observability.compute_observability(cases, seed=0)`` and prints JSON with its
wall time, the process's peak resident set during the step, and the resident set before it
(the cases themselves)::

    python bench/observe.py run --cases CASES --n 100000

Run each size in a fresh process so that sizes do not share a peak.
"""

from __future__ import annotations

import argparse
import gc
import json
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from faultline.observability import compute_observability
from faultline.scoring import CaseScore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import peak_rss_self, reset_peak_rss, rss_self

FRAME_CASES = 10_000
_HEADER = struct.Struct("<Q")


class _Key(msgspec.Struct):
    probe_id: str
    sample: int = 0
    model: str | None = None


class _ReportCases(msgspec.Struct):
    cases: list[CaseScore] | None = None


def _line_index(responses: Path) -> dict[tuple[str, int, str | None], int]:
    decoder = msgspec.json.Decoder(_Key)
    index: dict[tuple[str, int, str | None], int] = {}
    with responses.open("rb") as handle:
        for i, line in enumerate(handle):
            key = decoder.decode(line)
            index[(key.probe_id, key.sample, key.model)] = i
    return index


def report_cases(report: Path) -> list[CaseScore]:
    """A report's cases: in report.json, or in the cases.parquet beside it (schema 2)."""
    cases = msgspec.json.decode(report.read_bytes(), type=_ReportCases).cases
    parquet = report.parent / "cases.parquet"
    if cases or not parquet.exists():
        return cases or []
    from faultline.report.parquet import read_cases

    return [msgspec.convert(case, CaseScore) for case in read_cases(parquet)]


def build_cache(report: Path, responses: Path, out: Path) -> int:
    """Store the report's cases in responses-file order; returns how many."""
    cases = report_cases(report)
    index = _line_index(responses)
    cases.sort(key=lambda c: index[(c.probe_id, c.sample, c.model)])
    encoder = msgspec.msgpack.Encoder()
    tmp = out.with_suffix(".tmp")
    with tmp.open("wb") as handle:
        for start in range(0, len(cases), FRAME_CASES):
            part = cases[start : start + FRAME_CASES]
            for case in part:
                case.cluster = case.scatter_x = case.scatter_y = None
            data = encoder.encode(part)
            handle.write(_HEADER.pack(len(data)) + data)
    tmp.replace(out)
    return len(cases)


def iter_frames(path: Path) -> Iterator[list[CaseScore]]:
    """The cached cases, a frame at a time."""
    decoder = msgspec.msgpack.Decoder(list[CaseScore])
    with path.open("rb") as handle:
        while header := handle.read(_HEADER.size):
            (size,) = _HEADER.unpack(header)
            yield decoder.decode(handle.read(size))


def read_cases(path: Path, n: int) -> list[CaseScore]:
    """The first ``n`` cached cases."""
    cases: list[CaseScore] = []
    for frame in iter_frames(path):
        cases.extend(frame[: n - len(cases)])
        if len(cases) >= n:
            break
    return cases


def run(cases_path: Path, n: int, seed: int) -> dict[str, Any]:
    """Time ``compute_observability`` on the first ``n`` cases."""
    cases = read_cases(cases_path, n)
    gc.collect()
    before = rss_self()
    reset = reset_peak_rss()
    start = time.perf_counter()
    geometry = compute_observability(cases, seed=seed)
    seconds = time.perf_counter() - start
    peak = peak_rss_self()
    summary = geometry.summary if geometry is not None else {}
    embedding = summary.get("embedding", {})
    # The distinct points the geometry works on: "documents" in older versions, "pairs" of
    # probe and verdict documents since the embedding was split in two.
    distinct = next(
        (
            embedding[k]
            for k in ("distinct_pairs", "documents")
            if isinstance(embedding.get(k), int)
        ),
        None,
    )
    return {
        "cases": len(cases),
        "scored": summary.get("n_cases", 0),
        "seconds": seconds,
        "rss_before_bytes": before,
        "peak_rss_bytes": peak,
        "peak_is_of_step": reset,
        "documents": distinct,
        "embedding": {k: v for k, v in embedding.items() if isinstance(v, int | float)},
        "n_clusters": summary.get("n_clusters"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cache = commands.add_parser("cache")
    cache.add_argument("--report", type=Path, required=True)
    cache.add_argument("--responses", type=Path, required=True)
    cache.add_argument("--out", type=Path, required=True)
    measure = commands.add_parser("run")
    measure.add_argument("--cases", type=Path, required=True)
    measure.add_argument("--n", type=int, required=True)
    measure.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.command == "cache":
        print(json.dumps({"cases": build_cache(args.report, args.responses, args.out)}))
    else:
        print(json.dumps(run(args.cases, args.n, args.seed)))


if __name__ == "__main__":
    main()
