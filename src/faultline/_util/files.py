"""File helpers: atomic writes (nothing already written is damaged) and stable hashing."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from faultline._util.text import describe_value
from faultline.errors import InputError

__all__ = [
    "TOO_DEEP",
    "atomic_write_bytes",
    "atomic_writer",
    "check_writable_dir",
    "distinct_names",
    "json_error_line",
    "json_error_offset",
    "jsonl_objects",
    "missing_dirs",
    "open_for_reading",
    "read_text_and_bytes",
    "read_text_file",
    "reject_repeated_key",
    "repeated_key",
    "sha256_bytes",
    "sha256_file",
]


TOO_DEEP = "JSON nested too deeply to read (arrays or objects hundreds of levels deep)"
"""The reason given when msgspec cannot decode a JSON text for its depth (a RecursionError)."""


def distinct_names(paths: Sequence[str | Path]) -> list[str]:
    """Each path's name, with as many of its folders as tell it from the other paths.

    ``["data/a.jsonl", "x/t.jsonl", "y/t.jsonl"]`` gives ``["a.jsonl", "x/t.jsonl",
    "y/t.jsonl"]``: short names for a table or a model's record, never two the same for
    different paths (a path that is the end of another keeps all of itself).
    """
    parts = [Path(p).parts for p in paths]
    names = []
    for i, mine in enumerate(parts):
        others = [theirs for j, theirs in enumerate(parts) if j != i]
        keep = 1
        while keep < len(mine) and any(theirs[-keep:] == mine[-keep:] for theirs in others):
            keep += 1
        names.append(Path(*mine[-keep:]).as_posix() if mine else str(paths[i]))
    return names


def sha256_bytes(data: bytes) -> str:
    """Return the hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, block: int = 1 << 20) -> str:
    """Return the hex SHA-256 of a file, read a block at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename.

    A reader sees the old file or the complete new one, never half of it; if writing fails
    or is interrupted, ``path`` is untouched and the temporary file is removed.

    Args:
        path: The destination; its directory must exist.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file private (0600); a report gets the usual mode, as open() gives.
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def staged_files(paths: Sequence[Path]) -> Iterator[list[Path]]:
    """Temporary files beside ``paths``; once all are written, each replaces its path.

    For files that belong together (report.json and its views): if writing any of them fails
    or is interrupted, none of ``paths`` is touched and the temporary files are removed. The
    replacing is renames only.

    Args:
        paths: The destinations; their directories must exist.
    """
    temps: list[Path] = []
    try:
        for path in paths:
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            temps.append(Path(name))
        yield temps
        for path in paths:  # what would stop a rename halfway through the group
            if path.is_dir():
                raise IsADirectoryError(errno.EISDIR, "a directory is in the way", str(path))
        for staged, path in zip(temps, paths, strict=True):
            os.replace(staged, path)
    except BaseException:
        for staged in temps:
            with contextlib.suppress(OSError):
                staged.unlink()
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path) as handle:
        handle.write(data)


def check_writable_dir(path: Path) -> str | None:
    """Why ``path`` cannot become a directory faultline writes into, or ``None`` if it can.

    Nothing is left behind: a command checks where its results go before its work, and a bad
    path leaves no empty directory. The deepest directory that exists is tried by writing and
    removing a temporary file in it, since a permission check alone says yes to root and
    knows nothing of read-only file systems (``/proc``).
    """
    missing = missing_dirs(path)
    broken = next((p for p in missing if p.is_symlink()), None)  # a link to nowhere
    if broken is not None:
        return f"{broken} is a broken link"
    probe = missing[-1].parent if missing else path
    if not probe.is_dir():
        part = "is a file" if probe == path else f"is inside {probe}, which is a file"
        return f"{path} {part}, not a directory"
    try:
        fd, tmp = tempfile.mkstemp(prefix=".faultline-", suffix=".tmp", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return f"{probe} is not writable ({exc.strerror or exc})"
    return None


def missing_dirs(path: Path) -> list[Path]:
    """The directories that ``path.mkdir(parents=True)`` would create, deepest first."""
    missing = []
    while not path.exists() and path.parent != path:
        missing.append(path)
        path = path.parent
    return missing


def open_for_reading(path: Path, error: type[InputError], expected: str = "a file") -> BinaryIO:
    """Open ``path`` for reading bytes, or raise ``error`` saying why it cannot be.

    Args:
        path: The file to open.
        error: The :class:`InputError` subclass to raise.
        expected: What the file should be, for the message ("a JSONL file").

    Raises:
        InputError: The file is missing, is a directory or cannot be read.
    """
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise error("no such file", path=path) from None
    except IsADirectoryError:
        raise error(f"is a directory, expected {expected}", path=path) from None
    except OSError as exc:
        raise error(f"cannot be read ({exc.strerror or exc})", path=path) from exc


def read_text_file(path: Path, error: type[InputError]) -> str:
    """Read ``path`` as UTF-8 text, dropping a byte-order mark.

    Args:
        path: The file to read.
        error: The :class:`InputError` subclass to raise, so the message says what the file
            was meant to be (a probe set, a rule pack ...).

    Raises:
        InputError: The file is missing, is a directory, cannot be read or is not UTF-8.
    """
    return read_text_and_bytes(path, error)[0]


def read_text_and_bytes(path: Path, error: type[InputError]) -> tuple[str, bytes]:
    """:func:`read_text_file`, and the bytes read (to hash the file as it is on disk)."""
    with open_for_reading(path, error) as handle:
        try:
            data = handle.read()
        except OSError as exc:
            raise error(f"cannot be read ({exc.strerror or exc})", path=path) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        reason = f"not UTF-8 text (byte {exc.start}){binary_hint(data)}"
        raise error(reason, path=path, line=line) from None
    return text.removeprefix("\ufeff"), data


# The first bytes of the binary formats a text file is most often confused with.
_MAGIC = (
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
    (b"BZh", "a bzip2-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"PK\x03\x04", "a zip archive"),
    (b"PAR1", "a Parquet file"),
)


def binary_hint(start: bytes) -> str:
    """``": it starts like a gzip-compressed file ..."`` when ``start`` has a known magic.

    A compressed or Parquet file under a text file's name fails as "not UTF-8 text (byte 1)";
    this says what it looks like, so the fix (decompress it, or name it for its format) is
    plain.
    """
    for magic, what in _MAGIC:
        if start.startswith(magic):
            return (
                f": it starts like {what}; decompress it, or give it the name of its format "
                "where faultline reads that format (.jsonl.gz or .parquet for responses)"
            )
    return ""


_AT_BYTE = re.compile(r"\(byte (\d+)\)")


def json_error_offset(exc: Exception) -> int | None:
    """The byte offset msgspec's error names (``invalid character (byte 1234)``), if any."""
    found = _AT_BYTE.search(str(exc))
    return None if found is None else int(found.group(1))


def json_error_line(exc: Exception, data: bytes) -> int | None:
    """The 1-based line of ``data`` where msgspec found it malformed, if its error says.

    msgspec gives a byte offset (``invalid character (byte 1234)``); a person editing the
    file needs the line. ``data`` may stop at that offset.
    """
    offset = json_error_offset(exc)
    return None if offset is None else data.count(b"\n", 0, offset) + 1


def malformed_line(
    raw: bytes, exc: Exception, error: type[InputError], path: Path, line: int
) -> InputError:
    """The error for a JSONL line that is not UTF-8 or not JSON at all.

    Args:
        raw: The line's bytes.
        exc: What the JSON decoder raised.
        error: The :class:`InputError` subclass to return.
        path: The file.
        line: The 1-based line number.
    """
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as uexc:
        hint = binary_hint(raw) if line == 1 else ""
        return error(
            f"not UTF-8 text (byte {uexc.start + 1} of the line){hint}", path=path, line=line
        )
    reason = str(exc).removeprefix("JSON is malformed: ")
    return error(f"not valid JSON: {reason}", path=path, line=line)


_FLOATS_AS_WRITTEN = msgspec.json.Decoder(float_hook=str)


def repeated_key(raw: bytes | str, names: Iterable[str]) -> str | None:
    """The first of ``names`` that the JSON object ``raw`` gives twice at its top level.

    Decoders keep the last value of a repeated key without a word, so
    ``{"id": "a", "id": "b"}`` would read as ``b``. Inside a JSON string a quote is escaped,
    so a name seen quoted twice is nearly always a key given twice; only then is the text
    parsed again, keeping every pair, to be sure (a value or a nested key can carry the same
    name). ``raw`` must be valid JSON: a decoder has just read it.

    Raises:
        RecursionError: The text is nested too deeply for the standard library's parser.
    """
    if isinstance(raw, bytes):
        twice = any(raw.count(f'"{name}"'.encode()) > 1 for name in names)
    else:
        twice = any(raw.count(f'"{name}"') > 1 for name in names)
    if not twice:
        return None
    objects: list[list[tuple[str, Any]]] = []

    def keep(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        objects.append(pairs)
        return dict(pairs)

    json.loads(raw, object_pairs_hook=keep)
    seen: set[str] = set()
    for key, _ in objects[-1] if objects else ():  # the object itself is the last one closed
        if key in seen:
            return key
        seen.add(key)
    return None


def reject_repeated_key(
    raw: bytes | str, names: Iterable[str], error: type[InputError], path: Path, line: int
) -> None:
    """Raise ``error`` naming the field if the JSON object ``raw`` gives one of ``names`` twice.

    Raises:
        InputError: (of class ``error``) A field is given twice, or the text is nested too
            deeply to check.
    """
    try:
        key = repeated_key(raw, names)
    except RecursionError:
        raise error(TOO_DEEP, path=path, line=line) from None
    if key is not None:  # a decoder keeps the last value without a word
        raise error(
            "is given more than once, expected each field once", path=path, line=line, field=key
        )


def jsonl_objects(
    text: str, path: Path, error: type[InputError], *, floats_as_written: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSONL text as ``(line number, object)``.

    Lines are split on newlines only: JSON strings may hold U+2028, which ``splitlines`` would
    break on. With ``floats_as_written``, a number with a fraction or an exponent is its text
    (``1.10`` stays ``"1.10"``, where a float would read ``1.1``).

    Raises:
        InputError: (of class ``error``) A line is not JSON, or not a JSON object; the
            message names the file and line.
    """
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = _FLOATS_AS_WRITTEN.decode(raw) if floats_as_written else msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise error(f"not valid JSON: {exc}", path=path, line=number) from None
        except RecursionError:
            raise error(TOO_DEEP, path=path, line=number) from None
        if not isinstance(obj, dict):
            raise error(
                f"expected a JSON object, got {describe_value(obj)}", path=path, line=number
            )
        reject_repeated_key(raw, obj, error, path, number)
        yield number, obj
