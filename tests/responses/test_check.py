"""Checking responses against their probe set: known probe ids, each case answered once."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultline.errors import ResponseError
from faultline.responses import Response, ResponseChecker, check_known

PROBES = {"inj-1": object(), "inj-2": object(), "wpn-1": object()}


def _r(probe_id: str, sample: int = 0, model: str | None = None) -> Response:
    return Response(probe_id=probe_id, response="text", sample=sample, model=model)


# --------------------------------------------------------------------------- check_unique


def test_distinct_cases_pass() -> None:
    checker = ResponseChecker()
    checker.check_unique([_r("inj-1"), _r("inj-1", sample=1), _r("inj-1", model="m"), _r("inj-2")])
    assert checker.answered == {"inj-1", "inj-2"}
    assert checker.models == {None, "m"}


def test_repeat_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "responses.jsonl"
    answers = [_r("inj-1"), _r("inj-2"), _r("inj-1")]
    with pytest.raises(ResponseError) as info:
        ResponseChecker().check_unique(answers, lines=[3, 5, 9], path=path)
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), 9, "sample")
    assert "line 3" in str(err)
    assert "'inj-1'" in str(err)


def test_repeat_by_the_same_model_names_the_model() -> None:
    answers = [_r("inj-1", model="gpt"), _r("inj-1", model="gpt")]
    with pytest.raises(ResponseError, match="model 'gpt'"):
        ResponseChecker().check_unique(answers)


def test_repeat_without_lines_uses_positions() -> None:
    with pytest.raises(ResponseError) as info:
        ResponseChecker().check_unique([_r("a"), _r("b"), _r("a", sample=0)])
    assert info.value.line == 3
    assert "line 1" in str(info.value)


def test_repeat_across_batches_with_lines_is_rejected() -> None:
    checker = ResponseChecker()
    checker.check_unique([_r("inj-1"), _r("inj-2")], lines=[1, 2])
    with pytest.raises(ResponseError) as info:
        checker.check_unique([_r("wpn-1"), _r("inj-2")], lines=[3, 4])
    assert info.value.line == 4
    assert "line 2" in str(info.value)


def test_repeat_across_batches_without_lines_is_rejected() -> None:
    # Each batch numbers its answers from 1, so the repeat has the same "line" as the first.
    checker = ResponseChecker()
    checker.check_unique([_r("inj-1")])
    with pytest.raises(ResponseError):
        checker.check_unique([_r("inj-1")])


# --------------------------------------------------------------------------- check_known


def test_known_ids_pass() -> None:
    check_known([_r("inj-1"), _r("wpn-1", sample=2)], PROBES)


def test_unknown_id_names_line_and_field_with_suggestion(tmp_path: Path) -> None:
    path = tmp_path / "responses.jsonl"
    with pytest.raises(ResponseError) as info:
        check_known([_r("inj-1"), _r("inj-3")], PROBES, set_name="small", lines=[2, 7], path=path)
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), 7, "probe_id")
    assert "'inj-3'" in str(err)
    assert "'small'" in str(err)
    assert "did you mean" in str(err)


def test_unknown_id_far_from_every_probe_has_no_suggestion() -> None:
    with pytest.raises(ResponseError) as info:
        check_known([_r("zzzzzzzz")], PROBES)
    assert "did you mean" not in str(info.value)
    assert info.value.line == 1


def test_unknown_id_is_reported_at_the_first_occurrence() -> None:
    with pytest.raises(ResponseError) as info:
        check_known([_r("inj-1"), _r("nope-1"), _r("nope-2")], PROBES)
    assert info.value.line == 2
    assert "'nope-1'" in str(info.value)
