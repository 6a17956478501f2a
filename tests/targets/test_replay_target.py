"""Recorded answers as the target: lookup, recorded failures, several models, bad files."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

from faultline.errors import ResponseError, UsageError
from faultline.targets import CallError, Completion, Request, TargetOptions, open_target
from faultline.targets.replay import ReplayTarget
from tests.conftest import write_jsonl

ROWS: list[dict[str, Any]] = [
    {"probe_id": "a", "response": "a0", "model": "m-1", "finish_reason": "stop"},
    {"probe_id": "a", "sample": 1, "response": "a1", "model": "m-1", "reasoning": "think"},
    {"probe_id": "b", "response": "b0", "model": "m-1", "finish_reason": "length"},
    {"probe_id": "c", "error": "read timed out", "model": "m-1"},
    {"probe_id": "d", "error": {"type": "timeout", "message": "after 30 s"}, "model": "m-1"},
]


def request(probe_id: str, sample: int = 0) -> Request:
    return Request(probe_id, sample, ({"role": "user", "content": "ignored"},))


def complete(target: ReplayTarget, probe_id: str, sample: int = 0) -> Completion | CallError:
    async def go() -> Completion | CallError:
        try:
            return await target.complete(request(probe_id, sample))
        except CallError as exc:
            return exc
        finally:
            await target.aclose()

    return asyncio.run(go())


def failure(target: ReplayTarget, probe_id: str, sample: int = 0) -> CallError:
    result = complete(target, probe_id, sample)
    assert isinstance(result, CallError), result
    return result


@pytest.fixture
def replay(tmp_path: Path) -> ReplayTarget:
    return ReplayTarget(str(write_jsonl(tmp_path / "responses.jsonl", ROWS)))


@pytest.mark.parametrize(
    ("probe_id", "sample", "expected"),
    [
        ("a", 0, Completion(text="a0", model="m-1", finish_reason="stop")),
        ("a", 1, Completion(text="a1", model="m-1", reasoning="think")),
        ("b", 0, Completion(text="b0", model="m-1", finish_reason="length")),
    ],
)
def test_answers_by_probe_and_sample(
    replay: ReplayTarget, probe_id: str, sample: int, expected: Completion
) -> None:
    assert complete(replay, probe_id, sample) == expected


@pytest.mark.parametrize(("probe_id", "recorded"), [("c", "read timed out"), ("d", "after 30 s")])
def test_a_recorded_error_of_another_shape_replays_as_an_exception(
    replay: ReplayTarget, probe_id: str, recorded: str
) -> None:
    error = failure(replay, probe_id)
    assert error.kind == "exception"
    assert not error.retryable
    assert not error.fatal
    assert error.message == recorded


@pytest.mark.parametrize(
    "recorded",
    [
        {"kind": "server_error", "message": "HTTP 500: internal boom", "status": 500},
        {"kind": "bad_request", "message": "HTTP 400: too long", "status": 400, "attempts": 1},
        {"kind": "timeout", "message": "no answer within 2 s", "attempts": 6},
        {"kind": "not_found", "message": "HTTP 404: no such model", "status": 404},
        {"kind": "content_filter", "message": "the provider's content filter withheld it"},
    ],
    ids=lambda r: r["kind"],
)
def test_a_recorded_error_replays_with_its_kind_status_and_message(
    tmp_path: Path, recorded: dict[str, Any]
) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [{"probe_id": "e", "error": recorded}])
    error = failure(ReplayTarget(str(path)), "e")
    assert (error.kind, error.message, error.status) == (
        recorded["kind"],
        recorded["message"],
        recorded.get("status"),
    )
    assert not error.retryable  # replaying it again gives the same failure
    assert not error.fatal


def test_a_recorded_error_of_an_unknown_kind_keeps_its_message(tmp_path: Path) -> None:
    recorded = {"kind": "quota_exhausted", "message": "monthly quota spent", "status": "x"}
    path = write_jsonl(tmp_path / "r.jsonl", [{"probe_id": "e", "error": recorded}])
    error = failure(ReplayTarget(str(path)), "e")
    assert (error.kind, error.message, error.status) == ("exception", "monthly quota spent", None)


@pytest.mark.parametrize(
    ("recorded", "kept"), [(4, 4), (1, 1), (0, None), (-2, None), (True, None), ("3", None)]
)
def test_a_recorded_error_keeps_its_count_of_attempts_when_it_is_one(
    tmp_path: Path, recorded: object, kept: int | None
) -> None:
    error = {"kind": "timeout", "message": "read timed out", "attempts": recorded}
    path = write_jsonl(tmp_path / "r.jsonl", [{"probe_id": "e", "error": error}])
    assert failure(ReplayTarget(str(path)), "e").attempts == kept


@pytest.mark.parametrize(("probe_id", "sample"), [("zzz", 0), ("b", 1)])
def test_a_missing_answer_is_no_answer(replay: ReplayTarget, probe_id: str, sample: int) -> None:
    error = failure(replay, probe_id, sample)
    assert error.kind == "no_answer"
    assert not error.retryable
    assert not error.fatal
    assert error.message == (
        f"responses.jsonl records no answer for probe '{probe_id}' sample {sample}"
    )


TWO_MODELS: list[dict[str, Any]] = [
    {"probe_id": "a", "response": "from one", "model": "m-1"},
    {"probe_id": "a", "response": "from two", "model": "m-2"},
    {"probe_id": "b", "response": "only two", "model": "m-2"},
]


def test_two_models_answering_one_probe_and_sample_need_a_choice(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "responses.jsonl", TWO_MODELS)
    with pytest.raises(UsageError) as info:
        ReplayTarget(str(path))
    message = str(info.value)
    assert "probe 'a' sample 0" in message
    assert "'m-1'" in message
    assert "'m-2'" in message
    assert f"replay:{path}#MODEL" in message


@pytest.mark.parametrize(("model", "a_text"), [("m-1", "from one"), ("m-2", "from two")])
def test_a_model_after_the_hash_picks_its_answers(tmp_path: Path, model: str, a_text: str) -> None:
    path = write_jsonl(tmp_path / "responses.jsonl", TWO_MODELS)
    target = open_target(f"replay:{path}#{model}")
    assert isinstance(target, ReplayTarget)
    assert target.spec == f"replay:responses.jsonl#{model}"
    result = complete(target, "a")
    assert isinstance(result, Completion)
    assert (result.text, result.model) == (a_text, model)


def test_a_picked_model_does_not_answer_for_another(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "responses.jsonl", TWO_MODELS)
    assert failure(ReplayTarget(f"{path}#m-1"), "b").kind == "no_answer"


def test_describe_has_the_source_name_hash_and_the_single_model(
    tmp_path: Path, replay: ReplayTarget
) -> None:
    path = tmp_path / "responses.jsonl"
    assert replay.describe() == {
        "spec": "replay:responses.jsonl",
        "provider": "replay",
        "model": "m-1",
        "source": {
            "name": "responses.jsonl",
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        },
    }
    assert str(tmp_path) not in str(replay.describe())


def test_describe_names_the_picked_model(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "responses.jsonl", TWO_MODELS)
    assert ReplayTarget(f"{path}#m-2").describe()["model"] == "m-2"


@pytest.mark.parametrize(
    ("rows", "model"),
    [
        ([{"probe_id": "a", "response": "x"}], None),
        (
            [
                {"probe_id": "a", "response": "x", "model": "m-1"},
                {"probe_id": "b", "response": "y"},
            ],
            "m-1",
        ),
        (
            [
                {"probe_id": "a", "response": "x", "model": "m-1"},
                {"probe_id": "b", "response": "y", "model": "m-2"},
            ],
            None,
        ),
    ],
    ids=["no-model", "one-named-one-not", "two-models-no-overlap"],
)
def test_describe_names_a_model_only_when_exactly_one_is_named(
    tmp_path: Path, rows: list[dict[str, Any]], model: str | None
) -> None:
    target = ReplayTarget(str(write_jsonl(tmp_path / "responses.jsonl", rows)))
    assert target.describe()["model"] == model


def test_the_target_attributes(replay: ReplayTarget) -> None:
    assert (replay.provider, replay.secrets) == ("replay", ())
    assert replay.model.endswith("responses.jsonl")


@pytest.mark.parametrize(
    ("bad_line", "field"),
    [
        ("{not json", None),
        ('{"response": "no id"}', "probe_id"),
        ('{"probe_id": "b"}', "response"),
        ('{"probe_id": "b", "response": "x", "sample": -1}', "sample"),
        ('["a", "list"]', None),
    ],
    ids=["not-json", "no-probe-id", "no-response-or-error", "negative-sample", "not-an-object"],
)
def test_a_malformed_file_is_a_response_error_naming_the_line(
    tmp_path: Path, bad_line: str, field: str | None
) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_text('{"probe_id": "a", "response": "fine"}\n' + bad_line + "\n", encoding="utf-8")
    with pytest.raises(ResponseError) as info:
        ReplayTarget(str(path))
    assert info.value.line == 2
    assert info.value.field == field
    assert "responses.jsonl:2" in str(info.value)


def test_a_missing_file_is_a_response_error(tmp_path: Path) -> None:
    with pytest.raises(ResponseError, match=r"nothing\.jsonl"):
        ReplayTarget(str(tmp_path / "nothing.jsonl"))


@pytest.mark.parametrize(
    "option", [TargetOptions(base_url="http://localhost:1/v1"), TargetOptions(api_key_env="K")]
)
def test_api_options_are_refused_for_a_replay_target(option: TargetOptions) -> None:
    with pytest.raises(UsageError, match="apply to API targets, not replay"):
        open_target("replay:responses.jsonl", options=option)


def test_a_model_no_answer_is_from_is_refused_naming_the_models(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "responses.jsonl", TWO_MODELS)
    with pytest.raises(UsageError, match=r"no answer is from model 'm-3'.*m-1, m-2"):
        ReplayTarget(f"{path}#m-3")


def test_a_repeated_answer_of_one_model_names_the_line(tmp_path: Path) -> None:
    rows = [{"probe_id": "a", "response": "x"}, {"probe_id": "a", "response": "y"}]
    path = write_jsonl(tmp_path / "responses.jsonl", rows)
    with pytest.raises(UsageError, match=r"responses.jsonl:2: .* a second time") as info:
        ReplayTarget(str(path))
    assert "#MODEL" not in str(info.value)


def test_recorded_token_counts_are_replayed(tmp_path: Path) -> None:
    rows = [{"probe_id": "a", "response": "x", "usage": {"input_tokens": 7, "output_tokens": 3}}]
    result = complete(ReplayTarget(str(write_jsonl(tmp_path / "r.jsonl", rows))), "a")
    assert isinstance(result, Completion)
    assert (result.input_tokens, result.output_tokens) == (7, 3)


def test_a_path_with_a_hash_is_read_whole_when_that_file_exists(tmp_path: Path) -> None:
    # Before, the spec was cut at its first '#': 'run#1/responses.jsonl' read as file 'run'.
    (tmp_path / "run#1").mkdir()
    path = write_jsonl(tmp_path / "run#1" / "responses.jsonl", ROWS)
    target = open_target(f"replay:{path}")
    assert isinstance(target, ReplayTarget)
    assert target.path == path
    assert target.chosen is None
    result = complete(target, "a")
    assert isinstance(result, Completion)
    assert result.text == "a0"


def test_a_path_with_a_hash_can_still_pick_a_model(tmp_path: Path) -> None:
    (tmp_path / "run#1").mkdir()
    path = write_jsonl(tmp_path / "run#1" / "responses.jsonl", TWO_MODELS)
    target = ReplayTarget(f"{path}#m-2")
    assert (target.path, target.chosen) == (path, "m-2")
    assert target.spec == "replay:responses.jsonl#m-2"


def test_a_model_name_with_a_hash_follows_the_file(tmp_path: Path) -> None:
    rows = [{"probe_id": "a", "response": "x", "model": "m#2"}]
    path = write_jsonl(tmp_path / "responses.jsonl", rows)
    target = ReplayTarget(f"{path}#m#2")
    assert (target.path, target.chosen) == (path, "m#2")


def test_a_missing_file_with_a_hash_is_named_up_to_the_last_hash(tmp_path: Path) -> None:
    with pytest.raises(ResponseError, match=r"run#1[/\\]missing\.jsonl"):
        ReplayTarget(f"{tmp_path}/run#1/missing.jsonl#m-1")
