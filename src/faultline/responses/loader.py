"""Read responses files (JSONL) fast and in bounded memory, with exact error locations.

Records are decoded with msgspec straight into :class:`Response` structs, a chunk of the file
at a time. When a chunk fails to decode, it is decoded again line by line to name the exact
line and field, so the fast path costs nothing in the quality of errors.

:func:`load_responses` and :func:`iter_response_batches` take any responses spec (a file of
JSONL, JSONL.gz or Parquet, a directory, a glob pattern): they read through
:mod:`faultline.responses.sources`, which builds on the JSONL functions here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from faultline._util.files import (
    TOO_DEEP,
    malformed_line,
    open_for_reading,
    reject_repeated_key,
)
from faultline._util.text import describe_value, did_you_mean
from faultline.errors import InputError, ResponseError
from faultline.responses.model import FIELDS, Response

__all__ = [
    "CHUNK_BYTES",
    "ResponseBatch",
    "cut_lines",
    "decode_chunk",
    "iter_chunks",
    "iter_response_batches",
    "load_responses",
]

CHUNK_BYTES = 4 << 20
"""How many bytes of JSONL a chunk holds, roughly."""
_BOM = b"\xef\xbb\xbf"
_DECODER = msgspec.json.Decoder(Response)
# The fields whose repetition would change a verdict, checked on every piece (docs/scale.md).
_QUOTED = (b'"probe_id"', b'"response"', b'"error"')
MAX_SAMPLE = 2**63 - 1
"""The largest sample number: cases are ordered by it as a 64-bit integer."""
MAX_TOKENS = 2**63 - 1
"""The largest token count in ``usage``: cases.parquet stores them as 64-bit integers."""
USAGE_FIELDS = ("input_tokens", "output_tokens")
_BLANK_LINE = re.compile(rb"\n[ \t\r]*\n")  # starts with a literal: re scans for it at memchr speed
_SPACE_STARTS = (b"\n", b"\r", b" ", b"\t")
_LINE_NOT_AN_OBJECT = re.compile(rb"\n[ \t\r]*[^{\s]")  # a line that starts with no "{"
_PATH_FIELD = re.compile(r"at `\$(?:\[\d+\])?\.([A-Za-z_]+)")
_INNER_FIELD = re.compile(r"at `\$(?:\[\d+\])?\.[A-Za-z_]+\.([A-Za-z_]+)`")


class _Written(str):
    """A fractional or exponent number as the line writes it (so ``1e400`` is not an error)."""

    __slots__ = ()


_AS_WRITTEN = msgspec.json.Decoder(float_hook=_Written)
"""Decodes any line that is JSON, whatever its numbers' range: to explain a bad record."""


@dataclass(frozen=True, slots=True)
class ResponseBatch:
    """Consecutive records of one responses file.

    Attributes:
        path: The file they come from.
        lines: The 1-based line of each record.
        responses: The records, in file order.
    """

    path: Path
    lines: list[int]
    responses: list[Response]


def load_responses(path: str | Path) -> list[Response]:
    """Read every response of a file, a directory or a glob pattern.

    Args:
        path: A responses file (JSONL, JSONL.gz or Parquet), a directory of them, or a glob
            pattern (see :func:`~faultline.responses.sources.resolve_sources`).

    Returns:
        Every record, files in sorted order, each front to back; blank lines are skipped.

    Raises:
        ResponseError: Nothing can be read there, or a record is not valid; the message names
            the file, the line (the row, for Parquet) and the field.
    """
    return [r for batch in iter_response_batches(path) for r in batch.responses]


def iter_response_batches(
    path: str | Path, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[ResponseBatch]:
    """Read responses a chunk at a time, keeping memory flat in the input's size.

    Args:
        path: As :func:`load_responses`.
        chunk_bytes: Roughly how many (decompressed) bytes of JSONL each batch covers; whole
            lines are kept together. A Parquet batch holds at most 20,000 rows.

    Yields:
        Batches of validated records with their line (or row) numbers, one file at a time.

    Raises:
        ResponseError: As :func:`load_responses`.
    """
    # sources builds on this module's JSONL primitives, so it is imported here.
    from faultline.responses.sources import decode_piece, iter_pieces, resolve_sources

    for piece in iter_pieces(resolve_sources(path), chunk_bytes):
        yield decode_piece(piece)


def iter_chunks(
    path: Path,
    chunk_bytes: int = CHUNK_BYTES,
    digest: Any = None,
    error: type[InputError] = ResponseError,
) -> Iterator[tuple[int, bytes]]:
    """Split a JSONL file into chunks of whole lines, without decoding them.

    Args:
        path: The file.
        chunk_bytes: Roughly how many bytes each chunk holds.
        digest: A ``hashlib`` object to update with every byte read, if any.
        error: The :class:`InputError` subclass to raise, so the message says what the file
            was meant to be.

    Yields:
        ``(first_line, chunk)``: the 1-based line number of the chunk's first line, and its
        bytes (a UTF-8 byte-order mark at the start of the file is dropped).

    Raises:
        InputError: The file cannot be opened (``error``, a :class:`ResponseError` by default).
    """
    with open_for_reading(path, error, "a JSONL file") as handle:
        blocks = _read_blocks(handle, chunk_bytes, digest)
        for first_line, chunk, _ in cut_lines(blocks, chunk_bytes):
            if chunk:
                yield first_line, chunk


def cut_lines(
    blocks: Iterable[tuple[bytes, int]], chunk_bytes: int = CHUNK_BYTES
) -> Iterator[tuple[int, bytes, int]]:
    """Regroup a stream of bytes into chunks of whole lines, counting lines as they pass.

    Args:
        blocks: ``(data, nbytes)`` pairs: the next bytes of the text, and how many input
            bytes they stand for (they differ for compressed input).
        chunk_bytes: The size a chunk grows to before it is cut at its last newline.

    Yields:
        ``(first_line, chunk, nbytes)``: the 1-based line of the chunk's first line, its
        bytes (a UTF-8 byte-order mark at the start is dropped) and the input bytes read since
        the previous chunk. Chunks of blank lines are not yielded (their bytes count toward
        the next chunk); input bytes left after the last chunk come as a final
        ``(line, b"", nbytes)``.
    """
    first_line, owed, size, head = 1, 0, 0, True
    parts: list[bytes] = []
    for block, nbytes in blocks:
        owed += nbytes
        if not block:
            continue
        parts.append(block)
        size += len(block)
        end = block.rfind(b"\n")
        if size < chunk_bytes or end < 0:
            continue
        data = b"".join(parts)
        cut = size - len(block) + end + 1
        chunk, rest = data[:cut], data[cut:]
        if head:
            chunk, head = chunk.removeprefix(_BOM), False
        if chunk.strip():
            yield first_line, chunk, owed
            owed = 0
        first_line += chunk.count(b"\n")
        parts, size = [rest], len(rest)
    data = b"".join(parts)
    if head:
        data = data.removeprefix(_BOM)
    if data.strip():
        yield first_line, data, owed
    elif owed:
        yield first_line, b"", owed


def _read_blocks(handle: BinaryIO, size: int, digest: Any) -> Iterator[tuple[bytes, int]]:
    while block := handle.read(max(size, 1)):
        if digest is not None:
            digest.update(block)
        yield block, len(block)


def decode_chunk(path: Path, chunk: bytes, first_line: int) -> ResponseBatch:
    """Decode and validate a chunk of whole JSONL lines.

    Args:
        path: The file the chunk comes from, for messages.
        chunk: The bytes of whole lines.
        first_line: The 1-based line number of the chunk's first line.

    Raises:
        ResponseError: A line is not a valid record; the message names its line and field.
    """
    try:
        records = _DECODER.decode_lines(chunk)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        records = None
    if records is not None:
        simple = chunk[:1] not in _SPACE_STARTS and _BLANK_LINE.search(chunk) is None
        if simple:
            n_lines = chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
            lines = list(range(first_line, first_line + n_lines))
        else:
            lines = [first_line + i for i, raw in enumerate(chunk.split(b"\n")) if raw.strip()]
        # msgspec reads an object spread over two lines as well as two objects on one line;
        # the counts would then agree with the wrong line numbers. So the fast path also
        # needs every line to start with "{" and end with "}".
        if (
            len(records) == len(lines)
            and _one_object_per_line(chunk, simple)
            and not _maybe_repeated(chunk, len(lines))
        ):
            for record, line in zip(records, lines, strict=True):
                _check_record(record, path, line)
            return ResponseBatch(path, lines, records)
    # Slow path, only on bad input: find and name the first bad line.
    lines, records = [], []
    for i, raw in enumerate(chunk.split(b"\n")):
        if raw.strip():
            line = first_line + i
            records.append(_decode_line(raw, path, line))
            lines.append(line)
    return ResponseBatch(path, lines, records)


def _one_object_per_line(chunk: bytes, simple: bool) -> bool:
    """Whether every non-blank line of ``chunk`` starts with "{" and ends with "}"."""
    if not simple:
        stripped = (raw.strip() for raw in chunk.split(b"\n"))
        return all(raw[:1] == b"{" and raw[-1:] == b"}" for raw in stripped if raw)
    if chunk[:1] != b"{" or _LINE_NOT_AN_OBJECT.search(chunk) is not None:
        return False
    closed = chunk.count(b"}\n") + chunk.count(b"}\r\n")
    return closed == chunk.count(b"\n") and (chunk.endswith(b"\n") or chunk.rstrip().endswith(b"}"))


def _maybe_repeated(chunk: bytes, lines: int) -> bool:
    """Whether some line of the chunk may give ``probe_id``, ``response`` or ``error`` twice.

    A quoted name seen more often than there are lines means a line gives it twice (or a
    value is the name itself); each line is then read on its own and all of its fields are
    checked. One scan of the chunk a name, about 0.5 µs a line each, so only the three that
    decide a verdict are counted; and a line that repeats a field the other lines of its
    chunk leave out (``error``, say) is found only when the chunk is read line by line.
    """
    return any(chunk.count(name) > lines for name in _QUOTED)


def _decode_line(raw: bytes, path: Path, line: int) -> Response:
    try:
        record = _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        raise _explain_invalid(raw, str(exc), path, line) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise malformed_line(raw, exc, ResponseError, path, line) from None
    except RecursionError:
        raise ResponseError(TOO_DEEP, path=path, line=line) from None
    reject_repeated_key(raw, FIELDS, ResponseError, path, line)
    _check_record(record, path, line)
    return record


def _explain_invalid(raw: bytes, message: str, path: Path, line: int) -> ResponseError:
    try:
        obj: Any = _AS_WRITTEN.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        obj = None
    except RecursionError:
        return ResponseError(TOO_DEEP, path=path, line=line)
    if not isinstance(obj, dict):
        return ResponseError(
            f"got {describe_value(obj)}, expected a JSON object with probe_id and response",
            path=path,
            line=line,
        )
    if "probe_id" not in obj:
        hint = next(
            (did_you_mean(k, ["probe_id"]) for k in obj if did_you_mean(k, ["probe_id"])), ""
        )
        return ResponseError(
            f"is required but missing{hint}", path=path, line=line, field="probe_id"
        )
    match = _PATH_FIELD.search(message)
    field = match.group(1) if match else None
    inner = _INNER_FIELD.search(message)
    expected = {
        "probe_id": "a string",
        "response": "a string",
        "sample": f"a whole number from 0 to {MAX_SAMPLE}",
        "model": "a string or null",
        "error": "a string or an object",
        "finish_reason": "a string or null",
        "usage": "an object {input_tokens, output_tokens} of whole numbers, or null",
        "reasoning": "a string or null",
    }
    if field in expected:
        value = obj.get(field)
        got = _described(value)
        if inner and isinstance(value, dict) and inner.group(1) in value:
            got += f" whose {inner.group(1)} is {_described(value[inner.group(1)])}"
        elif message.startswith("Number out of range") and not isinstance(value, _Written):
            got += f" holding a number out of range ({_out_of_range(value)})"
        return ResponseError(
            f"got {got}, expected {expected[field]}",
            path=path,
            line=line,
            field=field,
        )
    return ResponseError(message, path=path, line=line, field=field)


def _described(value: object) -> str:
    """``describe_value``, with a number written as a fraction or exponent shown as written."""
    return f"a number ({value})" if isinstance(value, _Written) else describe_value(value)


def _out_of_range(value: object) -> str | None:
    """The first number in ``value`` that no float can hold (``1e400``), as written."""
    if isinstance(value, _Written):
        return value if math.isinf(float(value)) else None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((found for item in items if (found := _out_of_range(item))), None)


def _check_record(record: Response, path: Path, line: int) -> None:
    if not record.probe_id.strip():
        raise ResponseError(
            "is empty, expected the id of a probe", path=path, line=line, field="probe_id"
        )
    if not 0 <= record.sample <= MAX_SAMPLE:
        raise ResponseError(
            f"got {record.sample}, expected a whole number from 0 to {MAX_SAMPLE}",
            path=path,
            line=line,
            field="sample",
        )
    if record.response is None and record.error is None:
        raise ResponseError(
            "is required unless 'error' is set (the target failed for this case)",
            path=path,
            line=line,
            field="response",
        )
    if record.usage is not None:
        for key in USAGE_FIELDS:
            count = getattr(record.usage, key)
            if count is not None and not 0 <= count <= MAX_TOKENS:
                raise ResponseError(
                    f"got {key} {count}, expected a whole number from 0 to {MAX_TOKENS}",
                    path=path,
                    line=line,
                    field="usage",
                )
