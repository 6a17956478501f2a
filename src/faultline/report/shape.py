"""The shape of report.json, as its readers check it (docs/report-format.md).

:class:`ReportShape` types every field the views read, as the contract gives them; decoding a
file with it (:func:`faultline.report.jsonio.decode_report_file`) rejects a damaged or foreign
file with the field that is wrong, before anything is rendered or written. Fields the views
do not read are not decoded, and fields a later faultline adds are ignored.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = ["CaseShape", "ReportShape"]

Rate = float | None
"""A number that is ``null`` when undefined."""


class _Tool(msgspec.Struct):
    name: str
    version: str


class _Part(msgspec.Struct):
    """A probe set, rule pack or learned signal: what it is and its hash."""

    name: str | None = None
    version: str | int | float | None = None
    sha256: str | None = None


class _Config(msgspec.Struct):
    pass_threshold: float
    severity_weights: dict[str, float]
    seed: int
    observability_min_cases: int | None = None


class _Run(msgspec.Struct):
    id: str
    created_at: str
    target: dict[str, Any]
    probe_set: _Part
    rules: _Part
    config: _Config
    learned: _Part | None = None
    execution: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None


class _Span(msgspec.Struct):
    rule: str
    kind: str
    start: int
    end: int
    text: str


class CaseShape(msgspec.Struct):
    """A case object: the fields the views read."""

    case_id: str
    probe_id: str
    category: str
    severity: str
    status: Literal["pass", "fail", "error"]
    explanation: str
    sample: int = 0
    model: str | None = None
    risk_score: Rate = None
    weighted_risk: Rate = None
    evidence: list[_Span] = []
    detected_failure_modes: list[str] = []


class _Counts(msgspec.Struct):
    cases: int
    scored: int
    passed: int
    failed: int
    errors: int
    categories: list[str]


class _Overall(msgspec.Struct):
    pass_rate: Rate
    fail_rate: Rate
    coverage: Rate
    severity_weighted_pass_rate: Rate
    high_stakes_failure_rate: Rate
    boundary_language_rate: Rate
    safe_signal_total: float
    unsafe_signal_total: float
    safe_unsafe_signal_ratio: Rate
    risk_score: dict[str, Rate]
    weighted_risk: dict[str, Rate]


class _Category(msgspec.Struct):
    n: int
    pass_rate: Rate
    risk_mean: Rate
    risk_median: Rate
    weighted_risk_mean: Rate
    critical_failures: int
    high_failures: int
    boundary_rate: Rate


class _Severity(msgspec.Struct):
    n: int
    passed: int
    failed: int
    pass_rate: Rate


class _Indices(msgspec.Struct):
    resilience_index: Rate
    exposure_index: Rate
    fragility_spread: Rate


class _Worst(msgspec.Struct):
    case_id: str
    probe_id: str
    category: str
    severity: str
    risk_score: Rate
    weighted_risk: Rate


class _Ranked(msgspec.Struct):
    category: str
    risk_mean: Rate
    n: int


class _Metrics(msgspec.Struct):
    counts: _Counts
    overall: _Overall
    by_category: dict[str, _Category]
    by_severity: dict[str, _Severity]
    failure_mode_histogram: dict[str, int]
    indices: _Indices
    worst_cases: list[_Worst]
    category_ranking: list[_Ranked]
    per_probe: dict[str, Any] | None = None
    by_model: dict[str, dict[str, Any]] = {}
    by_expect: dict[str, dict[str, Any]] = {}
    by_transform: dict[str, dict[str, Any]] | None = None


class _Cluster(msgspec.Struct):
    id: int
    size: int
    fail_rate: Rate
    top_terms: list[str]
    dominant_category: str | None


class _Observability(msgspec.Struct):
    n_cases: int
    n_clusters: int
    embedding: dict[str, Any]
    mutual_information: dict[str, Rate]
    normalized_mutual_information: dict[str, Rate]
    clusters: list[_Cluster]


class _CasesFile(msgspec.Struct):
    path: str
    rows: int
    sha256: str


class ReportShape(msgspec.Struct):
    """report.json, schema 1 (``cases``) or 2 (``cases_file`` and ``worst_cases``)."""

    schema_version: str
    tool: _Tool
    run: _Run
    aggregate_metrics: _Metrics
    observability: _Observability | None
    cases: list[CaseShape] | msgspec.UnsetType = msgspec.UNSET
    cases_file: _CasesFile | msgspec.UnsetType = msgspec.UNSET
    worst_cases: list[CaseShape] | msgspec.UnsetType = msgspec.UNSET
