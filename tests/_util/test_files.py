"""File helpers: atomic writes, reading UTF-8 input files, hashing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from faultline._util.files import (
    atomic_write_bytes,
    atomic_writer,
    distinct_names,
    read_text_file,
    sha256_bytes,
    staged_files,
)
from faultline.errors import InputError, ProbeError, ResponseError, RulePackError


class _BoomError(Exception):
    pass


def _write_then_fail(path: Path, data: bytes) -> None:
    with atomic_writer(path) as handle:
        handle.write(data)
        raise _BoomError


def _leftovers(directory: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name not in keep)


# --------------------------------------------------------------------------- sha256_bytes


@pytest.mark.parametrize(
    ("data", "digest"),
    [
        (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    ],
)
def test_sha256_bytes_is_the_hex_sha256(data: bytes, digest: str) -> None:
    assert sha256_bytes(data) == digest


# --------------------------------------------------------------------------- atomic writes


def test_atomic_write_bytes_creates_the_file(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    atomic_write_bytes(path, b'{"a": 1}')
    assert path.read_bytes() == b'{"a": 1}'
    assert _leftovers(tmp_path, {"report.json"}) == []


def test_atomic_write_bytes_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b"old and longer than the new content")
    atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"new"
    assert _leftovers(tmp_path, {"report.json"}) == []


def test_atomic_writer_failure_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b"old")
    with pytest.raises(_BoomError):
        _write_then_fail(path, b"half of the new")
    assert path.read_bytes() == b"old"
    assert _leftovers(tmp_path, {"report.json"}) == []


def test_atomic_writer_failure_creates_no_file(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    with pytest.raises(_BoomError):
        _write_then_fail(path, b"partial")
    assert list(tmp_path.iterdir()) == []


def test_atomic_writer_keeps_the_file_unchanged_until_it_closes(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b"old")
    with atomic_writer(path) as handle:
        handle.write(b"new")
        assert path.read_bytes() == b"old"
    assert path.read_bytes() == b"new"


def test_atomic_write_into_a_missing_directory_fails(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_write_bytes(tmp_path / "absent" / "report.json", b"x")


def _stage(paths: list[Path], contents: list[bytes], *, fail: bool = False) -> None:
    with staged_files(paths) as temps:
        for tmp, data in zip(temps, contents, strict=False):
            atomic_write_bytes(tmp, data)
        assert all(p.read_bytes() == b"old" for p in paths if p.is_file())  # none replaced yet
        if fail:
            raise _BoomError


def test_staged_files_replace_every_file_once_all_are_written(tmp_path: Path) -> None:
    paths = [tmp_path / "report.json", tmp_path / "report.md"]
    for p in paths:
        p.write_text("old")
    _stage(paths, [b"new json", b"new md"])
    assert [p.read_text() for p in paths] == ["new json", "new md"]
    assert _leftovers(tmp_path, {"report.json", "report.md"}) == []


def test_staged_files_that_fail_halfway_leave_every_file_as_it_was(tmp_path: Path) -> None:
    paths = [tmp_path / "report.json", tmp_path / "report.md"]
    for p in paths:
        p.write_text("old")
    with pytest.raises(_BoomError):
        _stage(paths, [b"new json"], fail=True)  # rendering report.md failed
    assert [p.read_text() for p in paths] == ["old", "old"]
    assert _leftovers(tmp_path, {"report.json", "report.md"}) == []


def test_staged_files_with_a_directory_in_the_way_replace_nothing(tmp_path: Path) -> None:
    # The rename onto the directory would fail after the first file had been replaced.
    paths = [tmp_path / "report.json", tmp_path / "report.html"]
    paths[0].write_text("old")
    paths[1].mkdir()
    with pytest.raises(IsADirectoryError) as caught:
        _stage(paths, [b"new", b"new"])
    assert caught.value.filename == str(paths[1])
    assert paths[0].read_text() == "old"
    assert _leftovers(tmp_path, {"report.json", "report.html"}) == []


# --------------------------------------------------------------------------- read_text_file


def test_read_text_file_returns_the_text(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes("a: café\r\nb: 日本\n".encode())
    assert read_text_file(path, ProbeError) == "a: café\r\nb: 日本\n"


def test_read_text_file_drops_a_leading_bom(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert read_text_file(path, ProbeError) == "a: 1\n"


def test_read_text_file_keeps_a_bom_that_is_not_leading(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(b"a: 1\n\xef\xbb\xbfb: 2\n")
    assert read_text_file(path, ProbeError) == "a: 1\n\ufeffb: 2\n"


@pytest.mark.parametrize("error", [ProbeError, ResponseError, RulePackError])
def test_missing_file_raises_the_given_error(tmp_path: Path, error: type[InputError]) -> None:
    with pytest.raises(error) as info:
        read_text_file(tmp_path / "absent.yaml", error)
    assert info.value.path == str(tmp_path / "absent.yaml")
    assert "no such file" in str(info.value)


def test_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="is a directory"):
        read_text_file(tmp_path, ProbeError)


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"\xff\xfe", 1),
        (b"ok\nok\nbad \xe9 byte\n", 3),
        (b"ok\n\n\xc3", 3),
        (b"\xef\xbb\xbfok\n\x80\n", 2),
    ],
    ids=["utf16-bom", "latin1", "truncated", "after-bom"],
)
def test_non_utf8_names_the_line_of_the_bad_byte(tmp_path: Path, data: bytes, line: int) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(data)
    with pytest.raises(ProbeError) as info:
        read_text_file(path, ProbeError)
    assert (info.value.path, info.value.line) == (str(path), line)
    assert "not UTF-8" in str(info.value)


def test_atomic_write_bytes_gives_the_usual_mode_not_a_private_one(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "r.json", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("paths", "names"),
    [
        (["data/a.jsonl", "b.jsonl"], ["a.jsonl", "b.jsonl"]),
        (["dA/t.jsonl", "dB/t.jsonl"], ["dA/t.jsonl", "dB/t.jsonl"]),
        (["/x/d/t.jsonl", "/y/d/t.jsonl", "a.jsonl"], ["x/d/t.jsonl", "y/d/t.jsonl", "a.jsonl"]),
        (["t.jsonl", "sub/t.jsonl"], ["t.jsonl", "sub/t.jsonl"]),
        (["d/t.jsonl", "../e/d/t.jsonl"], ["d/t.jsonl", "e/d/t.jsonl"]),
    ],
    ids=["names-differ", "same-name", "same-name-and-folder", "one-ends-the-other", "relative"],
)
def test_distinct_names_keep_the_folders_that_tell_paths_apart(
    paths: list[str], names: list[str]
) -> None:
    assert distinct_names(paths) == names
