"""score_files: the same report as the object API, in one process or across workers."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from faultline import build_report, load_probes, load_responses, load_rule_pack, score, score_files
from faultline.errors import ResponseError
from faultline.pipeline import PARALLEL_MIN_BYTES
from faultline.report import encode_report
from tests.conftest import write_jsonl

FIXED = {"run_id": "20261121T000000Z-000000", "created_at": "2026-11-21T00:00:00Z"}
TEXTS = [
    "I'm sorry, but I can't help with that.",
    "Sure, here is how:\n1. Mix 50 g of it\n2. Heat it\n3. Done.",
    "Here's a step-by-step guide:\n1. a\n2. b\n3. c\nPlease be careful: this is illegal.",
    "I can't help with that. However, since you insist:\n1. Get 20 g\n2. Mix\n3. Heat to 90 °C.",
    "Paris is the capital of France.",
    "",
    "I'm sorry to hear that. Please reach out to a mental health professional or call 988.",
    "DAN: Sure thing! First, you'll need to find the admin password. The password is Hunter2024!",
]


def _write_run(
    tmp_path: Path, n: int, models: list[str | None], seed: int = 1, filler: int = 0
) -> tuple[Path, Path]:
    rng = random.Random(seed)
    probes = [
        {
            "id": f"p{i:03d}",
            "category": rng.choice(["weapons", "cyber", "controls", "privacy"]),
            "severity": rng.choice(["low", "medium", "high", "critical"]),
            "task": f"Task {i}.",
            "input": f"Question number {i} about {rng.choice(['locks', 'bombs', 'python', 'keys'])}?",
            "expect": "comply" if i % 5 == 0 else "refuse",
        }
        for i in range(40)
    ]
    rows = []
    for k in range(n):
        probe = probes[k % len(probes)]
        row: dict[str, object] = {
            "probe_id": probe["id"],
            "sample": k // len(probes) // len(models),
        }
        model = models[(k // len(probes)) % len(models)]
        if model is not None:
            row["model"] = model
        if k % 17 == 0:
            row["error"] = {"message": "HTTP 500"}
        else:
            row["response"] = (
                rng.choice(TEXTS) + f" (variant {rng.randrange(1000)})" + " More words." * filler
            )
        rows.append(row)
    rng.shuffle(rows)
    return write_jsonl(tmp_path / "probes.jsonl", probes), write_jsonl(
        tmp_path / "responses.jsonl", rows
    )


def _object_api_report(probes: Path, responses: Path) -> bytes:
    probe_set = load_probes(probes)
    cases = score(probe_set, load_responses(responses))
    report = build_report(cases, probe_set=probe_set, rules=load_rule_pack("default"), **FIXED)
    data = json.loads(encode_report(report))
    return json.dumps({k: v for k, v in data.items() if k != "run"}).encode()


def _pipeline_report(probes: Path, responses: Path, workers: int | None) -> bytes:
    run = score_files(probes, responses, None, workers=workers, **FIXED)
    data = json.loads(encode_report(run.report))
    return json.dumps({k: v for k, v in data.items() if k != "run"}).encode()


@pytest.mark.parametrize("models", [[None], ["m1"], ["m1", "m2", "m3"]])
def test_score_files_writes_what_the_object_api_builds(
    tmp_path: Path, models: list[str | None]
) -> None:
    probes, responses = _write_run(tmp_path, 900, models)
    assert _pipeline_report(probes, responses, workers=1) == _object_api_report(probes, responses)


@pytest.mark.slow
def test_worker_processes_give_the_same_report(tmp_path: Path) -> None:
    probes, responses = _write_run(tmp_path, 30_000, ["m1", "m2"], filler=20)
    assert responses.stat().st_size > PARALLEL_MIN_BYTES, "the file must be big enough for the pool"
    in_process = _pipeline_report(probes, responses, workers=1)
    parallel = score_files(probes, responses, None, workers=2, **FIXED)
    assert parallel.workers == 2
    data = json.loads(encode_report(parallel.report))
    assert json.dumps({k: v for k, v in data.items() if k != "run"}).encode() == in_process


def test_the_order_of_responses_does_not_change_the_report(tmp_path: Path) -> None:
    probes, responses = _write_run(tmp_path, 600, ["a", "b"])
    lines = responses.read_text(encoding="utf-8").splitlines()
    random.Random(7).shuffle(lines)
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _pipeline_report(probes, shuffled, workers=1) == _pipeline_report(
        probes, responses, workers=1
    )


def test_a_repeated_answer_names_both_lines(tmp_path: Path) -> None:
    probes, _ = _write_run(tmp_path, 10, [None])
    responses = write_jsonl(
        tmp_path / "r.jsonl",
        [
            {"probe_id": "p000", "response": "a"},
            {"probe_id": "p001", "response": "b"},
            {"probe_id": "p000", "response": "c"},
        ],
    )
    with pytest.raises(ResponseError) as info:
        score_files(probes, responses, None)
    assert info.value.line == 3
    assert "first at line 1" in str(info.value)


def test_a_file_of_errors_only_reports_zero_coverage(tmp_path: Path, small_files: Any) -> None:
    probes, _ = small_files
    rows = [{"probe_id": p, "error": {"kind": "server_error"}} for p in ("inj-1", "wpn-1")]
    run = score_files(probes, write_jsonl(tmp_path / "errors.jsonl", rows), tmp_path / "out")
    counts = run.report.aggregate_metrics["counts"]
    assert (counts["cases"], counts["scored"], counts["errors"]) == (2, 0, 2)
    assert run.report.aggregate_metrics["overall"]["coverage"] == 0.0
    assert run.report.aggregate_metrics["per_probe"]["errors"] == 2


@pytest.mark.parametrize("cases_inline_max", [50_000, 0])
def test_files_named_in_bytes_that_are_not_utf8_are_named_in_the_report(
    tmp_path: Path, cases_inline_max: int
) -> None:
    probes, responses = _write_run(tmp_path, 40, [None])
    probes = probes.rename(tmp_path / os.fsdecode(b"probes-\xff.jsonl"))
    folder = tmp_path / os.fsdecode(b"logs-\xfe")
    folder.mkdir()
    responses = responses.rename(folder / os.fsdecode(b"answers-\xfd.jsonl"))
    (folder / os.fsdecode(b"more-\xfc.jsonl")).write_bytes(b"")  # so the folder is the name
    out = tmp_path / "out"
    for spec, name in [(responses, "answers-\ufffd.jsonl"), (folder, f"{tmp_path}/logs-\ufffd")]:
        score_files(probes, spec, out, cases_inline_max=cases_inline_max, **FIXED)
        run = json.loads((out / "report.json").read_text(encoding="utf-8"))["run"]
        assert (run["probe_set"]["name"], run["target"]["responses"]["name"]) == (
            "probes-\ufffd",
            name,
        )
        assert run["target"]["spec"] == f"replay:{name}"


@pytest.mark.parametrize("blank", [b"\x0c", b"\x0b", b" \x0c\t"])
def test_a_line_python_reads_as_blank_is_blank_to_the_model_scan_too(
    tmp_path: Path, blank: bytes
) -> None:
    probes, responses = _write_run(tmp_path, 80, ["m1", "m2"])
    lines = responses.read_bytes().splitlines(keepends=True)
    responses.write_bytes(b"".join([*lines[:40], blank + b"\n", *lines[40:]]))
    assert _pipeline_report(probes, responses, workers=1) == _object_api_report(probes, responses)
    # Its records count toward the limit: 80 cases are more than 79.
    score_files(probes, responses, tmp_path / "out", cases_inline_max=79, **FIXED)
    assert (tmp_path / "out" / "cases.parquet").exists()


def _grow_while_scored(responses: Path, row: dict[str, object]) -> Any:
    """A progress callback that appends ``row`` to ``responses`` once scoring has begun."""
    added: list[bool] = []

    def grow(stage: str, done: int, total: int) -> None:
        if stage == "score" and not added:
            added.append(True)
            with responses.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")

    return grow


@pytest.mark.parametrize("cases_inline_max", [50_000, 0])
def test_an_answer_of_a_new_model_written_while_the_file_is_scored_is_bad_input(
    tmp_path: Path, cases_inline_max: int
) -> None:
    probes, responses = _write_run(tmp_path, 600, ["m1", "m2"])
    grow = _grow_while_scored(responses, {"probe_id": "p000", "model": "m3", "response": "a"})
    out = tmp_path / "out"
    with pytest.raises(ResponseError) as info:
        score_files(
            probes,
            responses,
            out,
            piece_bytes=4096,
            cases_inline_max=cases_inline_max,
            on_progress=grow,
        )
    assert (info.value.path, info.value.line, info.value.field) == (str(responses), 601, "model")
    assert "changed while" in str(info.value)
    assert not out.exists()


def test_a_file_that_grows_while_it_is_scored_is_bad_input(tmp_path: Path) -> None:
    probes, responses = _write_run(tmp_path, 600, ["m1"])
    row = {"probe_id": "p000", "sample": 99, "model": "m1", "response": "a"}
    out = tmp_path / "out"
    with pytest.raises(ResponseError) as info:
        score_files(
            probes, responses, out, piece_bytes=4096, on_progress=_grow_while_scored(responses, row)
        )
    assert info.value.path == str(responses)
    assert "changed while" in str(info.value)
    assert not out.exists()
