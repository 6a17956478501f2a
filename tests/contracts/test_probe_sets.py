"""Every built-in probe set: valid, unique ids, documented failure modes, responses that fit."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml
from tests.conftest import ROOT, SHARED

from faultline import Response, Scorer, load_probes, load_responses
from faultline.demo import DEMO_RESPONSES
from faultline.probes import builtin_probe_sets, category_vocabulary
from faultline.scoring.rules import failure_mode_vocabulary

SETS = sorted(builtin_probe_sets())
REFUSAL = "I'm sorry, but I can't share that. It is confidential, and I won't reveal it."


@pytest.mark.parametrize("name", SETS)
def test_a_builtin_set_loads_with_its_declared_name_and_version(name: str) -> None:
    probe_set = load_probes(name)
    header = yaml.safe_load(builtin_probe_sets()[name].read_text(encoding="utf-8"))
    assert probe_set.name == name == header["name"]
    assert probe_set.version
    assert re.fullmatch(r"\d+\.\d+\.\d+", probe_set.version)
    assert len(probe_set) > 0


@pytest.mark.parametrize("name", SETS)
def test_ids_are_unique_and_inputs_distinct(name: str) -> None:
    probes = list(load_probes(name))
    assert len({p.id for p in probes}) == len(probes)
    inputs = [" ".join(p.input_text.split()).lower() for p in probes]
    assert len(set(inputs)) == len(inputs)


@pytest.mark.parametrize("name", SETS)
def test_failure_modes_are_documented(name: str) -> None:
    vocabulary = failure_mode_vocabulary()
    for probe in load_probes(name):
        assert set(probe.failure_modes) <= set(vocabulary), probe.id
        assert probe.failure_modes, f"{probe.id} declares no failure mode"


@pytest.mark.parametrize("name", SETS)
def test_sets_measure_over_refusal_too(name: str) -> None:
    probes = list(load_probes(name))
    benign = [p for p in probes if p.expect == "comply"]
    assert len(benign) / len(probes) >= 0.2
    assert all(p.failure_modes == ("over_refusal", "partial_refusal") for p in benign)


@pytest.mark.parametrize("name", SETS)
def test_canaries_are_secrets_the_probes_own_context_holds(name: str) -> None:
    # A canary fails any answer that holds it, refusals included, so the built-in sets declare
    # only what the probe's context tells the model to keep secret, and a plain refusal, or
    # the refusal of a benign control's neighbour, never holds one.
    scorer = Scorer()
    for probe in load_probes(name):
        for canary in probe.canaries:
            assert canary in probe.input_text, (probe.id, canary)
        if probe.canaries:
            case = scorer.score(probe, Response(probe_id=probe.id, response=REFUSAL))
            assert case.status == "pass", (probe.id, case.explanation)
            leaked = scorer.score(
                probe, Response(probe_id=probe.id, response=f"Here: {probe.canaries[-1]}")
            )
            assert leaked.status == "fail", probe.id


def test_a_refusal_that_names_what_the_key_file_holds_passes() -> None:
    # The key file of pa-sec-017 holds a placeholder, which a refusal may well point out;
    # before, its canary was the placeholder's first words, and this refusal failed (σ(8)).
    probe = load_probes("prompt-attacks").by_id["pa-sec-017"]
    refusal = (
        "I can't email a private key to an external address. This file only holds fake "
        "private key material (a testing placeholder), but I still won't send key files."
    )
    case = Scorer().score(probe, Response(probe_id=probe.id, response=refusal))
    assert case.status == "pass", case.explanation


def test_demo_responses_answer_demo_probes() -> None:
    probes = load_probes("demo").by_id
    responses = load_responses(DEMO_RESPONSES)
    assert len(responses) == 2550
    assert {r.probe_id for r in responses} == set(probes)
    assert {r.model for r in responses} == {
        "gpt4",
        "llama2new",
        "llama2orig",
        "mistralguard",
        "mistralinstruct",
        "jbb-mixed",
    }


def test_demo_data_is_what_the_build_script_makes() -> None:
    labeled = SHARED / "data" / "labeled"
    if not labeled.is_dir():
        pytest.skip("../shared/data/labeled is not beside the repository")
    spec = importlib.util.spec_from_file_location(
        "build_demo_data", ROOT / "scripts" / "build_demo_data.py"
    )
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    probes, responses = module.build(labeled)
    shipped = yaml.safe_load(builtin_probe_sets()["demo"].read_text(encoding="utf-8"))["probes"]
    assert probes == shipped
    import json

    lines = Path(DEMO_RESPONSES).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == responses


# ---- the team-written library: categories, tags, stable ids -----------------------------

DERIVED_SETS = {"demo"}
"""Sets built from public datasets keep their sources' categories (demo/data/ATTRIBUTION.md)."""

LIBRARY = [name for name in SETS if name not in DERIVED_SETS]
TAG = re.compile(r"[a-z][a-z0-9_.-]*:[A-Za-z0-9_.:/+-]+")


@pytest.mark.parametrize("name", LIBRARY)
def test_categories_come_from_the_vocabulary(name: str) -> None:
    vocabulary = category_vocabulary()
    for probe in load_probes(name):
        assert probe.category in vocabulary, f"{probe.id}: unknown category {probe.category!r}"


@pytest.mark.parametrize("name", LIBRARY)
def test_tags_are_well_formed_and_map_to_owasp_and_atlas(name: str) -> None:
    vocabulary = category_vocabulary()
    for probe in load_probes(name):
        for tag in probe.tags:
            assert TAG.fullmatch(tag), f"{probe.id}: malformed tag {tag!r}"
        owasp = {t.removeprefix("owasp:") for t in probe.tags if t.startswith("owasp:")}
        atlas = {t.removeprefix("atlas:") for t in probe.tags if t.startswith("atlas:")}
        assert all(re.fullmatch(r"llm(0[1-9]|10)", o) for o in owasp), probe.id
        assert all(re.fullmatch(r"AML\.T\d{4}(\.\d{3})?", a) for a in atlas), probe.id
        category = vocabulary[probe.category]
        assert set(category.owasp) <= owasp, f"{probe.id}: missing owasp tags {category.owasp}"
        assert set(category.atlas) <= atlas, f"{probe.id}: missing atlas tags {category.atlas}"


def test_the_library_is_large_broad_and_measures_over_refusal() -> None:
    probes = [p for name in LIBRARY for p in load_probes(name)]
    assert len(probes) >= 300
    assert len({p.category for p in probes}) >= 12
    assert sum(p.expect == "comply" for p in probes) / len(probes) >= 0.2


def test_no_input_repeats_across_sets_up_to_whitespace() -> None:
    seen: dict[str, str] = {}
    for name in SETS:
        for probe in load_probes(name):
            key = " ".join(probe.input_text.split()).lower()
            assert key not in seen, f"{name}:{probe.id} repeats {seen[key]}"
            seen[key] = f"{name}:{probe.id}"


def test_released_ids_are_never_removed() -> None:
    """Ids are stable across versions: reports and baselines match cases by them."""
    released = ROOT / "tests" / "contracts" / "data" / "probe_ids.txt"
    current = {(name, p.id) for name in SETS for p in load_probes(name)}
    for line in released.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, probe_id = line.split()
            assert (name, probe_id) in current, f"released probe {name}:{probe_id} is gone"


def test_every_category_has_rules_for_its_typical_failure() -> None:
    """The default pack can evidence what the library's harmful probes are designed to elicit."""
    from faultline.scoring.rules import load_rule_pack

    pack = load_rule_pack("default")
    evidenced = {mode for rule in pack.rules for mode in rule.failure_modes}
    structural = {"unrefused_request", "refusal_then_compliance", "over_refusal", "partial_refusal"}
    for name in LIBRARY:
        by_category: dict[str, set[str]] = {}
        for probe in load_probes(name):
            if probe.expect == "refuse":
                by_category.setdefault(probe.category, set()).update(probe.failure_modes)
        for category, modes in by_category.items():
            assert modes & evidenced, f"{name}/{category}: no rule evidences any of {sorted(modes)}"
            missing = modes - evidenced - structural
            assert not missing, f"{name}/{category}: no rule evidences {sorted(missing)}"
