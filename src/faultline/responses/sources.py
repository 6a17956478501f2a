"""Where responses come from: JSONL, JSONL.gz and Parquet files, a directory or a glob.

A spec resolves to a sorted list of files (:func:`resolve_sources`), which
:func:`iter_pieces` cuts into :class:`Piece` objects: whole JSONL lines, or a Parquet record
batch. Pieces are small, picklable and in input order, so a pool of worker processes can
decode them (:func:`decode_piece`) while the parent reads on. Every error names the file, the
line (the row, for Parquet) and the field, as :func:`~faultline.responses.loader.decode_chunk`
does for JSONL.

To read another format, give it a suffix in :data:`ACCEPTED_SUFFIXES`, a branch in
:func:`iter_pieces` that yields pieces, and one in :func:`decode_piece` that decodes them.
"""

from __future__ import annotations

import glob
import os
import stat
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, NamedTuple, NoReturn

import msgspec

from faultline._util.files import open_for_reading
from faultline.errors import ResponseError, UsageError
from faultline.responses.loader import (
    CHUNK_BYTES,
    ResponseBatch,
    cut_lines,
    decode_chunk,
)

if TYPE_CHECKING:
    import pyarrow

__all__ = [
    "ACCEPTED_SUFFIXES",
    "Piece",
    "Sources",
    "decode_piece",
    "find_sources",
    "iter_pieces",
    "resolve_sources",
    "scan_piece",
    "source_bytes",
]

ACCEPTED_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".parquet")
"""The file names a directory or a glob pattern picks up (in any case)."""

_ACCEPTED = ", ".join(ACCEPTED_SUFFIXES)
_GLOB_CHARS = frozenset("*?[")
_GZIP_BLOCK = 1 << 16  # compressed bytes read at a time: the grain of progress for .gz


class _ModelOnly(msgspec.Struct):
    model: str | None = None


_MODELS = msgspec.json.Decoder(_ModelOnly)
_UNDECODED = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError)


@dataclass(frozen=True, slots=True)
class Piece:
    """Consecutive records of one responses file, not yet decoded.

    Attributes:
        path: The source file.
        first_line: The 1-based line (JSONL) or row (Parquet) of its first record.
        data: Whole JSONL lines (decompressed, for ``.gz``); ``None`` for Parquet.
        table: The rows (a ``pyarrow.RecordBatch``), for Parquet; ``None`` for JSONL.
        nbytes: The input bytes this piece accounts for, for progress: bytes on disk
            (compressed, for ``.gz`` and ``.parquet``, shared out proportionally). Over all
            the pieces of some files they add up to :func:`source_bytes` of those files.
    """

    path: Path
    first_line: int
    data: bytes | None
    table: pyarrow.RecordBatch | None
    nbytes: int


class Sources(NamedTuple):
    """The files a responses spec names (:func:`find_sources`).

    Attributes:
        files: The files to read, in order; never empty.
        skipped: Files the directory or glob holds that lie in the excluded directory.
    """

    files: list[Path]
    skipped: list[Path]


def resolve_sources(spec: str | Path, *, exclude: str | Path | None = None) -> list[Path]:
    """The files a responses spec names.

    Args:
        spec: A file (of any name; one that does not end in ``.gz`` or ``.parquet`` is read
            as JSONL); a directory (every file in it and its subdirectories whose name ends
            in one of :data:`ACCEPTED_SUFFIXES`, sorted by relative path); or a glob pattern
            (``**`` spans directories; the matches are sorted, and a matched directory stands
            for the responses files in it).
        exclude: A directory whose files a directory or a glob leaves out: a run's output
            directory, so its own cases.parquet is never read back as responses. Paths are
            compared resolved (links followed). A file named as the spec is always read.

    Returns:
        The files, in the order to read them; never empty.

    Raises:
        ResponseError: Nothing is there, a directory or pattern holds no responses file (or
            none outside ``exclude``), or a pattern matches a file whose name ends in none
            of the accepted suffixes.
        UsageError: ``spec`` is empty text.
    """
    return find_sources(spec, exclude=exclude).files


def find_sources(spec: str | Path, *, exclude: str | Path | None = None) -> Sources:
    """The files a responses spec names, and the ones ``exclude`` left out.

    As :func:`resolve_sources` (which returns ``files``); ``skipped`` lists the responses
    files of the directory or glob that lie in ``exclude``.
    """
    if isinstance(spec, str) and not spec.strip():
        # Path("") is the current directory: every responses file in it and below would be read
        raise UsageError(
            "the responses path is empty text; expected a file, a directory or a glob pattern"
        )
    root = None if exclude is None else Path(exclude).resolve()
    path = Path(spec)
    if path.is_dir():
        found = _directory_files(path)
        if not found:
            raise ResponseError(
                f"is a directory with no responses files in it, expected files ending in {_ACCEPTED}",
                path=path,
            )
        files: list[Path] = []
        skipped: list[Path] = []
        for file in found:
            (skipped if _inside(file, root) else files).append(file)
        return _checked(files, skipped, exclude, path)
    if path.exists():
        return Sources(_regular([path]), [])
    if _GLOB_CHARS.isdisjoint(str(spec)):
        raise ResponseError("no such file", path=path)
    files, skipped = _glob_files(str(spec), root)
    if not files and not skipped:
        raise ResponseError(
            f"matches no responses files, expected files ending in {_ACCEPTED}", path=str(spec)
        )
    return _checked(files, skipped, exclude, str(spec))


def _inside(path: Path, root: Path | None) -> bool:
    """Whether the file ``path`` is in the directory ``root`` (resolved), or under it.

    The file's directory is resolved, not the file: a link in ``root`` is in it.
    """
    return root is not None and path.parent.resolve().joinpath(path.name).is_relative_to(root)


def _checked(
    files: list[Path], skipped: list[Path], exclude: str | Path | None, spec: str | Path
) -> Sources:
    if not files:
        raise ResponseError(
            f"holds responses files only inside {exclude}, the output directory, whose files "
            "are never read as responses (a run writes its own cases.parquet there); write "
            "the report somewhere else",
            path=spec,
        )
    return Sources(_regular(files), skipped)


def _regular(files: list[Path]) -> list[Path]:
    """``files``, if each is a regular file: a pipe or a device cannot be read twice.

    The responses are read twice (once for the model names, once to score them): a pipe
    would give its records to the first pass only, and a FIFO would wait for a writer.
    """
    for path in files:
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise ResponseError(f"cannot be read ({exc.strerror or exc})", path=path) from exc
        if not stat.S_ISREG(mode):
            raise ResponseError(
                "is a pipe or a device, expected a file: faultline reads the responses twice "
                "(once for the model names, once to score them); save the stream to a file "
                "first (… > responses.jsonl) and score that",
                path=path,
            )
    return files


def _accepted(name: str) -> bool:
    return name.lower().endswith(ACCEPTED_SUFFIXES)


def _directory_files(root: Path) -> list[Path]:
    """The responses files under ``root``, sorted by relative path.

    Linked directories are followed, as a glob follows them; a directory reached again (by
    another link, or a link that loops back) is read the first time only, in sorted order.
    Hidden files and directories (a name starting with ``.``: a Mac's ``._x.parquet``
    resource forks, a sync tool's copies) are left out, as a glob leaves them out.
    """

    def fail(exc: OSError) -> NoReturn:
        raise ResponseError(f"cannot be read ({exc.strerror or exc})", path=exc.filename) from exc

    seen: set[tuple[int, int]] = set()
    found: list[Path] = []
    for top, dirs, names in os.walk(root, onerror=fail, followlinks=True):
        try:
            info = os.stat(top)
        except OSError as exc:
            fail(exc)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if (info.st_dev, info.st_ino) in seen:
            dirs.clear()
            continue
        seen.add((info.st_dev, info.st_ino))
        found += [Path(top, name) for name in names if _accepted(name) and not name.startswith(".")]
    return sorted(found, key=lambda p: p.relative_to(root).parts)


def _glob_files(pattern: str, root: Path | None) -> tuple[list[Path], list[Path]]:
    """The responses files a pattern matches, and those of them in ``root``, left out.

    A match in ``root`` is left out before its name is checked: ``logs/**`` may match the
    report.json of an output directory inside ``logs``.
    """
    files: dict[Path, None] = {}
    skipped: dict[Path, None] = {}
    for match in sorted(map(Path, glob.glob(pattern, recursive=True))):
        if match.is_dir():
            for path in _directory_files(match):
                (skipped if _inside(path, root) else files)[path] = None
        elif _inside(match, root):
            if _accepted(match.name):
                skipped[match] = None
        elif not _accepted(match.name):
            raise ResponseError(
                f"is matched by {pattern!r} but is not a responses file: expected a name "
                f"ending in {_ACCEPTED} (narrow the pattern, or name the directory)",
                path=match,
            )
        else:
            files[match] = None
    return list(files), list(skipped)


def source_bytes(paths: Sequence[Path]) -> int:
    """The total size on disk of some files, for progress.

    Raises:
        ResponseError: A file cannot be found or read.
    """
    total = 0
    for path in paths:
        try:
            total += path.stat().st_size
        except OSError as exc:
            raise ResponseError(f"cannot be read ({exc.strerror or exc})", path=path) from exc
    return total


def iter_pieces(
    paths: Sequence[Path],
    chunk_bytes: int = CHUNK_BYTES,
    rows: int = 20_000,
    digest: Any = None,
) -> Iterator[Piece]:
    """Cut files into pieces, in order: the files as given, each front to back.

    JSONL (and ``.gz``, decompressed) is cut into chunks of whole lines, a UTF-8 byte-order
    mark at the start of a file dropped; Parquet into record batches of the columns a
    :class:`~faultline.responses.model.Response` has.

    Args:
        paths: The files (see :func:`resolve_sources`).
        chunk_bytes: Roughly how many (decompressed) bytes of JSONL a piece holds.
        rows: The most rows a Parquet piece holds.
        digest: A ``hashlib`` object to update with every byte of every file as stored on
            disk, in order, if any.

    Yields:
        The pieces. To share out the bytes of blank lines, a piece is yielded once the next
        one is read; an error in the next one waits until this one has been taken.

    Raises:
        ResponseError: A file cannot be read, is not valid gzip or Parquet, or is truncated.
    """
    held: Piece | None = None
    owed = 0
    stream = (item for path in paths for item in _file_pieces(path, chunk_bytes, rows, digest))
    while True:
        try:
            item = next(stream)
        except StopIteration:
            break
        except ResponseError:
            if held is not None:
                yield held
            raise
        if isinstance(item, int):
            if held is None:
                owed += item
            else:
                held = replace(held, nbytes=held.nbytes + item)
            continue
        if held is not None:
            yield held
        held, owed = replace(item, nbytes=item.nbytes + owed) if owed else item, 0
    if held is not None:
        yield held


def _kind(path: Path) -> Literal["jsonl", "gzip", "parquet"]:
    name = path.name.lower()
    if name.endswith(".parquet"):
        return "parquet"
    return "gzip" if name.endswith(".gz") else "jsonl"


def _file_pieces(path: Path, chunk_bytes: int, rows: int, digest: Any) -> Iterator[Piece | int]:
    """One file's pieces, and (as plain numbers) input bytes no piece accounts for."""
    if _kind(path) == "parquet":
        from faultline.responses import _parquet

        for item in _parquet.iter_batches(path, rows, digest):
            yield item if isinstance(item, int) else Piece(path, item[0], None, item[1], item[2])
        return
    with open_for_reading(path, ResponseError, "a JSONL file") as handle:
        if _kind(path) == "gzip":
            blocks = _gunzip(handle, path, chunk_bytes, digest)
        else:
            blocks = _plain(handle, path, chunk_bytes, digest)
        for first_line, chunk, nbytes in cut_lines(blocks, chunk_bytes):
            yield Piece(path, first_line, chunk, None, nbytes) if chunk else nbytes


def _plain(handle: BinaryIO, path: Path, size: int, digest: Any) -> Iterator[tuple[bytes, int]]:
    while block := _read(handle, path, max(size, 1)):
        if digest is not None:
            digest.update(block)
        yield block, len(block)


def _gunzip(
    handle: BinaryIO, path: Path, chunk_bytes: int, digest: Any
) -> Iterator[tuple[bytes, int]]:
    """Decompress a gzip file (of one or more members) a bounded block at a time.

    Yields:
        ``(data, nbytes)``: decompressed bytes (at most ``chunk_bytes`` at a time, so a
        small file that expands hugely never sits in memory at once) and the compressed
        bytes read for them.
    """
    cap = max(chunk_bytes, 1)
    stream = zlib.decompressobj(wbits=31)
    empty = True
    try:
        while raw := _read(handle, path, min(cap, _GZIP_BLOCK)):
            empty = False
            if digest is not None:
                digest.update(raw)
            nbytes, data = len(raw), raw
            while data:
                if stream.eof:  # the next member, or the zero padding gzip allows after one
                    data = data.lstrip(b"\0")
                    if not data:
                        break
                    stream = zlib.decompressobj(wbits=31)
                # Output zlib still holds when the input runs out comes with the next input
                # (there is more: a member ends with its 8-byte trailer).
                yield stream.decompress(data, cap), nbytes
                nbytes = 0
                data = stream.unused_data if stream.eof else stream.unconsumed_tail
    except zlib.error as exc:
        raise ResponseError(f"is not valid gzip ({exc})", path=path) from None
    if not stream.eof and not empty:
        raise ResponseError(
            "ends in the middle of its gzip stream: the file is truncated", path=path
        )


def _read(handle: BinaryIO, path: Path, size: int) -> bytes:
    try:
        return handle.read(size)
    except OSError as exc:
        raise ResponseError(f"cannot be read ({exc.strerror or exc})", path=path) from exc


def decode_piece(piece: Piece) -> ResponseBatch:
    """Decode and validate a piece's records.

    Args:
        piece: A piece from :func:`iter_pieces`.

    Returns:
        The records in order, with their lines (rows, for Parquet).

    Raises:
        ResponseError: A record is not valid: the message names the file, the line (or row,
            also said in the message) and the field. For Parquet, a column of a type that
            cannot hold the field is named at the first row that has a value in it. Unknown
            columns and keys are ignored.
    """
    if piece.data is not None:
        return decode_chunk(piece.path, piece.data, piece.first_line)
    from faultline.responses import _parquet

    return _parquet.decode_batch(piece.path, piece.table, piece.first_line)


def scan_piece(piece: Piece) -> tuple[set[str | None], int] | None:
    """The models a piece names and its number of records, without validating the rest.

    Args:
        piece: A piece from :func:`iter_pieces`.

    Returns:
        ``(models, records)``, or ``None`` when the piece does not decode (the decoding pass
        then names the bad line).
    """
    if piece.data is not None:
        try:
            records = _MODELS.decode_lines(piece.data)
        except _UNDECODED:
            # A line Python strips to nothing (a form feed) is blank to decode_chunk but not
            # to msgspec: read the lines one by one, as decode_chunk does then.
            try:
                records = [_MODELS.decode(raw) for raw in piece.data.split(b"\n") if raw.strip()]
            except _UNDECODED:
                return None
        return {r.model for r in records}, len(records)
    from faultline.responses import _parquet

    return _parquet.scan_batch(piece.table)
