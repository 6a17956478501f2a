"""Where the end-to-end time goes: ``score_files`` on the corpus with each stage timed.

Wraps (in this process only, without touching faultline's code) the stages ``score_files``
calls: starting the engine, finding the models (a first pass over the input), reading and
scoring the pieces (in the workers) while the parent merges them, the duplicate check, the
failure geometry, the run's metrics, writing cases.parquet (above ``cases_inline_max``
cases) and writing report.json, report.md and report.html. The times are wall times seen by
the parent, with the main process's peak resident set during each stage (its workers are
not counted). When the pipeline is reorganised, stages whose functions moved are listed as
not found and their time lands in "other" (update ``STAGES``). Prints JSON::

    python bench/stages.py --n 1000000 [--workers 2] [--engine dask]
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus as corpus_mod  # noqa: E402
import measure  # noqa: E402

import faultline  # noqa: E402
from faultline import pipeline  # noqa: E402
from faultline.metrics import aggregate  # noqa: E402
from faultline.pipeline import assemble, engines  # noqa: E402

TIMES: dict[str, float] = {}
PEAKS: dict[str, int] = {}
"""The main process's peak resident set during each top-level stage (``TOP``)."""


def _enter(name: str) -> float:
    if name in TOP:
        measure.reset_peak_rss()
    return time.perf_counter()


def _leave(name: str, start: float) -> None:
    TIMES[name] = TIMES.get(name, 0.0) + time.perf_counter() - start
    if name in TOP:
        PEAKS[name] = max(PEAKS.get(name, 0), measure.peak_rss_self())


def _timed(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = _enter(name)
        try:
            return func(*args, **kwargs)
        finally:
            _leave(name, start)

    return wrapper


def _timed_iter(name: str, func: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """Time a function that returns an iterator, from the call until the iterator is spent."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        start = _enter(name)
        yield from func(*args, **kwargs)
        _leave(name, start)

    return wrapper


# (owner, attribute, stage, returns an iterator): the functions score_files calls. A stage
# whose function has moved is left out and listed in the output's "stages_not_found".
STAGES = (
    (pipeline, "open_engine", "start_engine", False),
    (engines._Pool, "scan", "find_models", True),
    (engines._Dask, "scan", "find_models", True),
    (engines._Pool, "score", "read_and_score", True),
    (engines._Dask, "score", "read_and_score", True),
    (assemble.RunAssembly, "add", "merge_in_parent", False),
    (engines._Pool, "close", "stop_engine", False),
    (engines._Dask, "close", "stop_engine", False),
    (assemble.RunAssembly, "check_unique", "duplicate_check", False),
    (assemble.RunAssembly, "geometry", "geometry", False),
    (aggregate.MetricsAccumulator, "result", "metrics", False),
    (assemble.RunAssembly, "write_cases", "write_cases_parquet", False),
    (pipeline, "write_report", "write_report", False),
)
TOP = (
    "start_engine",
    "find_models",
    "read_and_score",
    "stop_engine",
    "duplicate_check",
    "geometry",
    "metrics",
    "write_cases_parquet",
    "write_report",
)


def _wrap_stages() -> list[str]:
    missing = []
    for module, name, stage, iterates in STAGES:
        func = getattr(module, name, None)
        if func is None:
            missing.append(f"{getattr(module, '__name__', module)}.{name}")
        elif iterates or inspect.isgeneratorfunction(func):
            setattr(module, name, _timed_iter(stage, func))
        else:
            setattr(module, name, _timed(stage, func))
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--engine", choices=("local", "dask"), default="local")
    args = parser.parse_args()
    corpus = corpus_mod.ensure_corpus(args.n, args.seed)
    missing = _wrap_stages()
    load, (busy, steal) = os.getloadavg(), measure.cpu_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run = pipeline.score_files(
            corpus.probes,
            corpus.responses,
            Path(tmp) / "report",
            workers=args.workers,
            engine=args.engine,
        )
        total = time.perf_counter() - start
    busy_after, steal_after = measure.cpu_seconds()
    other = total - sum(TIMES.get(k, 0.0) for k in TOP)
    package = Path(faultline.__file__).parent
    result = {
        "faultline": str(package),
        "src_sha256": measure.package_digest(package),
        "load_before": list(load),
        "machine_busy_cpu_seconds": busy_after - busy,
        "steal_cpu_seconds": steal_after - steal,
        "responses": args.n,
        "engine": args.engine,
        "workers": getattr(run, "workers", None),
        "total_seconds": total,
        "stages_seconds": TIMES | {"other": other},
        "stages_share": {k: v / total for k, v in (TIMES | {"other": other}).items()},
        "stages_peak_rss_mib": {k: round(v / 2**20) for k, v in PEAKS.items()},
        "stages_not_found": missing,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
