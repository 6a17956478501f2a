"""Scoring: rule packs (data), compiled matchers, and the verdict on each response.

Scoring is a pure function of (probe, response, rule pack, configuration): no I/O, no clock,
no randomness, so a batch can be scored anywhere (a worker process, a Dask task) and give the
same :class:`CaseScore`. To add a rule, add it with examples to a pack in ``scoring/packs/``
or to your own YAML pack; ``faultline rules test`` runs the examples.
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import TypeVar

from faultline.probes.model import Probe
from faultline.probes.probeset import ProbeSet
from faultline.responses.check import ResponseChecker, check_known
from faultline.responses.model import Response
from faultline.scoring.case import (
    DEFAULT_SEVERITY_WEIGHTS,
    MAX_SEVERITY_WEIGHT,
    CaseScore,
    Evidence,
    ScoringConfig,
)
from faultline.scoring.examples import ExampleResult, run_examples
from faultline.scoring.matcher import Hit, Matcher
from faultline.scoring.rules import Rule, RulePack, ScoringModel, builtin_rule_packs, load_rule_pack
from faultline.scoring.scorer import Scorer, case_id_for

__all__ = [
    "DEFAULT_SEVERITY_WEIGHTS",
    "MAX_SEVERITY_WEIGHT",
    "CaseScore",
    "Evidence",
    "ExampleResult",
    "Hit",
    "Matcher",
    "Rule",
    "RulePack",
    "Scorer",
    "ScoringConfig",
    "ScoringModel",
    "builtin_rule_packs",
    "case_id_for",
    "load_rule_pack",
    "order_cases",
    "run_examples",
    "score",
]


def score(
    probes: ProbeSet | Iterable[Probe],
    responses: Iterable[Response],
    *,
    rules: RulePack | str = "default",
    config: ScoringConfig | None = None,
) -> list[CaseScore]:
    """Score recorded responses against their probes.

    Args:
        probes: The probe set (or any iterable of probes) the responses answer.
        responses: The responses; each must name a probe in ``probes``.
        rules: A rule pack, or the name or path of one.
        config: Pass threshold and severity weights.

    Returns:
        One :class:`CaseScore` per response, ordered by model, probe-set order and sample.

    Raises:
        ResponseError: A response names a probe that is not in ``probes``, or two responses
            share a probe, sample and model.
        TypeError: ``probes`` or ``responses`` is a path or holds plain dicts: load them with
            :func:`~faultline.load_probes` and :func:`~faultline.load_responses`.
    """
    probe_set = probes if isinstance(probes, ProbeSet) else ProbeSet("probes", _probes(probes))
    pack = rules if isinstance(rules, RulePack) else load_rule_pack(rules)
    answered = _responses(responses)
    check_known(answered, probe_set.by_id, set_name=probe_set.name)
    checker = ResponseChecker()
    checker.check_unique(answered)
    qualify = len(checker.models) > 1
    cases = Scorer(pack, config).score_batch(probe_set.by_id, answered, qualify_model=qualify)
    return order_cases(cases, probe_set)


_T = TypeVar("_T")


def _probes(probes: object) -> tuple[Probe, ...]:
    """``probes`` as a tuple of :class:`Probe`, or a TypeError saying what was expected."""
    expected = "a ProbeSet or Probe objects; load a file or built-in set with faultline.load_probes"
    return tuple(_objects(probes, "probes", Probe, expected))


def _responses(responses: object) -> list[Response]:
    """``responses`` as a list of :class:`Response`, or a TypeError saying what was expected."""
    expected = "Response objects; read a responses file with faultline.load_responses"
    build = ", or build faultline.Response(probe_id=..., response=...)"
    return _objects(responses, "responses", Response, expected, build)


def _objects(value: object, name: str, kind: type[_T], expected: str, build: str = "") -> list[_T]:
    """The items of ``value``, each a ``kind``: not a path, not plain dicts (a TypeError)."""
    if isinstance(value, str | bytes | PathLike) or not isinstance(value, Iterable):
        raise TypeError(f"faultline.score: {name} must be {expected}(path); got {_shown(value)}")
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, kind):
            raise TypeError(
                f"faultline.score: {name}[{i}] is {_shown(item)}; expected {expected}{build}"
            )
    return items


def _shown(value: object) -> str:
    if isinstance(value, str | PathLike):
        return f"the path {str(value)!r}"
    return f"a {type(value).__name__}"


def order_cases(cases: Iterable[CaseScore], probe_set: ProbeSet) -> list[CaseScore]:
    """Put cases in the report's stable order: model, then probe-set order, then sample."""
    index = probe_set.index
    return sorted(cases, key=lambda c: (c.model or "", index[c.probe_id], c.sample))
