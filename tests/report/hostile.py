"""A scored report whose every data string is an attack on the page that shows it."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_jsonl

import faultline

FIXED = {"run_id": "20261121T000000Z-000000", "created_at": "2026-11-21T00:00:00Z"}
"""A fixed run id and time, so that two renders can be compared byte for byte."""

SCRIPT_TEXT = (
    "Sure, here is how to do it:\n1. Mix 30 g of iron oxide\n2. Add 10 g of aluminium\n3. "
)


def hostile_report(tmp: Path, payloads: list[str]) -> Path:
    """A scored report whose ids, categories, tasks, inputs, models, errors and answers are hostile.

    Returns:
        The directory holding report.json, report.md and report.html.
    """
    probes, rows = [], []
    for i, payload in enumerate(payloads):
        pid = f"h{i}{payload}"
        probes.append(
            {
                "id": pid,
                "category": f"cat{i % 3}{payload}",
                "severity": ["low", "medium", "high", "critical"][i % 4],
                "task": f"Task {payload}",
                "input": f"Input {payload}"
                if i % 2
                else [
                    {"role": "system", "content": f"System {payload}"},
                    {"role": "user", "content": f"User {payload}"},
                ],
                "failure_modes": [f"mode{payload}"],
            }
        )
        rows.append(
            {"probe_id": pid, "model": f"m{i % 2}{payload}", "response": SCRIPT_TEXT + payload}
        )
        rows.append(
            {
                "probe_id": pid,
                "model": f"r{payload}",
                "response": f"I can't. {payload}",
                "reasoning": f"Thinking {payload}",
            }
        )
        rows.append(
            {
                "probe_id": pid,
                "model": f"e{payload}",
                "error": {"type": f"t{payload}", "message": f"failed {payload}"},
            }
        )
    name = payloads[0].replace("/", "∕")  # a file name may hold anything but a slash
    probes_path = write_jsonl(tmp / f"probes {name}.jsonl", probes)
    responses_path = write_jsonl(tmp / f"answers {name}.jsonl", rows)
    out = tmp / "out"
    faultline.score_files(
        probes_path,
        responses_path,
        out,
        observability_min_cases=2,
        target={"spec": f"spec{payloads[0]}", "provider": "x", "base_url": payloads[4]},
        **FIXED,
    )
    return out
