"""Profile single-process scoring: ``score_files(..., workers=1)`` under cProfile.

Scores the first N responses of the benchmark corpus in this process (the whole pipeline:
reading, scoring, metrics, observability, writing the report) and writes the statistics to
``bench/out/profile-n{N}.pstats`` and the top functions by cumulative and by own time to
``bench/out/profile-n{N}.txt``::

    python bench/profile_scoring.py --n 100000
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus as corpus_mod  # noqa: E402
import measure  # noqa: E402

import faultline  # noqa: E402
from faultline.pipeline import score_files  # noqa: E402

OUT = HERE / "out"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    corpus = corpus_mod.ensure_corpus(args.n, args.seed)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        score_files(corpus.probes, corpus.responses, Path(tmp) / "report", workers=1)
        profiler.disable()
        seconds = time.perf_counter() - start
    stats_path = OUT / f"profile-n{args.n}.pstats"
    profiler.dump_stats(stats_path)
    text = io.StringIO()
    package = Path(faultline.__file__).parent
    text.write(f"score_files(workers=1) on {args.n:,} responses: {seconds:.1f} s under cProfile\n")
    text.write(f"faultline from {package}, sha256 {measure.package_digest(package)[:16]}\n")
    for order in ("cumulative", "tottime"):
        text.write(f"\n==== by {order}\n")
        stats = pstats.Stats(str(stats_path), stream=text)
        stats.sort_stats(order).print_stats(args.top)
    (OUT / f"profile-n{args.n}.txt").write_text(text.getvalue())
    print(text.getvalue())


if __name__ == "__main__":
    main()
