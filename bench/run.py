"""``make bench``: faultline's benchmarks, recorded in docs/benchmarks.md.

1. Generate (or reuse) the seeded corpus of the largest size: 1,000 probes and N responses.
2. End to end: ``python -m faultline score`` on the whole corpus, ``--repeats`` times, wall
   time from start to exit (read to written) and peak memory of the process tree.
3. Baseline: on the corpus's first ``--sample`` responses, in one process, the same rules as a
   naive loop of Python ``re.search`` per pattern, faultline's matcher, and its full scorer.
4. Observability: ``compute_observability`` on the cases of the first N responses for every
   N in ``--sizes``, each in a fresh process: wall time and peak memory of that step.
5. Runner: ``faultline run`` against a zero-latency local OpenAI-compatible server in another
   process, at concurrency 64 (``runner_overhead.py``): requests per second while sending.
6. Scale (``scale.py``): ``faultline score --workers 2`` on 1M and 10M responses, wall time
   and peak memory of the process tree, and Dask beside the local engine at the largest size
   with a check that both write the same report. Not in the default run (about 31 minutes
   on 2 cores, plus 7 to generate the 10M corpus once, and 9 GB of disk); ``--only scale``
   runs it.

Results go to ``bench/out/results.json`` (``results-quick.json`` with ``--quick``;
``results-scale.json`` when the scale step runs alone) and a Markdown table to stdout and
``bench/out/results.md`` (the same names)::

    python bench/run.py                      # the full run (1M responses; 5 to 10 minutes)
    python bench/run.py --quick              # a smoke run on 20,000 responses
    python bench/run.py --sizes 10000,100000 --repeats 3
    python bench/run.py --only scale [--quick]   # 1M and 10M (quick: 20,000 and 100,000)
    make bench FAULTLINE_BENCH_ARGS="--quick"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus as corpus_mod  # noqa: E402
import measure  # noqa: E402
import scale as scale_mod  # noqa: E402
import tables  # noqa: E402

ROOT = HERE.parent
OUT = HERE / "out"
GOAL_THROUGHPUT = 50_000
GOAL_SPEEDUP = 100
STEPS = ("e2e", "baseline", "observability", "runner", "scale")
DEFAULT_STEPS = ("e2e", "baseline", "observability", "runner")
CORPUS_STEPS = ("e2e", "baseline", "observability")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="faultline benchmarks (docs/benchmarks.md)")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated case counts for observability; the largest is also the "
        "end-to-end corpus (default 10000,100000,1000000; quick: 2000,10000,20000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="corpus seed")
    parser.add_argument("--repeats", type=int, default=None, help="end-to-end runs (default 2)")
    parser.add_argument("--sample", type=int, default=None, help="baseline sample (20000)")
    parser.add_argument("--workers", type=int, default=None, help="faultline score --workers")
    parser.add_argument(
        "--only",
        default=",".join(DEFAULT_STEPS),
        help=f"steps to run, of {', '.join(STEPS)} (default: all but scale)",
    )
    scale_mod.add_options(parser)
    parser.add_argument(
        "--label", default="", help="what is measured, e.g. a commit, for the table"
    )
    if argv is None:  # `make bench FAULTLINE_BENCH_ARGS="--quick"` passes options through make
        argv = shlex.split(os.environ.get("FAULTLINE_BENCH_ARGS", "")) + sys.argv[1:]
    args = parser.parse_args(argv)
    sizes = args.sizes or ("2000,10000,20000" if args.quick else "10000,100000,1000000")
    args.sizes = sorted({int(s.replace("_", "")) for s in sizes.split(",")})
    args.repeats = args.repeats or (1 if args.quick else 2)
    args.sample = min(args.sample or (2000 if args.quick else 20_000), args.sizes[-1])
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(args.only) - set(STEPS))
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; expected some of {', '.join(STEPS)}")
    scale_mod.resolve_options(args)
    return args


def _python(*args: str | Path) -> list[str]:
    return [sys.executable, *(str(a) for a in args)]


def _last_json(log: Path) -> dict[str, Any]:
    lines = [line for line in log.read_text().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON result in {log}; see the log")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _check(run: measure.Measured, log: Path) -> None:
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(run.command)} exited {run.returncode}; see {log}")


def _size_or_none(path: Path) -> int | None:
    return path.stat().st_size if path.exists() else None


def end_to_end(corpus: corpus_mod.Corpus, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """``faultline score`` on the whole corpus, ``args.repeats`` times."""
    out_dir = OUT / f"e2e-n{n}"
    command = _python(
        "-m", "faultline", "score",
        "--probes", corpus.probes, "--responses", corpus.responses, "--out", out_dir,
    )  # fmt: skip
    if args.workers:
        command += ["--workers", str(args.workers)]
    runs = []
    for i in range(args.repeats):
        log = OUT / f"e2e-n{n}-run{i}.log"
        print(f"end to end, run {i + 1}/{args.repeats}: {n:,} responses ...", flush=True)
        run = measure.run_measured(command, log=log)
        _check(run, log)
        row = run.as_dict() | {"responses_per_s": n / run.seconds}
        print(f"  {run.seconds:.1f} s, {row['responses_per_s']:,.0f} responses/s", flush=True)
        runs.append(row)
    best = min(runs, key=lambda r: r["seconds"])
    return {
        "responses": n,
        "corpus_bytes": corpus.responses.stat().st_size,
        "report_json_bytes": (out_dir / "report.json").stat().st_size,
        "cases_parquet_bytes": _size_or_none(out_dir / "cases.parquet"),
        "runs": runs,
        "best": best,
        "median_seconds": statistics.median(r["seconds"] for r in runs),
        "goal_responses_per_s": GOAL_THROUGHPUT,
        "goal_met": best["responses_per_s"] >= GOAL_THROUGHPUT,
    }


def baseline(corpus: corpus_mod.Corpus, args: argparse.Namespace) -> dict[str, Any]:
    """The naive ``re`` loop, the matcher and the scorer on the same sample."""
    print(f"baseline on {args.sample:,} responses (one process) ...", flush=True)
    log = OUT / "baseline.log"
    command = _python(
        HERE / "baseline.py", "--probes", corpus.probes, "--responses", corpus.responses,
        "--sample", str(args.sample),
    )  # fmt: skip
    run = measure.run_measured(command, log=log)
    _check(run, log)
    result = _last_json(log)
    result["process"] = run.as_dict()
    return result


def observability(corpus: corpus_mod.Corpus, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """``compute_observability`` at every size, each in a fresh process."""
    cases = OUT / f"cases-n{n}-seed{args.seed}.msgpack"
    report = OUT / f"e2e-n{n}" / "report.json"
    if "e2e" in args.only or not cases.exists():
        if not report.exists():
            raise RuntimeError(f"{report} is missing: run the e2e step first")
        print("caching the scored cases in response order ...", flush=True)
        log = OUT / "cases-cache.log"
        command = _python(
            HERE / "observe.py",
            "cache",
            "--report",
            report,
            "--responses",
            corpus.responses,
            "--out",
            cases,
        )
        _check(measure.run_measured(command, log=log), log)
    rows = []
    for size in args.sizes:
        print(f"observability on {size:,} cases ...", flush=True)
        log = OUT / f"observability-n{size}.log"
        command = _python(HERE / "observe.py", "run", "--cases", cases, "--n", str(size))
        run = measure.run_measured(command, log=log)
        _check(run, log)
        row = _last_json(log) | {"process_seconds": run.seconds}
        print(
            f"  {row['seconds']:.1f} s, peak {row['peak_rss_bytes'] / 2**20:,.0f} MiB", flush=True
        )
        rows.append(row)
    return {"seed": 0, "sizes": rows}


def runner(args: argparse.Namespace) -> dict[str, Any]:
    """``faultline run`` against a zero-latency local server, at concurrency 64."""
    n = 5_000 if args.quick else 20_000
    print(f"runner overhead: {n:,} requests at concurrency 64 ...", flush=True)
    log = OUT / "runner.log"
    command = _python(HERE / "runner_overhead.py", "--requests", str(n), "--concurrency", "64")
    run = measure.run_measured(command, log=log)
    _check(run, log)
    result = _last_json(log)
    print(f"  {result['requests_per_s']:,.0f} requests/s", flush=True)
    return result


def speedups(results: dict[str, Any]) -> dict[str, Any]:
    """End to end and matcher against the naive loop."""
    base = results.get("baseline")
    e2e = results.get("end_to_end")
    if not base:
        return {}
    naive = base["naive"]["responses_per_s"]
    matcher = max(base[k]["responses_per_s"] for k in ("matcher", "matcher_batch") if k in base)
    out = {
        "matcher_vs_naive": matcher / naive,
        "scorer_vs_naive": base["scorer"]["responses_per_s"] / naive,
        "goal": GOAL_SPEEDUP,
    }
    if e2e:
        out["end_to_end_vs_naive"] = e2e["best"]["responses_per_s"] / naive
        out["goal_met"] = out["end_to_end_vs_naive"] >= GOAL_SPEEDUP
    return out


def _package() -> dict[str, str]:
    """Which faultline the benchmark measures (``PYTHONPATH`` may point at another tree)."""
    import faultline

    package = Path(faultline.__file__).parent
    return {"package": str(package), "package_sha256": measure.package_digest(package)}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    n = args.sizes[-1]
    results: dict[str, Any] = {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": args.quick,
        "machine": measure.machine(),
        "git": measure.git_state(ROOT) | _package(),
        "config": dict(vars(args)),
    }
    start = time.perf_counter()
    if any(step in args.only for step in CORPUS_STEPS):
        print(f"corpus: {n:,} responses, seed {args.seed} ...", flush=True)
        corpus = corpus_mod.ensure_corpus(n, args.seed)
        results["corpus"] = corpus.meta | {"lengths": corpus_mod.describe(corpus.responses)}
    if "e2e" in args.only:
        results["end_to_end"] = end_to_end(corpus, n, args)
    if "baseline" in args.only:
        results["baseline"] = baseline(corpus, args)
    if "observability" in args.only:
        results["observability"] = observability(corpus, n, args)
    if "runner" in args.only:
        results["runner"] = runner(args)
    if "scale" in args.only:
        results["scale"] = scale_mod.scale(args, OUT)
    results["speedups"] = speedups(results)
    results["bench_seconds"] = time.perf_counter() - start
    results["machine"]["load_average_end"] = list(os.getloadavg())
    name = "results-scale" if args.only == ["scale"] else "results"  # keep the full run's file
    name += "-quick" if args.quick else ""
    (OUT / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    text = tables.render(results)
    (OUT / f"{name}.md").write_text(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
