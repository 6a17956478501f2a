"""Every built-in probe set: valid, unique ids, documented failure modes, responses that fit."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml
from tests.conftest import ROOT, SHARED

from faultline import load_probes, load_responses
from faultline.demo import DEMO_RESPONSES
from faultline.probes import builtin_probe_sets
from faultline.scoring.rules import failure_mode_vocabulary

SETS = sorted(builtin_probe_sets())


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
