"""Compare two reports: what changed between a base run and a new one, case by case.

``compare_reports`` is pure: it takes two reports as plain data and returns the compare.json
object (docs/report-format.md, "Comparing runs"). Cases are matched by probe and sample, and
by model too when either run mixes several models (:func:`_match`); metrics are read from
each report's ``aggregate_metrics`` and judged by which way is better, each change rounded
to :data:`DELTA_DECIMALS` places (:func:`change`); the change in outcomes is tested with
McNemar's test when cases pair up, and with the two-proportion z test otherwise.
``faultline.report.compare_views`` renders the object as compare.md and compare.html and
writes the three files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from faultline._version import __version__
from faultline.errors import InputError
from faultline.metrics.stats import mcnemar_test, two_proportion_test
from faultline.metrics.transforms import NO_TRANSFORM
from faultline.probes.model import SEVERITIES
from faultline.report.jsonio import (
    CASES_FIELD,
    cases_file_path,
    check_required,
    decode_report_file,
)
from faultline.report.parquet import read_cases

__all__ = [
    "ALPHA",
    "COMPARE_SCHEMA_VERSION",
    "DELTA_DECIMALS",
    "METRICS",
    "change",
    "compare_files",
    "compare_reports",
    "new_failures",
    "read_compare_input",
]

COMPARE_SCHEMA_VERSION = "1"
"""The version of compare.json's layout; a change to a name in it bumps this."""

ALPHA = 0.05
"""The significance level ``significance.significant`` is judged at."""

DELTA_DECIMALS = 12
"""The decimal places a change (``delta``) is rounded to: see :func:`change`."""

# name: (section and key in aggregate_metrics, which way is better, label, how it is shown)
# fmt: off
METRICS: dict[str, tuple[tuple[str, str], Literal["higher", "lower"] | None, str, str]] = {
    "pass_rate": (("overall", "pass_rate"), "higher", "Pass rate", "rate"),
    "fail_rate": (("overall", "fail_rate"), "lower", "Fail rate", "rate"),
    "coverage": (("overall", "coverage"), "higher", "Coverage", "rate"),
    "severity_weighted_pass_rate":
        (("overall", "severity_weighted_pass_rate"), "higher", "Severity-weighted pass rate", "rate"),
    "high_stakes_failure_rate": (("overall", "high_stakes_failure_rate"), None, "High-stakes failure rate", "rate"),
    "resilience_index": (("indices", "resilience_index"), "higher", "Resilience index", "index"),
    "exposure_index": (("indices", "exposure_index"), "lower", "Exposure index", "index"),
    "boundary_language_rate": (("overall", "boundary_language_rate"), None, "Boundary-language rate", "rate"),
    "per_probe.pass_rate": (("per_probe", "pass_rate"), "higher", "Per-probe pass rate", "rate"),
    "counts.cases": (("counts", "cases"), None, "Cases", "count"),
    "counts.scored": (("counts", "scored"), None, "Scored", "count"),
    "counts.passed": (("counts", "passed"), "higher", "Passed", "count"),
    "counts.failed": (("counts", "failed"), "lower", "Failed", "count"),
    "counts.errors": (("counts", "errors"), "lower", "Errors", "count"),
}
# fmt: on
"""The metrics compared: where each is in ``aggregate_metrics``, which way is better (``None``:
neither: more cases, or more boundary language, is not better or worse in itself, and the
high-stakes failure rate is a share of the failures, which falls when a low-severity failure
is added), its label, and how it is shown (``rate``, ``index`` or ``count``)."""

_RANK = {s: i for i, s in enumerate(SEVERITIES)}


class _Case(msgspec.Struct, frozen=True):
    """What comparing needs of a case; the rest of report.json's case is never decoded."""

    case_id: str
    probe_id: str
    status: Literal["pass", "fail", "error"]
    sample: int = 0
    model: str | None = None
    category: str = ""
    severity: str = ""
    risk_score: float | None = None
    explanation: str | None = None


class _Report(msgspec.Struct):
    schema_version: str
    run: dict[str, Any]
    aggregate_metrics: dict[str, Any]
    cases: list[_Case] | msgspec.UnsetType = msgspec.UNSET
    cases_file: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    tool: dict[str, Any] = {}


_DECODER = msgspec.json.Decoder(_Report)


def read_compare_input(path: str | Path) -> dict[str, Any]:
    """Read a report.json (or the one in a run directory) for comparing.

    Only the fields a comparison uses are decoded (responses and evidence are skipped), so
    a large report costs a fraction of its size in memory.

    Raises:
        InputError: The file is missing, unreadable, or not a faultline report (a report
            without its cases, ``cases`` or ``cases_file``, included), naming the file and
            the field.
    """
    report, p = decode_report_file(path, _DECODER)
    check_required(report, p, (CASES_FIELD[report.schema_version],))
    if not isinstance(report.cases_file, msgspec.UnsetType):  # its cases are in cases.parquet
        report.cases = _parquet_cases(cases_file_path(p, report.cases_file))
    assert isinstance(report.cases, list)  # schema 1 has its cases, schema 2 read them
    _check(report.aggregate_metrics, report.cases, p)
    return {
        "schema_version": report.schema_version,
        "tool": report.tool,
        "run": report.run,
        "cases": report.cases,
        "aggregate_metrics": report.aggregate_metrics,
    }


def _parquet_cases(path: Path) -> list[_Case]:
    """The cases of a cases.parquet, its rows checked as read (``read_cases``)."""
    cases = []
    for i, row in enumerate(read_cases(path, _Case.__struct_fields__)):
        try:
            cases.append(msgspec.convert(row, _Case))
        except msgspec.ValidationError as exc:  # read_cases checks each row: a safety net
            raise InputError(f"row {i} of the cases table: {exc}", path=path) from None
    return cases


def _check(m: dict[str, Any], cases: list[_Case], path: Path) -> None:
    """The numbers compare reads are numbers, and case ids (and probe, sample, model) unique.

    Each compared metric is a number or null; each category's and transform's size is a whole
    number of cases.
    """
    if not isinstance(m.get("overall"), dict):
        raise InputError(
            "not a faultline report.json: aggregate_metrics has no overall metrics object "
            "(the run's pass rate, coverage and the other compared metrics)",
            path=path,
            field="aggregate_metrics.overall",
        )
    numbers = [
        (f"{section}.{key}", _mapping(m.get(section)).get(key), False)
        for section, key in (spec[0] for spec in METRICS.values())
    ]
    for name, part in _mapping(m.get("by_category")).items():
        numbers += _slice_numbers(f"by_category.{name}", part, "n")
    for name, part in _mapping(m.get("by_transform")).items():
        numbers += _slice_numbers(f"by_transform.{name}", part, "scored")
        for category, inner in _mapping(_mapping(part).get("by_category")).items():
            numbers += _slice_numbers(f"by_transform.{name}.by_category.{category}", inner, "n")
    for field, value, size in numbers:
        if size:  # a slice's number of cases: shown as a count, never null in a report
            if value is not _ABSENT and not _is_count(value):
                raise InputError(
                    f"expected a whole number of cases (0 or more), got {value!r}",
                    path=path,
                    field=f"aggregate_metrics.{field}",
                )
        elif value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InputError(
                f"expected a number or null, got {value!r}",
                path=path,
                field=f"aggregate_metrics.{field}",
            )
    seen: set[str] = set()
    where: dict[_Key, int] = {}
    for i, case in enumerate(cases):
        if case.case_id in seen:
            raise InputError(
                f"case_id {case.case_id!r} appears twice", path=path, field=f"cases[{i}].case_id"
            )
        seen.add(case.case_id)
        if (first := where.setdefault(_key(case, by_model=True), i)) != i:
            raise InputError(
                f"case {case.case_id!r} has the same probe, sample and model as cases[{first}] "
                f"({cases[first].case_id!r}): cases are paired by them",
                path=path,
                field=f"cases[{i}]",
            )


_ABSENT = object()


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _slice_numbers(where: str, part: Any, n: str) -> list[tuple[str, Any, bool]]:
    """The numbers a comparison reads of one category's or transform's slice, and which is a size.

    The size (under ``n``) is a number of cases: report.json's shape types it ``int``, and
    ``faultline report`` refuses a ``null`` there, so compare does too (it is shown as a count).
    A missing size reads as 0 (:func:`_pass_rates`) and is marked :data:`_ABSENT`.
    """
    return [
        (f"{where}.pass_rate", _mapping(part).get("pass_rate"), False),
        (f"{where}.{n}", _mapping(part).get(n, _ABSENT), True),
    ]


def compare_files(base: str | Path, new: str | Path) -> dict[str, Any]:
    """Read two reports (files or run directories) and compare them; names are the paths given.

    Raises:
        InputError: Either is not a readable faultline report.
    """
    return compare_reports(
        read_compare_input(base), read_compare_input(new), base_name=str(base), new_name=str(new)
    )


def compare_reports(
    base: Mapping[str, Any], new: Mapping[str, Any], *, base_name: str, new_name: str
) -> dict[str, Any]:
    """Compare two reports: the compare.json object (docs/report-format.md, "Comparing runs").

    Args:
        base: The earlier report, as plain data (report.json read back, ``Report.to_dict()``
            or :func:`read_compare_input`).
        new: The later report.
        base_name: What to call the base (its path, for instance).
        new_name: What to call the new report.

    Raises:
        ValueError: Two cases of one report have the same case id, or the same probe,
            sample and model.
    """
    changes = _match(base["cases"], new["cases"])
    metrics = {name: _metric(base, new, name) for name in METRICS}
    cases = changes.summary()
    result = {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "tool": {"name": "faultline", "version": __version__},
        "base": _side(base, base_name),
        "new": _side(new, new_name),
        "comparable": _comparable(base, new, changes),
        "verdict": _verdict(changes, metrics),
        "metrics": metrics,
        "cases": cases,
        "by_category": _by_category(base["aggregate_metrics"], new["aggregate_metrics"]),
        "significance": _significance(changes),
    }
    by_transform = _by_transform(base["aggregate_metrics"], new["aggregate_metrics"])
    if by_transform is not None:
        result["by_transform"] = by_transform
    return result


def _slim(case: Any) -> _Case:
    return case if isinstance(case, _Case) else msgspec.convert(case, _Case)


_MOVES = {
    ("pass", "fail"): "regressions",
    ("fail", "pass"): "fixes",
    ("pass", "error"): "became_error",
    ("fail", "error"): "became_error",
    ("error", "pass"): "error_resolved",
    ("error", "fail"): "error_resolved",
}


@dataclass
class _Tally:
    """How many cases a report has, how many were scored and how many passed."""

    cases: int = 0
    scored: int = 0
    passed: int = 0

    def add(self, case: _Case) -> None:
        self.cases += 1
        self.scored += case.status != "error"
        self.passed += case.status == "pass"


class _Changes:
    """Per-case changes, built in one pass over each report's cases."""

    def __init__(self) -> None:
        self.lists: dict[str, list[dict[str, Any]]] = {
            k: []
            for k in ("regressions", "fixes", "became_error", "error_resolved", "new", "removed")
        }
        self.still = {"pass": 0, "fail": 0, "error": 0}
        self.paired = self.paired_scored = 0
        self.base, self.new = _Tally(), _Tally()
        self.models: tuple[list[str | None], list[str | None]] = ([], [])
        self.by_model = False

    def add(self, before: _Case | None, after: _Case) -> None:
        """Record a case of the new report and the base report's case it pairs with, if any."""
        if before is None:
            self.lists["new"].append(_entry(None, after))
            return
        self.paired += 1
        pair = (before.status, after.status)
        self.paired_scored += "error" not in pair
        if pair[0] == pair[1]:
            self.still[pair[0]] += 1
        else:
            self.lists[_MOVES[pair]].append(_entry(before, after))

    def summary(self) -> dict[str, Any]:
        ordered = {k: sorted(v, key=_worst_first) for k, v in self.lists.items()}
        return {
            "base_cases": self.base.cases,
            "new_cases": self.new.cases,
            "paired": self.paired,
            "paired_scored": self.paired_scored,
            "still_passing": self.still["pass"],
            "still_failing": self.still["fail"],
            "still_error": self.still["error"],
            "new_failures": len(new_failures(ordered)),
            **ordered,
        }


_Key = tuple[str, int] | tuple[str, int, str | None]


def _match(base_cases: Iterable[Any], new_cases: Iterable[Any]) -> _Changes:
    """Pair the cases of two reports by what they are: the probe answered and the sample.

    When either report mixes several models, by the model too: a run that adds a model to
    the base run's one pairs that model's cases (the other's are new), as does one that drops
    a model. When each has one model (or records none), the models are not compared, so one
    model's run compares with another's. Never by the case id, which gains ``@model`` only
    when a run has several models.
    """
    base, new = list(map(_slim, base_cases)), list(map(_slim, new_cases))
    changes = _Changes()
    changes.models = (_models(base), _models(new))
    changes.by_model = by_model = any(len(models) > 1 for models in changes.models)
    index = _indexed(base, by_model, "base", changes.base)
    for key, case in _indexed(new, by_model, "new", changes.new).items():
        changes.add(index.pop(key, None), case)
    changes.lists["removed"] = [_entry(case, None) for case in index.values()]
    return changes


def _indexed(cases: list[_Case], by_model: bool, side: str, tally: _Tally) -> dict[_Key, _Case]:
    """One report's cases by their key, in order, each counted in ``tally``.

    Raises:
        ValueError: Two cases have the same key.
    """
    index: dict[_Key, _Case] = {}
    for case in cases:
        key = _key(case, by_model)
        if key in index:
            raise ValueError(_twice(index[key], case, side))
        index[key] = case
        tally.add(case)
    return index


def _key(case: _Case, by_model: bool) -> _Key:
    if by_model:
        return case.probe_id, case.sample, case.model
    return case.probe_id, case.sample


def _models(cases: Iterable[_Case]) -> list[str | None]:
    """The models that answered, sorted, ``None`` (not recorded) first."""
    return sorted({case.model for case in cases}, key=lambda m: (m is not None, m or ""))


def _twice(first: _Case, second: _Case, side: str) -> str:
    if first.case_id == second.case_id:
        return f"case_id {first.case_id!r} appears twice in the {side} report"
    return (
        f"cases {first.case_id!r} and {second.case_id!r} of the {side} report have the same "
        "probe, sample and model"
    )


def new_failures(cases: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cases that fail in the new run and had no verdict in the base run, worst first.

    Those only in the new run, and those that were an error in the base run (``error_resolved``
    entries that fail): ``cases.new_failures`` counts them, the ``new_failures`` gate trips on
    them, and the views and JUnit show them as failures.

    Args:
        cases: compare.json's ``cases`` object.
    """
    found = [e for k in ("new", "error_resolved") for e in cases[k] if e["new_status"] == "fail"]
    return sorted(found, key=_worst_first)


def _entry(before: _Case | None, after: _Case | None) -> dict[str, Any]:
    ref = after or before
    assert ref is not None
    return {
        "case_id": ref.case_id,
        "probe_id": ref.probe_id,
        "category": ref.category,
        "severity": ref.severity,
        "base_status": None if before is None else before.status,
        "new_status": None if after is None else after.status,
        "base_risk_score": None if before is None else before.risk_score,
        "new_risk_score": None if after is None else after.risk_score,
        "explanation": None if after is None else after.explanation,
    }


def _worst_first(entry: Mapping[str, Any]) -> tuple[int, str]:
    return -_RANK.get(entry["severity"], -1), entry["case_id"]


def _value(report: Mapping[str, Any], path: tuple[str, str]) -> float | None:
    section = report.get("aggregate_metrics", {}).get(path[0])
    value = section.get(path[1]) if isinstance(section, Mapping) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _direction(delta: float | None, better: str | None) -> str:
    if delta is None:
        return "undefined"
    if delta == 0:
        return "same"
    if better is None:
        return "changed"
    return "better" if (delta > 0) == (better == "higher") else "worse"


def change(before: float | None, after: float | None) -> float | None:
    """``after - before`` rounded to :data:`DELTA_DECIMALS` decimal places; ``None`` if either is.

    The difference of two floats carries their rounding: 0.1 - 0.3 is -0.19999999999999998
    and 0.95 - 0.97 is -0.020000000000000018, so a ``_drop`` gate set at exactly the change
    would hold or trip by chance. Rounded, a rate that fell from 30% to 10% has a delta of
    -0.2, the number compare.json holds, the views show and the gates compare (a gate compares
    the number the file holds, as ``faultline score``'s gates compare report.json's). Twelve
    places are far above the error of float arithmetic on rates (about 1e-16) and far below
    what one case moves a rate by (1e-7 in ten million cases). Whole counts stay whole, and a
    change that rounds to zero is 0, never -0.0.
    """
    if before is None or after is None:
        return None
    delta = after - before
    if isinstance(delta, int):
        return delta
    return round(delta, DELTA_DECIMALS) + 0.0  # + 0.0: -0.0 becomes 0.0


def _metric(base: Mapping[str, Any], new: Mapping[str, Any], name: str) -> dict[str, Any]:
    path, better, _, _ = METRICS[name]
    before, after = _value(base, path), _value(new, path)
    delta = change(before, after)
    return {
        "base": before,
        "new": after,
        "delta": delta,
        "better": better,
        "direction": _direction(delta, better),
    }


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _part(run: Mapping[str, Any], key: str) -> dict[str, str | None] | None:
    part = run.get(key)
    if not isinstance(part, Mapping):
        return None
    return {k: _text(part.get(k)) for k in ("name", "version", "sha256")}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _side(report: Mapping[str, Any], name: str) -> dict[str, Any]:
    run = _mapping(report.get("run"))
    target, config = _mapping(run.get("target")), _mapping(run.get("config"))
    return {
        "name": name,
        "run_id": _text(run.get("id")),
        "created_at": _text(run.get("created_at")),
        "tool_version": _text(_mapping(report.get("tool")).get("version")),
        "target": _text(target.get("spec")),
        "probe_set": _part(run, "probe_set"),
        "rules": _part(run, "rules"),
        "learned": _part(run, "learned"),
        "config": {
            "pass_threshold": config.get("pass_threshold"),
            "severity_weights": config.get("severity_weights"),
        },
    }


_PROBE_SETS = (
    "the probe sets differ: verdicts may have changed with the probes (a canary added, an "
    "expectation changed), not the model, and cases of probes in one run only are new or removed"
)
_COMPARABLE = (
    ("probe_set.sha256", _PROBE_SETS),
    ("rules.sha256", "the rule packs differ: verdicts may have changed with the rules, not the model"),
    ("learned.sha256", "the learned signals differ: verdicts may have changed with the scorer"),
    ("config.pass_threshold", "the pass thresholds differ: one risk may pass in one run, fail in the other"),
    ("config.severity_weights", "the severity weights differ: severity-weighted metrics are not comparable"),
)  # fmt: skip
_UNPAIRED = (
    "no case is in both reports (the same probe and sample, and model when a run has several): "
    "there are no per-case changes, only new and removed cases"
)
_MODELS = (
    "the runs have different models: each model's cases are compared with its own, those of a "
    "model in one run only are new or removed, and the overall metrics cover different models"
)


def _comparable(
    base: Mapping[str, Any], new: Mapping[str, Any], changes: _Changes
) -> list[dict[str, Any]]:
    """Warnings about what differs between the runs besides the model's answers."""
    a, b = _side(base, ""), _side(new, "")
    warnings = []
    for field, message in _COMPARABLE:
        section, key = field.split(".")
        before, after = (a[section] or {}).get(key), (b[section] or {}).get(key)
        if before != after:
            warnings.append({"field": field, "base": before, "new": after, "message": message})
    models = changes.models
    if changes.by_model and models[0] != models[1]:
        warnings.append(
            {"field": "models", "base": models[0], "new": models[1], "message": _MODELS}
        )
    if not changes.paired and changes.base.cases and changes.new.cases:
        warnings.append({"field": "cases.case_id", "base": None, "new": None, "message": _UNPAIRED})
    return warnings


def _verdict(changes: _Changes, metrics: Mapping[str, Any]) -> str:
    """``worse``, ``better``, ``mixed`` or ``same`` by paired cases; by pass rate when none pair.

    Worse: a regression, a new error, or an error that now fails (a failure nobody saw
    before is a new failure, never an improvement); better: a fix, or an error that now passes.
    """
    if not changes.paired:
        direction = metrics["pass_rate"]["direction"]
        return str(direction) if direction in ("better", "worse") else "same"
    lists = changes.lists
    failing = sum(e["new_status"] == "fail" for e in lists["error_resolved"])
    worse = len(lists["regressions"]) + len(lists["became_error"]) + failing
    better = len(lists["fixes"]) + len(lists["error_resolved"]) - failing
    if worse and better:
        return "mixed"
    return "worse" if worse else "better" if better else "same"


def _by_category(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    before, after = _mapping(base.get("by_category")), _mapping(new.get("by_category"))
    return {
        name: _pass_rates(_mapping(before.get(name)), _mapping(after.get(name)), "n")
        for name in sorted(set(before) | set(after))
    }


def _pass_rates(a: Mapping[str, Any], b: Mapping[str, Any], n: str) -> dict[str, Any]:
    """The scored cases (under ``n``) and pass rates of one slice in each report, and the change."""
    rate_a, rate_b = a.get("pass_rate"), b.get("pass_rate")
    delta = change(rate_a, rate_b)
    return {
        "base_n": a.get(n, 0),
        "new_n": b.get(n, 0),
        "base_pass_rate": rate_a,
        "new_pass_rate": rate_b,
        "delta": delta,
        "direction": _direction(delta, "higher"),
    }


def _by_transform(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any] | None:
    """Each attack transform's pass rate in both runs, and per category; ``None`` when neither has any."""
    before, after = _mapping(base.get("by_transform")), _mapping(new.get("by_transform"))
    if not before and not after:
        return None
    names = sorted(set(before) | set(after), key=lambda t: (t != NO_TRANSFORM, t))
    out: dict[str, Any] = {}
    for name in names:
        a, b = _mapping(before.get(name)), _mapping(after.get(name))
        out[name] = {**_pass_rates(a, b, "scored"), "by_category": _by_category(a, b)}
    return out


def _significance(changes: _Changes) -> dict[str, Any]:
    if changes.paired_scored:
        result = mcnemar_test(len(changes.lists["regressions"]), len(changes.lists["fixes"]))
        scope = {"scope": "paired", "n": changes.paired_scored}
    else:
        a, b = changes.base, changes.new
        result = two_proportion_test(a.passed, a.scored, b.passed, b.scored)
        scope = {"scope": "unpaired", "n": a.scored + b.scored}
    p = result["p_value"]
    return {
        **result,
        **scope,
        "alpha": ALPHA,
        "significant": None if p is None else p < ALPHA,
    }
