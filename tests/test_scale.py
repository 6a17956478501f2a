"""Scoring at scale: cases.parquet, every engine, any batching, any input format, same result."""

from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import faultline.pipeline
import faultline.pipeline.spill
from faultline import score_files
from faultline.errors import ResponseError
from faultline.report.build import rerender_report
from faultline.report.parquet import CASE_SCHEMA, case_of_row
from tests.conftest import ROOT, Result, check_report, faultline_cli, write_jsonl
from tests.test_pipeline import FIXED, _write_run


def _run(probes: Path, responses: Path | str, out: Path, **kwargs: Any) -> dict[str, Any]:
    score_files(probes, responses, out, **FIXED, **kwargs)
    report: dict[str, Any] = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return report


def _cases(out: Path) -> list[dict[str, Any]]:
    table = pq.read_table(out / "cases.parquet")
    assert table.schema.equals(CASE_SCHEMA)
    return [case_of_row(r) for r in table.to_pylist()]


def _whole(out: Path) -> dict[str, Any]:
    """A split report with its cases read back in: what an inline report would hold."""
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["schema_version"] == "2"
    assert "cases" not in report
    cases = _cases(out)
    assert report["cases_file"]["rows"] == len(cases)
    return {
        "schema_version": "1",
        **{
            k: v
            for k, v in report.items()
            if k not in {"schema_version", "cases_file", "worst_cases"}
        },
        "cases": cases,
    }


def _by_id(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["case_id"]: c for c in cases}


@pytest.fixture
def run_files(tmp_path: Path) -> tuple[Path, Path]:
    return _write_run(tmp_path, 900, ["m1", "m2", "m3"])


def test_a_split_report_holds_the_cases_metrics_and_geometry_of_the_inline_one(
    tmp_path: Path, run_files: tuple[Path, Path]
) -> None:
    probes, responses = run_files
    inline = _run(probes, responses, tmp_path / "inline")
    split_dir = tmp_path / "split"
    split = _run(probes, responses, split_dir, cases_inline_max=100)
    assert inline["schema_version"] == "1"
    assert not (tmp_path / "inline" / "cases.parquet").exists()
    assert split["aggregate_metrics"] == inline["aggregate_metrics"]
    assert split["observability"] == inline["observability"]
    whole = _whole(split_dir)
    assert _by_id(whole["cases"]) == _by_id(inline["cases"])
    # In input order: the file's order of (probe, sample, model), not the report's.
    order = [json.loads(line) for line in responses.read_text(encoding="utf-8").splitlines()]
    assert [(c["probe_id"], c["sample"], c.get("model")) for c in whole["cases"]] == [
        (r["probe_id"], r.get("sample", 0), r.get("model")) for r in order
    ]
    worst = [w["case_id"] for w in split["aggregate_metrics"]["worst_cases"]]
    assert sorted(c["case_id"] for c in split["worst_cases"]) == sorted(worst)
    assert all(c == _by_id(inline["cases"])[c["case_id"]] for c in split["worst_cases"])
    whole_path = tmp_path / "whole.json"
    whole_path.write_text(json.dumps(whole), encoding="utf-8")
    check_report(whole_path)
    # No spill is left behind.
    assert sorted(p.name for p in split_dir.iterdir()) == [
        "cases.parquet",
        "report.html",
        "report.json",
        "report.md",
    ]


def _dask(test: Any) -> Any:
    """Marks a Dask test: slow, and quiet about the socket distributed can leave to the garbage
    collector at shutdown."""
    for mark in (
        pytest.mark.filterwarnings("ignore::ResourceWarning"),
        pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
        pytest.mark.slow,
    ):
        test = mark(test)
    return test


def _assert_same_files(out: Path, expected: Path) -> None:
    for file in ("report.json", "cases.parquet", "report.md", "report.html"):
        assert (out / file).read_bytes() == (expected / file).read_bytes(), (out.name, file)


@_dask
def test_every_engine_writes_the_same_bytes(
    tmp_path: Path, run_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    probes, responses = run_files
    monkeypatch.setattr(faultline.pipeline, "PARALLEL_MIN_BYTES", 0)
    outs = {
        "here": dict(workers=1),
        "pool": dict(workers=2),
        "dask": dict(workers=2, engine="dask"),
    }
    for name, options in outs.items():
        _run(
            probes, responses, tmp_path / name, cases_inline_max=100, piece_bytes=20_000, **options
        )
    for name in ("pool", "dask"):
        _assert_same_files(tmp_path / name, tmp_path / "here")


@_dask
def test_a_separate_dask_scheduler_gives_the_local_bytes(
    tmp_path: Path, run_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--scheduler ADDRESS``: a scheduler and two workers in processes of their own."""
    probes, responses = run_files
    monkeypatch.setattr(faultline.pipeline, "PARALLEL_MIN_BYTES", 0)
    cluster, address = _start_cluster(tmp_path, workers=2)
    try:
        options: dict[str, Any] = dict(cases_inline_max=100, piece_bytes=20_000)
        _run(probes, responses, tmp_path / "cluster", engine="dask", scheduler=address, **options)
        _run(probes, responses, tmp_path / "here", workers=1, **options)
        from distributed import Client

        with Client(address, timeout=30) as client:  # the run's tasks went through it
            ran = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
        assert ran > 0
    finally:
        _stop(cluster)
    _assert_same_files(tmp_path / "cluster", tmp_path / "here")


def _start_cluster(tmp_path: Path, workers: int) -> tuple[list[subprocess.Popen[bytes]], str]:
    """A ``dask scheduler`` and a ``dask worker`` of ``workers`` processes; the address."""
    address_file = tmp_path / "scheduler.json"
    common = ["--host", "127.0.0.1", "--no-dashboard", "--scheduler-file", str(address_file)]
    cluster = [
        subprocess.Popen(
            [sys.executable, "-m", "dask", *command, *common],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for command in (
            ["scheduler", "--port", "0"],
            ["worker", "--nworkers", str(workers), "--nthreads", "1"],
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists() or not address_file.read_text(encoding="utf-8"):
            assert time.monotonic() < deadline, "the scheduler never wrote its address"
            time.sleep(0.1)
        address: str = json.loads(address_file.read_text(encoding="utf-8"))["address"]
        assert address.startswith("tcp://127.0.0.1:")
    except BaseException:
        _stop(cluster)
        raise
    return cluster, address


def _stop(cluster: list[subprocess.Popen[bytes]]) -> None:
    for process in cluster:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in cluster:
        process.wait(timeout=30)


def _as_parquet(source: Path, target: Path, group: int) -> Path:
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    schema = pa.schema(
        [
            ("probe_id", pa.string()),
            ("response", pa.string()),
            ("sample", pa.int64()),
            ("model", pa.string()),
            ("error", pa.struct([("message", pa.string())])),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), target, row_group_size=group)
    return target


def _as_gzip(source: Path, target: Path) -> Path:
    target.write_bytes(gzip.compress(source.read_bytes()))
    return target


@settings(
    max_examples=6,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    piece_bytes=st.integers(300, 40_000),
    piece_rows=st.integers(1, 700),
    group=st.integers(1, 900),
    split=st.booleans(),
    row_group=st.integers(1, 500),
)
def test_any_batching_of_any_format_gives_the_same_report(
    tmp_path_factory: pytest.TempPathFactory,
    *,
    piece_bytes: int,
    piece_rows: int,
    group: int,
    split: bool,
    row_group: int,
) -> None:
    tmp = tmp_path_factory.mktemp("batching")
    probes, responses = _write_run(tmp, 400, ["m1", None])
    reference = _run(probes, responses, tmp / "reference")
    inline_max = 10 if split else 50_000
    inputs = {
        "jsonl": responses,
        "gzip": _as_gzip(responses, tmp / "responses.jsonl.gz"),
        "parquet": _as_parquet(responses, tmp / "responses.parquet", group),
    }
    with pytest.MonkeyPatch.context() as patch:  # row groups shorter than the run, to cut
        patch.setattr(faultline.pipeline.spill, "ROW_GROUP", row_group)
        whole = _run(probes, responses, tmp / "whole", cases_inline_max=inline_max)
        for name, source in inputs.items():
            out = tmp / name
            report = _run(
                probes,
                source,
                out,
                cases_inline_max=inline_max,
                piece_bytes=piece_bytes,
                piece_rows=piece_rows,
            )
            assert report["aggregate_metrics"] == reference["aggregate_metrics"], name
            assert report["observability"] == reference["observability"], name
            cases = _whole(out)["cases"] if split else report["cases"]
            assert _by_id(cases) == _by_id(reference["cases"]), name
            if split:  # the same rows, so the same bytes, however the input was cut
                parquet = (out / "cases.parquet").read_bytes()
                assert parquet == (tmp / "whole" / "cases.parquet").read_bytes(), name
                meta = pq.ParquetFile(out / "cases.parquet").metadata
                sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
                last = [400 % row_group] if 400 % row_group else []
                assert sizes == [row_group] * (400 // row_group) + last, name
                assert report["cases_file"] == whole["cases_file"], name


def test_a_directory_or_glob_of_files_is_one_run(
    tmp_path: Path, run_files: tuple[Path, Path]
) -> None:
    probes, responses = run_files
    lines = responses.read_text(encoding="utf-8").splitlines(keepends=True)
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "a.jsonl").write_text("".join(lines[:300]), encoding="utf-8")
    (parts / "b.jsonl.gz").write_bytes(gzip.compress("".join(lines[300:600]).encode()))
    _as_parquet(_write_lines(tmp_path / "c.jsonl", lines[600:]), parts / "c.parquet", 100)
    reference = _run(probes, responses, tmp_path / "one")
    for spec in (parts, f"{parts}/*"):
        report = _run(probes, spec, tmp_path / "many", cases_inline_max=100)
        assert report["aggregate_metrics"] == reference["aggregate_metrics"]
        assert report["run"]["target"]["responses"]["files"] == 3
        assert _by_id(_whole(tmp_path / "many")["cases"]) == _by_id(reference["cases"])


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_a_corrupt_line_in_a_large_input_is_named_and_nothing_is_written(
    tmp_path: Path, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faultline.pipeline, "PARALLEL_MIN_BYTES", 0)
    probes, responses = _write_run(tmp_path, 3000, ["m1"])
    lines = responses.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2716] = lines[2716][:25] + "\n"
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(gzip.compress("".join(lines).encode()))
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("previous", encoding="utf-8")
    with pytest.raises(ResponseError) as info:
        score_files(
            probes, bad, out, workers=workers, cases_inline_max=10, piece_bytes=4096, **FIXED
        )
    assert (info.value.path, info.value.line) == (str(bad), 2717)
    assert [p.name for p in out.iterdir()] == ["report.json"]
    assert (out / "report.json").read_text(encoding="utf-8") == "previous"


def test_a_repeated_answer_in_a_split_run_names_both_lines(tmp_path: Path) -> None:
    probes, _ = _write_run(tmp_path, 10, [None])
    rows = [{"probe_id": f"p{i:03d}", "response": "fine"} for i in range(30)]
    rows.append({"probe_id": "p004", "response": "again"})
    responses = write_jsonl(tmp_path / "r.jsonl", rows)
    with pytest.raises(ResponseError) as info:
        score_files(probes, responses, tmp_path / "out", cases_inline_max=5, piece_bytes=200)
    assert info.value.line == 31
    assert "first at line 5" in str(info.value)
    assert not (tmp_path / "out" / "cases.parquet").exists()


def test_the_page_of_a_split_report_shows_a_stratified_sample_and_renders_again(
    tmp_path: Path, run_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import faultline.report.html as report_html
    from tests.report.test_html import payload_of

    probes, responses = run_files
    monkeypatch.setattr(report_html, "MAX_HTML_CASES", 60)
    out = tmp_path / "split"
    report = _run(probes, responses, out, cases_inline_max=100)
    page = (out / "report.html").read_text(encoding="utf-8")
    shown = payload_of(page)["cases"]
    worst = {w["case_id"] for w in report["aggregate_metrics"]["worst_cases"]}
    ids = {c["id"] for c in shown}
    assert worst <= ids
    assert 60 <= len(shown) <= 70
    # Every (category, outcome) of the run is in the sample.
    cases = _whole(out)["cases"]
    assert {(c["category"], c["status"]) for c in cases} <= {
        (c["category"], c["status"]) for c in cases if c["case_id"] in ids
    }
    assert payload_of(page)["total_cases"] == 900
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "report.html").unlink()
    rerender_report(copy)
    assert (copy / "report.html").read_bytes() == (out / "report.html").read_bytes()
    assert (copy / "report.md").read_bytes() == (out / "report.md").read_bytes()


def test_the_sample_is_seeded(tmp_path: Path, run_files: tuple[Path, Path]) -> None:
    from faultline.report.parquet import read_sample

    probes, responses = run_files
    _run(probes, responses, tmp_path / "out", cases_inline_max=100)
    path = tmp_path / "out" / "cases.parquet"
    a = [c["case_id"] for c in read_sample(path, 50, seed=1)]
    assert a == [c["case_id"] for c in read_sample(path, 50, seed=1)]
    assert a != [c["case_id"] for c in read_sample(path, 50, seed=2)]
    assert len(a) == 50


def test_compare_and_junit_read_a_split_report_like_an_inline_one(
    tmp_path: Path, run_files: tuple[Path, Path]
) -> None:
    from faultline.report.compare import compare_files, read_compare_input
    from faultline.report.junit import report_junit

    probes, responses = run_files
    inline = score_files(probes, responses, tmp_path / "inline", **FIXED)
    split = score_files(probes, responses, tmp_path / "split", cases_inline_max=100, **FIXED)
    assert split.report.cases_file is not None
    assert report_junit(split.report) == report_junit(inline.report)
    read = read_compare_input(tmp_path / "split")
    assert sorted(c.case_id for c in read["cases"]) == sorted(
        c.case_id for c in inline.report.cases
    )
    result = compare_files(tmp_path / "inline", tmp_path / "split")
    assert result["cases"]["paired"] == 900
    assert result["cases"]["regressions"] == result["cases"]["fixes"] == []


def test_the_command_line_scores_a_glob_into_cases_parquet_and_renders_it_again(
    tmp_path: Path, run_files: tuple[Path, Path], run_cli: Any
) -> None:
    probes, responses = run_files
    parts = tmp_path / "logs"
    parts.mkdir()
    lines = responses.read_text(encoding="utf-8").splitlines(keepends=True)
    (parts / "day1.jsonl.gz").write_bytes(gzip.compress("".join(lines[:450]).encode()))
    (parts / "day2.jsonl").write_text("".join(lines[450:]), encoding="utf-8")
    result = run_cli(
        "score", "-p", str(probes), "-r", f"{parts}/day*", "-o", "out", "--cases-inline-max", "500"
    )
    assert result.code == 0, result.stderr
    assert "cases.parquet" in result.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["schema_version"] == "2"
    assert report["cases_file"]["rows"] == 900
    assert report["run"]["target"]["responses"]["files"] == 2
    again = run_cli("report", "out")
    assert again.code == 0, again.stderr
    bad = run_cli("score", "-p", str(probes), "-r", f"{parts}/none*", "-o", "out2")
    assert bad.code == 2
    assert "none*" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_sample_numbers_too_large_to_pack_are_still_checked(tmp_path: Path) -> None:
    probes, _ = _write_run(tmp_path, 10, [None])
    rows = [{"probe_id": "p001", "response": "a", "sample": 1 << 40}]
    rows += [{"probe_id": f"p{i:03d}", "response": "b"} for i in range(20)]
    responses = write_jsonl(tmp_path / "r.jsonl", rows)
    run = score_files(probes, responses, tmp_path / "out", cases_inline_max=5, piece_bytes=100)
    assert run.report.aggregate_metrics["counts"]["cases"] == 21
    rows.append({"probe_id": "p001", "response": "c", "sample": 1 << 40})
    with pytest.raises(ResponseError) as info:
        score_files(
            probes,
            write_jsonl(tmp_path / "r2.jsonl", rows),
            tmp_path / "out2",
            cases_inline_max=5,
            piece_bytes=100,
        )
    assert info.value.line == 22
    assert "first at line 1" in str(info.value)


# --------------------------------------------------------------------------- what users feed it


def _cli(
    cwd: Path,
    *args: str,
    stdin: Any = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> Result:
    """:func:`faultline_cli`, wide enough that its one-line messages stay on one line."""
    wide = {"COLUMNS": "200", **(env or {})}
    return faultline_cli(cwd, *args, env=wide, stdin=stdin, timeout=timeout)


def test_responses_from_a_pipe_or_a_fifo_are_refused_not_lost(tmp_path: Path) -> None:
    probes, responses = _write_run(tmp_path, 40, [None])
    with subprocess.Popen(["cat", str(responses)], stdout=subprocess.PIPE) as cat:
        piped = _cli(  # a pipe: the records would reach one pass only
            tmp_path,
            "score",
            "-p",
            probes.name,
            "-r",
            "/dev/stdin",
            "-o",
            "piped",
            stdin=cat.stdout,
        )
    assert piped.code == 2, piped.stderr
    assert "/dev/stdin: is a pipe or a device, expected a file" in piped.stderr
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)  # nobody writes to it: reading it would wait for ever
    waited = _cli(tmp_path, "score", "-p", probes.name, "-r", fifo.name, "-o", "out")
    assert waited.code == 2, waited.stderr
    assert "fifo.jsonl: is a pipe or a device" in waited.stderr
    assert not (tmp_path / "out").exists()
    with responses.open("rb") as stream:  # a file on standard input is a file
        assert (
            _cli(
                tmp_path, "score", "-p", probes.name, "-r", "/dev/stdin", "-o", "ok", stdin=stream
            ).code
            == 0
        )


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_a_sample_number_past_64_bits_is_bad_input(tmp_path: Path, kind: str) -> None:
    probes, _ = _write_run(tmp_path, 40, [None])
    rows = [{"probe_id": "p001", "response": "a", "sample": 1}]
    rows.append({"probe_id": "p002", "response": "b", "sample": 2**63})
    if kind == "jsonl":
        responses = write_jsonl(tmp_path / "r.jsonl", rows)
    else:
        responses = tmp_path / "r.parquet"
        table = pa.table(
            {
                "probe_id": [r["probe_id"] for r in rows],
                "response": [r["response"] for r in rows],
                "sample": pa.array([r["sample"] for r in rows], pa.uint64()),
            }
        )
        pq.write_table(table, responses)
    with pytest.raises(ResponseError) as info:
        score_files(probes, responses, tmp_path / "out")
    assert (info.value.field, info.value.line) == ("sample", 2)
    assert "expected a whole number from 0 to 9223372036854775807" in str(info.value)
    rows[1]["sample"] = 2**63 - 1
    assert score_files(probes, write_jsonl(tmp_path / "ok.jsonl", rows), None).report


def test_an_inline_run_removes_the_cases_parquet_of_an_earlier_split_run(
    tmp_path: Path, run_files: tuple[Path, Path]
) -> None:
    probes, responses = run_files
    out = tmp_path / "out"
    split = _run(probes, responses, out, cases_inline_max=100)
    assert split["schema_version"] == "2"
    assert "cases.parquet has all of it" in (out / "report.html").read_text(encoding="utf-8")
    inline = _run(probes, responses, out)
    assert inline["schema_version"] == "1"
    assert not (out / "cases.parquet").exists()
    assert "report.json has all of it" in (out / "report.html").read_text(encoding="utf-8")


def test_bad_input_in_a_split_run_leaves_no_directory(tmp_path: Path) -> None:
    probes, _ = _write_run(tmp_path, 10, [None])
    rows = [{"probe_id": f"p{i:03d}", "response": "fine"} for i in range(30)]
    rows.append({"probe_id": "p004", "response": "again"})
    responses = write_jsonl(tmp_path / "r.jsonl", rows)
    with pytest.raises(ResponseError):
        score_files(probes, responses, tmp_path / "new" / "out", cases_inline_max=5)
    assert not (tmp_path / "new").exists()


def test_a_repeated_answer_in_parquet_is_named_by_row(tmp_path: Path) -> None:
    probes, _ = _write_run(tmp_path, 10, [None])
    ids = [f"p{i:03d}" for i in range(30)] + ["p004"]
    responses = tmp_path / "r.parquet"
    pq.write_table(pa.table({"probe_id": ids, "response": ["fine"] * len(ids)}), responses)
    with pytest.raises(ResponseError) as info:
        score_files(probes, responses, tmp_path / "out", cases_inline_max=5)
    assert "(first at row 5)" in str(info.value)


@_dask
def test_a_bad_scheduler_address_is_bad_usage_and_a_cluster_without_workers_exit_3(
    tmp_path: Path,
) -> None:
    probes, responses = _write_run(tmp_path, 40, [None])
    common = ("score", "-p", probes.name, "-r", responses.name, "-o", "out", "--engine", "dask")
    bad = _cli(tmp_path, *common, "--scheduler", "notanaddress")
    assert bad.code == 2, bad.stderr
    assert "Traceback" not in bad.stderr
    assert "--scheduler: got 'notanaddress', expected the address of a Dask scheduler" in bad.stderr
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster:
        empty = _cli(  # the wait for a worker is the scheduler's timeout (default 30 s)
            tmp_path,
            *common,
            "--scheduler",
            cluster.scheduler_address,
            env={"FAULTLINE_SCHEDULER_TIMEOUT": "3"},
        )
    assert empty.code == 3, empty.stderr
    assert "Traceback" not in empty.stderr
    assert f"the Dask cluster at {cluster.scheduler_address} failed" in empty.stderr
    assert not (tmp_path / "out").exists()


@contextlib.contextmanager
def _not_dask(reply: bytes | None) -> Iterator[str]:
    """A TCP service on 127.0.0.1 that is not Dask; its address.

    It accepts every connection and sends ``reply`` at once (then holds the connection), or
    never says a word.
    """
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            held.append(connection)
            if reply is not None:
                with contextlib.suppress(OSError):
                    connection.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        server.close()
        for connection in held:
            connection.close()


@contextlib.contextmanager
def _web_server() -> Iterator[str]:
    """http.server on 127.0.0.1, in a thread; its address as a Dask address."""

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


_HTTP_400 = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@_dask
@pytest.mark.parametrize("service", ["http.server", "http-reply"])
def test_a_scheduler_address_where_something_else_answers_exits_3(
    tmp_path: Path, service: str
) -> None:
    # A web server's reply was read as a Dask frame length of 3.07 EiB: a MemoryError and an
    # internal error with its traceback (exit 4); or the run waited for ever.
    probes, responses = _write_run(tmp_path, 40, [None])
    common = ("score", "-p", probes.name, "-r", responses.name, "-o", "out", "--engine", "dask")
    with _web_server() if service == "http.server" else _not_dask(_HTTP_400) as address:
        result = _cli(
            tmp_path,
            *common,
            "--scheduler",
            address,
            env={"FAULTLINE_SCHEDULER_TIMEOUT": "2"},
            timeout=60,
        )
    assert result.code == 3, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{address} did not answer as a Dask scheduler" in result.stderr
    assert not (tmp_path / "out").exists()


@_dask
def test_a_scheduler_address_that_never_answers_exits_3_after_the_timeout(
    tmp_path: Path,
) -> None:
    # It accepts the connection and says nothing: distributed has no deadline for the answer,
    # so the run waited for ever.
    probes, responses = _write_run(tmp_path, 40, [None])
    common = ("score", "-p", probes.name, "-r", responses.name, "-o", "out", "--engine", "dask")
    with _not_dask(None) as address:
        started = time.monotonic()
        result = _cli(
            tmp_path,
            *common,
            "--scheduler",
            address,
            env={"FAULTLINE_SCHEDULER_TIMEOUT": "2"},
            timeout=120,
        )
        took = time.monotonic() - started
    assert result.code == 3, result.stderr
    assert "Traceback" not in result.stderr
    assert (
        f"{address} did not answer as a Dask scheduler within 2 s "
        "(FAULTLINE_SCHEDULER_TIMEOUT sets the wait)" in result.stderr
    )
    assert took >= 2  # the message is the deadline's: it came, and the run did not hang
    assert not (tmp_path / "out").exists()
    bad = _cli(tmp_path, *common, "--scheduler", address, env={"FAULTLINE_SCHEDULER_TIMEOUT": "0"})
    assert bad.code == 2, bad.stderr
    assert "FAULTLINE_SCHEDULER_TIMEOUT='0' is not a number of seconds" in bad.stderr


_NO_FAULTLINE = """
import sys

class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "faultline":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

for name in [n for n in sys.modules if n.split(".")[0] == "faultline"]:
    del sys.modules[name]
sys.meta_path.insert(0, _Refuse())
"""

_OTHER_VERSION = """
import faultline._version

faultline._version.__version__ = "0.0.0+other"
"""


@_dask
@pytest.mark.parametrize(
    ("setup", "words"),
    [
        (_NO_FAULTLINE, "ModuleNotFoundError: No module named 'faultline'"),
        (_OTHER_VERSION, "it has faultline 0.0.0+other"),
    ],
    ids=["missing", "other-version"],
)
def test_workers_without_this_faultline_exit_3_naming_the_problem(
    tmp_path: Path, setup: str, words: str
) -> None:
    # A worker without faultline failed the scatter with Exception('ModuleNotFoundError(...)'):
    # an internal error with its traceback (exit 4).
    from distributed import LocalCluster

    probes, responses = _write_run(tmp_path, 40, [None])
    common = ("score", "-p", probes.name, "-r", responses.name, "-o", "out", "--engine", "dask")
    preload = tmp_path / "worker_setup.py"  # runs in each worker process as it starts
    preload.write_text(setup, encoding="utf-8")
    with LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        preload=[str(preload)],
        silence_logs=logging.CRITICAL,
    ) as cluster:
        result = _cli(tmp_path, *common, "--scheduler", cluster.scheduler_address, timeout=120)
    assert result.code == 3, result.stderr
    assert "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())
    assert f"the Dask workers cannot import faultline {faultline.__version__}" in said
    assert words in said
    assert "install the same faultline version on every worker" in said
    assert not (tmp_path / "out").exists()


@pytest.fixture
def long_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run of 100,000 answers: about 20 s of scoring for two Dask workers."""
    return _write_run(tmp_path, 100_000, [None])


@_dask
def test_a_scheduler_lost_mid_run_exits_3_without_a_traceback(
    tmp_path: Path, long_run: tuple[Path, Path]
) -> None:
    # distributed's client logged the lost connection with tracebacks before faultline's
    # one-line message.
    from distributed import Client

    probes, responses = long_run
    cluster, address = _start_cluster(tmp_path, workers=1)
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "faultline", "score", "-p", probes.name, "-r",
             responses.name, "-o", "out", "--engine", "dask", "--scheduler", address],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        with Client(address, timeout=30, set_as_default=False) as client:
            deadline = time.monotonic() + 60
            # By value (a lambda): the scheduler cannot import the tests.
            seen = lambda dask_scheduler: dask_scheduler.transition_counter  # noqa: E731
            while not client.run_on_scheduler(seen):  # the run's tasks have started
                assert time.monotonic() < deadline, "the run never reached the cluster"
                time.sleep(0.1)
        os.killpg(cluster[0].pid, signal.SIGKILL)  # the scheduler dies
        out, err = run.communicate(timeout=120)
    finally:
        _stop(cluster)
    assert run.returncode == 3, out + err
    assert "Traceback" not in err
    assert err.startswith(f"faultline: error: the Dask cluster at {address} failed"), err
    assert not (tmp_path / "out").exists()


@_dask
def test_ctrl_c_stops_a_local_dask_cluster_without_a_traceback(
    tmp_path: Path, long_run: tuple[Path, Path]
) -> None:
    # The LocalCluster's worker processes got the terminal's SIGINT too, and printed
    # KeyboardInterrupt and BrokenPipeError tracebacks before 'faultline: interrupted'.
    probes, responses = long_run
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultline", "score", "-p", probes.name, "-r", responses.name,
         "-o", "out", "--engine", "dask", "--workers", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(_group(proc.pid)) < 3:  # faultline and its two workers
        assert time.monotonic() < deadline, "the workers never started"
        time.sleep(0.1)
    time.sleep(3)  # the workers are scoring
    for _ in range(10):  # a Ctrl-C while the cluster starts is lost: press it again
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole group gets SIGINT
        try:
            out, err = proc.communicate(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue
    else:
        proc.kill()
        raise AssertionError("Ctrl-C did not stop the run")
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err, err
    assert err.strip() == "faultline: interrupted", err
    assert not (tmp_path / "out").exists()
    deadline = time.monotonic() + 15
    while _group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _group(proc.pid), "a worker outlived the run"


def _group(pgid: int) -> list[str]:
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True, check=False)
    return found.stdout.split()


def test_the_documented_way_of_reading_cases_parquet_runs_as_written(
    tmp_path: Path, run_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    probes, responses = run_files
    report = _run(probes, responses, tmp_path / "out", cases_inline_max=100)
    text = (ROOT / "docs" / "report-format.md").read_text(encoding="utf-8")
    (snippet,) = [
        b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "cases.parquet" in b
    ]
    monkeypatch.chdir(tmp_path)  # the snippet reads out/cases.parquet
    scope: dict[str, Any] = {}
    exec(compile(snippet, "docs/report-format.md", "exec"), scope, scope)
    failed = scope["failed"]
    assert failed.column_names == ["case_id", "status", "risk_score"]
    assert failed.num_rows == report["aggregate_metrics"]["counts"]["failed"] > 0
    assert set(failed.column("status").to_pylist()) == {"fail"}
