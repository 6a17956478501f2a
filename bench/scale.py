"""Step ``scale`` of ``make bench``: ``faultline score`` on millions of responses (issue 7).

For every size in ``--scale-sizes`` (default 1,000,000 and 10,000,000; ``--quick``: 20,000
and 100,000): generate or reuse the seeded corpus, run
``python -m faultline score --probes … --responses … --out … --workers 2`` in a fresh
process, and record its wall time (start to exit), the peak of the summed resident sets of
the whole process tree (the parent, the forkserver and its workers; with Dask, the cluster's
worker processes), its CPU seconds, and the size of every file written. At ``--scale-dask``
(default: the largest size) the same command runs again with ``--engine dask`` (a Dask
LocalCluster of the same number of workers) and the two outputs are compared: report.json
byte for byte once ``run.id`` and ``run.created_at`` are set aside, cases.parquet byte for
byte.

A 10M run writes gigabytes, so the step checks the free disk first and deletes its outputs
once measured. A corpus stays cached in ``bench/out/corpus/`` unless fewer than
``KEEP_CORPUS_FREE`` bytes would be left, or ``--scale-drop-corpus`` is given::

    python bench/run.py --only scale                     # 1M and 10M, Dask at 10M: 31 min
    python bench/run.py --only scale --quick             # 20,000 and 100,000
    python bench/run.py --only scale --scale-sizes 1000000 --scale-dask 1000000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import corpus as corpus_mod
import measure

GOAL_RESPONSES_PER_S = 50_000
"""Issue 7: 1M responses in 20 s and 10M in 200 s, on 2 cores."""
GOAL_PEAK_BYTES = 1_500_000_000
"""Issue 7: peak memory of the whole process tree at most 1.5 GB, at every size (judged on
the summed resident sets; the anonymous part, without mapped files, is recorded beside it)."""
CORPUS_BYTES_PER_RESPONSE = 600
OUTPUT_BYTES_PER_RESPONSE = 250
DISK_MARGIN = 5 << 30
KEEP_CORPUS_FREE = 20 << 30
RUN_KEYS = ("id", "created_at")


def add_options(parser: argparse.ArgumentParser) -> None:
    """The step's options, on ``bench/run.py``'s parser."""
    parser.add_argument(
        "--scale-sizes",
        default=None,
        help="comma-separated response counts for the scale step "
        "(default 1000000,10000000; quick: 20000,100000)",
    )
    parser.add_argument(
        "--scale-dask",
        type=int,
        default=None,
        help="the size at which the scale step also runs --engine dask and compares the "
        "outputs (default: the largest; 0: none)",
    )
    parser.add_argument(
        "--scale-drop-corpus",
        action="store_true",
        help="delete each scale corpus after measuring it",
    )


def resolve_options(args: argparse.Namespace) -> None:
    """Fill in the defaults that depend on ``--quick``."""
    sizes = args.scale_sizes or ("20000,100000" if args.quick else "1000000,10000000")
    args.scale_sizes = sorted({int(s.replace("_", "")) for s in sizes.split(",")})
    if args.scale_dask is None:
        args.scale_dask = args.scale_sizes[-1]


def scale(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Every size with the local engine, and Dask beside it at ``args.scale_dask``."""
    workers = args.workers or 2
    sizes, comparisons = [], []
    for n in args.scale_sizes:
        engines = ["local", "dask"] if n == args.scale_dask else ["local"]
        free = _check_disk(n, args.seed, len(engines), out)
        print(f"scale: corpus of {n:,} responses ({free / 2**30:,.0f} GiB free) ...", flush=True)
        corpus = corpus_mod.ensure_corpus(n, args.seed)
        runs = [_score(corpus, n, engine, workers, out) for engine in engines]
        if len(runs) == 2:
            check = compare_outputs(out / runs[0]["out_dir"], out / runs[1]["out_dir"])
            print(f"  dask vs local: {'identical' if check['identical'] else 'DIFFERENT'}")
            comparisons.append({"responses": n, "workers": workers} | check)
        for run in runs:
            shutil.rmtree(out / run["out_dir"], ignore_errors=True)
        kept = _keep_corpus(corpus, args.scale_drop_corpus)
        sizes.append({"responses": n, "corpus": _corpus_facts(corpus, kept), "runs": runs})
    return {
        "workers": workers,
        "goal_responses_per_s": GOAL_RESPONSES_PER_S,
        "goal_peak_bytes": GOAL_PEAK_BYTES,
        "sizes": sizes,
        "dask_vs_local": comparisons,
    }


def _python(*args: str | Path) -> list[str]:
    return [sys.executable, *(str(a) for a in args)]


def _score(
    corpus: corpus_mod.Corpus, n: int, engine: str, workers: int, out: Path
) -> dict[str, Any]:
    """One measured ``faultline score`` run; its outputs stay until the caller deletes them."""
    out_dir = out / f"scale-n{n}-{engine}-{os.getpid()}"  # two benchmarks never share one
    shutil.rmtree(out_dir, ignore_errors=True)
    command = _python(
        "-m", "faultline", "score", "--probes", corpus.probes, "--responses", corpus.responses,
        "--out", out_dir, "--workers", str(workers), "--engine", engine,
    )  # fmt: skip
    log = out / f"scale-n{n}-{engine}.log"
    print(f"  {engine}, --workers {workers}: {n:,} responses ...", flush=True)
    run = measure.run_measured(command, log=log)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(run.command)} exited {run.returncode}; see {log}")
    files = {p.name: p.stat().st_size for p in sorted(out_dir.iterdir()) if p.is_file()}
    rate = n / run.seconds
    print(
        f"    {run.seconds:.1f} s, {rate:,.0f} responses/s, peak of the tree "
        f"{run.tree_rss_peak_bytes / 2**20:,.0f} MiB resident, "
        f"{run.tree_anon_peak_bytes / 2**20:,.0f} MiB anonymous",
        flush=True,
    )
    return run.as_dict() | {
        "engine": engine,
        "workers": workers,
        "responses": n,
        "responses_per_s": rate,
        "out_dir": out_dir.name,
        "files_bytes": files,
        "goal_seconds": n / GOAL_RESPONSES_PER_S,
        "time_goal_met": rate >= GOAL_RESPONSES_PER_S,
        "memory_goal_met": run.tree_rss_peak_bytes <= GOAL_PEAK_BYTES,
        "memory_goal_met_anonymous": run.tree_anon_peak_bytes <= GOAL_PEAK_BYTES,
    }


def _check_disk(n: int, seed: int, runs: int, out: Path) -> int:
    """Free bytes on ``out``'s disk; raise if a corpus and ``runs`` outputs will not fit."""
    out.mkdir(parents=True, exist_ok=True)
    cached = (corpus_mod.corpus_dir(n, seed) / "meta.json").exists()
    need = (0 if cached else CORPUS_BYTES_PER_RESPONSE * n) + runs * OUTPUT_BYTES_PER_RESPONSE * n
    free = shutil.disk_usage(out).free
    if free < need + DISK_MARGIN:
        raise RuntimeError(
            f"scale at {n:,} responses needs about {(need + DISK_MARGIN) / 2**30:.0f} GiB free "
            f"on {out}, and {free / 2**30:.0f} GiB are; pass smaller --scale-sizes"
        )
    return free


def _keep_corpus(corpus: corpus_mod.Corpus, drop: bool) -> bool:
    """Whether the corpus stays cached (deleted when asked or when the disk runs short)."""
    if not drop and shutil.disk_usage(corpus.responses).free >= KEEP_CORPUS_FREE:
        return True
    print(f"  deleting the corpus {corpus.responses.parent}", flush=True)
    shutil.rmtree(corpus.responses.parent, ignore_errors=True)
    return False


def _corpus_facts(corpus: corpus_mod.Corpus, kept: bool) -> dict[str, Any]:
    meta = corpus.meta
    return {
        "bytes": meta["bytes"],
        "generate_seconds": meta["generate_seconds"],
        "kept": kept,
        "path": str(corpus.responses.parent),
    }


# --------------------------------------------------------------------------- identity


def compare_outputs(a: Path, b: Path) -> dict[str, Any]:
    """Whether two ``faultline score`` outputs are the same (report.json apart from the run
    id and time, cases.parquet byte for byte)."""
    report = compare_reports(a / "report.json", b / "report.json")
    cases = compare_files(a / "cases.parquet", b / "cases.parquet")
    return {
        "report_json": report,
        "cases_parquet": cases,
        "identical": report["identical_bytes"] and cases["identical_bytes"],
    }


def compare_reports(a: Path, b: Path) -> dict[str, Any]:
    """report.json byte for byte, after putting ``a``'s run id and time into ``b``."""
    raw_a, raw_b = a.read_bytes(), b.read_bytes()
    data_a, data_b = json.loads(raw_a), json.loads(raw_b)
    for key in RUN_KEYS:
        old, new = json.dumps(data_b["run"][key]).encode(), json.dumps(data_a["run"][key]).encode()
        raw_b = raw_b.replace(old, new)
        del data_a["run"][key], data_b["run"][key]
    result: dict[str, Any] = {
        "bytes": [len(raw_a), len(raw_b)],
        "identical_bytes": raw_a == raw_b,
        "identical_parsed": data_a == data_b,
    }
    if not result["identical_bytes"]:
        keys = sorted(set(data_a) | set(data_b))
        result["differing_keys"] = [k for k in keys if data_a.get(k) != data_b.get(k)]
        at = next((i for i, (x, y) in enumerate(zip(raw_a, raw_b, strict=False)) if x != y), None)
        at = min(len(raw_a), len(raw_b)) if at is None else at
        result["first_difference"] = {
            "offset": at,
            "a": raw_a[max(0, at - 80) : at + 80].decode(errors="replace"),
            "b": raw_b[max(0, at - 80) : at + 80].decode(errors="replace"),
        }
    return result


def compare_files(a: Path, b: Path) -> dict[str, Any]:
    """Two files byte for byte (SHA-256); for Parquet files that differ, also their rows."""
    if not (a.exists() and b.exists()):
        return {"present": [a.exists(), b.exists()], "identical_bytes": a.exists() == b.exists()}
    digests = [_sha256(a), _sha256(b)]
    result: dict[str, Any] = {
        "bytes": [a.stat().st_size, b.stat().st_size],
        "sha256": digests,
        "identical_bytes": digests[0] == digests[1],
    }
    if not result["identical_bytes"] and a.suffix == ".parquet":
        import pyarrow.parquet as pq

        result["identical_rows"] = pq.read_table(a).equals(pq.read_table(b))
    return result


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()
