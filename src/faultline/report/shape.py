"""The shape of report.json, as its readers check it (docs/report-format.md).

:class:`ReportShape` types every field the views read, as the contract gives them; decoding a
file with it (:func:`faultline.report.jsonio.decode_report_file`) rejects a damaged or foreign
file with the field that is wrong, before anything is rendered or written. Fields the views
do not read are not decoded, and fields a later faultline adds are ignored.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["CaseShape", "ReportShape"]

Rate = float | None
"""A number that is ``null`` when undefined."""

Interval = tuple[float, float] | None
"""A 95% interval ``[low, high]``, ``null`` when undefined."""


class _Tool(msgspec.Struct):
    name: str
    version: str


class _Part(msgspec.Struct):
    """A probe set, rule pack or learned signal: what it is and its hash."""

    name: str | None = None
    version: str | int | float | None = None
    sha256: str | None = None


class _ProbeSet(_Part):
    probes: int | None = None


class _Responses(msgspec.Struct):
    """The recorded answers a run scored."""

    name: str
    sha256: str
    records: int


class _Target(msgspec.Struct):
    spec: str | None = None
    models: list[str] | None = None
    base_url: str | None = None
    responses: _Responses | None = None


class _Config(msgspec.Struct):
    pass_threshold: float
    severity_weights: dict[str, float]
    seed: int
    observability_min_cases: int | None = None


class _Usage(msgspec.Struct):
    input_tokens: int
    output_tokens: int


class _Cost(msgspec.Struct):
    estimate: float


class _Execution(msgspec.Struct):
    """How ``faultline run`` collected the answers."""

    samples: int
    requests: int
    retries: int
    errors: int
    cached: int
    sittings: int
    usage: _Usage
    cost: _Cost | None = None


class _Precision(msgspec.Struct):
    """A rule's precision measured by calibration."""

    kind: str
    label: str
    fired: int
    precision: Rate
    precision_ci95: Interval = None


class _Scorer(msgspec.Struct):
    rules: _Part | None = None


class _Calibration(msgspec.Struct):
    file: str
    sha256: str
    rules: list[_Precision]
    rows: int | None = None
    scorer: _Scorer | None = None
    pass_threshold: float | None = None


class _Run(msgspec.Struct):
    id: str
    created_at: str
    target: _Target
    probe_set: _ProbeSet
    rules: _Part
    config: _Config
    learned: _Part | None = None
    execution: _Execution | None = None
    calibration: _Calibration | None = None


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
    expect: str = "refuse"
    risk_score: Rate = None
    weighted_risk: Rate = None
    task: str = ""
    probe_input: str = ""
    response: str | None = None
    reasoning: str | None = None
    evidence: list[_Span] = []
    detected_failure_modes: list[str] = []
    matched_boundary_patterns: list[str] = []
    matched_unsafe_patterns: list[str] = []
    matched_safe_patterns: list[str] = []
    cluster: int | None = None
    scatter_x: float | None = None
    scatter_y: float | None = None


class _Counts(msgspec.Struct):
    cases: int
    scored: int
    passed: int
    failed: int
    errors: int
    categories: list[str]


class _RiskSummary(msgspec.Struct):
    mean: Rate
    median: Rate
    p90: Rate
    max: Rate


class _Overall(msgspec.Struct):
    pass_rate: Rate
    pass_rate_ci95: Interval
    fail_rate: Rate
    coverage: Rate
    severity_weighted_pass_rate: Rate
    high_stakes_failure_rate: Rate
    boundary_language_rate: Rate
    safe_signal_total: float
    unsafe_signal_total: float
    safe_unsafe_signal_ratio: Rate
    risk_score: _RiskSummary
    weighted_risk: dict[str, Rate]


class _Samples(msgspec.Struct):
    min: int | None
    max: int | None


class _PerProbe(msgspec.Struct):
    """Outcomes per probe over its samples (hit@K)."""

    samples: _Samples
    passed: int
    failed: int
    errors: int
    pass_rate: Rate
    pass_rate_ci95: Interval = None


class _Category(msgspec.Struct):
    n: int
    pass_rate: Rate
    pass_rate_ci95: Interval
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


class _Expect(msgspec.Struct):
    scored: int
    pass_rate: Rate


class _ModelExpect(msgspec.Struct):
    pass_rate: Rate


class _Model(msgspec.Struct):
    n: int
    errors: int
    pass_rate: Rate
    severity_weighted_pass_rate: Rate
    high_stakes_failures: int
    by_expect: dict[str, _ModelExpect] = {}


class _TransformCategory(msgspec.Struct):
    pass_rate: Rate


class _Transform(msgspec.Struct):
    n: int
    errors: int
    pass_rate: Rate
    pass_rate_ci95: Interval
    by_category: dict[str, _TransformCategory]


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
    per_probe: _PerProbe | None = None
    by_model: dict[str, _Model] = {}
    by_expect: dict[str, _Expect] = {}
    by_transform: dict[str, _Transform] | None = None
    failure_mode_expected: dict[str, int] | None = None
    # Additions: reports written before them have neither.
    errors_by_category: dict[str, int] | None = None
    errors_by_severity: dict[str, int] | None = None


class _Cluster(msgspec.Struct):
    id: int
    size: int
    fail_rate: Rate
    risk_mean: Rate
    top_terms: list[str]
    dominant_category: str


class _Embedding(msgspec.Struct):
    method: str
    dimensions: int


class _PerLabel(msgspec.Struct):
    """A statistic of the clusters against each label: never ``null``."""

    category: float
    severity: float
    pass_fail: float


class _Observability(msgspec.Struct):
    n_cases: int
    n_clusters: int
    embedding: _Embedding
    mutual_information: _PerLabel
    normalized_mutual_information: _PerLabel
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
