"""The built-in demo: real recorded model answers, scored and reported with no network.

The data are public (XSTest v2 and JailbreakBench's judge-comparison set; see
``demo/data/ATTRIBUTION.md`` for sources, licences and how probes were made). The probe set
is the built-in ``demo`` set; the answers ship in ``demo/data/responses.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

from faultline.pipeline import ProgressCallback, ScoreRun, score_files
from faultline.probes.loader import builtin_probe_sets

__all__ = ["DEMO_RESPONSES", "run_demo"]

DEMO_RESPONSES = Path(__file__).parent / "data" / "responses.jsonl"


def run_demo(
    out: str | Path | None,
    *,
    seed: int = 0,
    workers: int | None = 1,
    on_progress: ProgressCallback | None = None,
    run_id: str | None = None,
    created_at: str | None = None,
) -> ScoreRun:
    """Score the built-in demo answers with the default rules and write the report.

    Args:
        out: The directory for report.json, report.md and report.html (``None``: write nothing).
        seed: Seeds the failure geometry.
        workers: Worker processes for scoring (the demo is small enough for one).
        on_progress: Called with progress as the answers are scored.
        run_id: The run id (default: a new one).
        created_at: The creation time (default: now).
    """
    return score_files(
        builtin_probe_sets()["demo"],
        DEMO_RESPONSES,
        out,
        seed=seed,
        workers=workers,
        on_progress=on_progress,
        run_id=run_id,
        created_at=created_at,
    )
