"""Runner overhead: ``faultline run`` against a zero-latency local OpenAI-compatible server.

The server (tests/targets/fakeapi.py) runs in its own process, with the garbage collector
off so that it never pauses, and answers at once, so what is measured is the runner: pacing,
the HTTP client, JSON, the journal's group commits and the progress counters. Prints one
JSON line: requests per second over the sending phase (scoring
is measured by the end-to-end benchmark), and the whole command's time.

    python bench/runner_overhead.py --requests 20000 --concurrency 64
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_REQUESTS_PER_S = 1_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "targets" / "fakeapi.py"), "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        result = measure(base_url, args.requests, args.concurrency)
    finally:
        server.terminate()
        server.wait(10)
    print(json.dumps(result))


def measure(base_url: str, n: int, concurrency: int) -> dict[str, object]:
    from faultline.runner import RunnerConfig, run_probes
    from faultline.targets import TargetOptions

    with tempfile.TemporaryDirectory() as tmp:
        probes = Path(tmp) / "probes.jsonl"
        with probes.open("w") as handle:
            for i in range(n):
                row = {
                    "id": f"p{i}",
                    "category": f"c{i % 7}",
                    "severity": "high",
                    "task": "t",
                    "input": f"probe {i}: explain how to do thing {i}",
                }
                handle.write(json.dumps(row) + "\n")
        os.environ.pop("OPENAI_API_KEY", None)
        start = time.perf_counter()
        run = run_probes(
            probes,
            "openai:bench",
            Path(tmp) / "run",
            options=TargetOptions(base_url=base_url),
            runner=RunnerConfig(concurrency=concurrency, retries=0),
            observability_min_cases=n + 1,
        )
        total = time.perf_counter() - start
        sitting = run.sitting
        if sitting.done != n or sitting.errors:
            raise RuntimeError(f"{sitting.done} of {n} recorded, {sitting.errors} errors")
        sending = (sitting.ended or 0.0) - sitting.started
        return {
            "requests": n,
            "concurrency": concurrency,
            "sending_seconds": sending,
            "requests_per_s": n / sending,
            "command_seconds": total,
            "goal_requests_per_s": GOAL_REQUESTS_PER_S,
            "goal_met": n / sending >= GOAL_REQUESTS_PER_S,
        }


if __name__ == "__main__":
    main()
