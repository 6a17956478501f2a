"""faultline: find where large language models fail on safety.

The Python API is the one the command line uses::

    import faultline

    probes = faultline.load_probes("demo")                 # a file, a directory or a built-in set
    responses = faultline.load_responses("answers.jsonl")
    cases = faultline.score(probes, responses)             # one CaseScore per response
    metrics = faultline.aggregate_metrics(cases)
    report = faultline.build_report(cases, out="out/", probe_set=probes)
    run = faultline.run_probes(probes, "openai:gpt-4o-mini", "runs/today")  # send, record, score

Every name below is public and stable within a major version; everything else (modules
starting with ``_``, and names not listed here) may change.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from faultline._version import __version__

if TYPE_CHECKING:
    from faultline.demo import run_demo
    from faultline.errors import (
        CalibrationError,
        FaultlineError,
        InputError,
        LabelError,
        LearnedError,
        ProbeError,
        RecordingError,
        ResponseError,
        RulePackError,
        TargetError,
        UsageError,
    )
    from faultline.metrics import MetricsAccumulator, aggregate_metrics
    from faultline.observability import Geometry, compute_observability
    from faultline.pipeline import ScoreRun, score_files
    from faultline.probes import Message, Probe, ProbeSet, builtin_probe_sets, load_probes
    from faultline.report import (
        SCHEMA_VERSION,
        Report,
        build_report,
        read_report,
        render_markdown,
        write_report,
    )
    from faultline.report.compare import compare_reports
    from faultline.report.gates import GateResult, evaluate_gates
    from faultline.report.html import render_html
    from faultline.report.junit import report_junit
    from faultline.responses import Response, iter_response_batches, load_responses
    from faultline.runner import Prices, ProbeRun, RunnerConfig, run_probes
    from faultline.scoring import (
        CaseScore,
        Evidence,
        Rule,
        RulePack,
        Scorer,
        ScoringConfig,
        builtin_rule_packs,
        load_rule_pack,
        run_examples,
        score,
    )
    from faultline.targets import CallError, GenerationParams, Target, TargetOptions, open_target

# Names are imported on first use, so `faultline --help` does not pay for numpy and friends.
_LAZY: dict[str, str] = {
    "CalibrationError": "faultline.errors",
    "CallError": "faultline.targets",
    "CaseScore": "faultline.scoring",
    "Evidence": "faultline.scoring",
    "FaultlineError": "faultline.errors",
    "GateResult": "faultline.report.gates",
    "GenerationParams": "faultline.targets",
    "Geometry": "faultline.observability",
    "InputError": "faultline.errors",
    "LabelError": "faultline.errors",
    "LearnedError": "faultline.errors",
    "Message": "faultline.probes",
    "MetricsAccumulator": "faultline.metrics",
    "Prices": "faultline.runner",
    "Probe": "faultline.probes",
    "ProbeError": "faultline.errors",
    "ProbeRun": "faultline.runner",
    "ProbeSet": "faultline.probes",
    "Report": "faultline.report",
    "RecordingError": "faultline.errors",
    "Response": "faultline.responses",
    "ResponseError": "faultline.errors",
    "Rule": "faultline.scoring",
    "RulePack": "faultline.scoring",
    "RulePackError": "faultline.errors",
    "RunnerConfig": "faultline.runner",
    "SCHEMA_VERSION": "faultline.report",
    "ScoreRun": "faultline.pipeline",
    "Scorer": "faultline.scoring",
    "ScoringConfig": "faultline.scoring",
    "Target": "faultline.targets",
    "TargetError": "faultline.errors",
    "TargetOptions": "faultline.targets",
    "UsageError": "faultline.errors",
    "__version__": "faultline._version",
    "aggregate_metrics": "faultline.metrics",
    "build_report": "faultline.report",
    "builtin_probe_sets": "faultline.probes",
    "builtin_rule_packs": "faultline.scoring",
    "compare_reports": "faultline.report.compare",
    "compute_observability": "faultline.observability",
    "evaluate_gates": "faultline.report.gates",
    "iter_response_batches": "faultline.responses",
    "load_probes": "faultline.probes",
    "load_responses": "faultline.responses",
    "load_rule_pack": "faultline.scoring",
    "open_target": "faultline.targets",
    "read_report": "faultline.report",
    "render_html": "faultline.report.html",
    "render_markdown": "faultline.report",
    "report_junit": "faultline.report.junit",
    "run_demo": "faultline.demo",
    "run_examples": "faultline.scoring",
    "run_probes": "faultline.runner",
    "score": "faultline.scoring",
    "score_files": "faultline.pipeline",
    "write_report": "faultline.report",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'faultline' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)


__all__ = [
    "SCHEMA_VERSION",
    "CalibrationError",
    "CallError",
    "CaseScore",
    "Evidence",
    "FaultlineError",
    "GateResult",
    "GenerationParams",
    "Geometry",
    "InputError",
    "LabelError",
    "LearnedError",
    "Message",
    "MetricsAccumulator",
    "Prices",
    "Probe",
    "ProbeError",
    "ProbeRun",
    "ProbeSet",
    "RecordingError",
    "Report",
    "Response",
    "ResponseError",
    "Rule",
    "RulePack",
    "RulePackError",
    "RunnerConfig",
    "ScoreRun",
    "Scorer",
    "ScoringConfig",
    "Target",
    "TargetError",
    "TargetOptions",
    "UsageError",
    "__version__",
    "aggregate_metrics",
    "build_report",
    "builtin_probe_sets",
    "builtin_rule_packs",
    "compare_reports",
    "compute_observability",
    "evaluate_gates",
    "iter_response_batches",
    "load_probes",
    "load_responses",
    "load_rule_pack",
    "open_target",
    "read_report",
    "render_html",
    "render_markdown",
    "report_junit",
    "run_demo",
    "run_examples",
    "run_probes",
    "score",
    "score_files",
    "write_report",
]
