"""The run directory's journal: every answer, durable the moment it arrives.

A SQLite database in WAL mode with ``synchronous=FULL``: a committed row survives a crash
or power cut. One writer thread commits whatever answers have arrived since its last commit
(group commit), so the runner never waits on the disk, and an answer is on disk within one
fsync of arriving. An answer that was still in flight or not yet committed when the process
died is simply asked for again on ``--resume``; a committed one is never asked for again.

The journal also holds the run's *fingerprint*: the probe set, the target and the request
parameters. ``--resume`` refuses to continue a run whose fingerprint differs, since mixing
answers to different questions would make the report meaningless.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import resource
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from faultline._util.files import sha256_bytes
from faultline._util.text import well_formed
from faultline.errors import FaultlineError, InputError, RecordingError, UsageError
from faultline.probes.model import Probe, digest_record
from faultline.probes.probeset import ProbeSet

__all__ = [
    "JOURNAL_NAME",
    "Entry",
    "Journal",
    "RecordingError",
    "cannot_write",
    "probe_set_digest",
    "recorded_count",
]

JOURNAL_NAME = "journal.sqlite"
SCHEMA = "1"
_BATCH = 2048
#: SQLite's codes for a journal it could read but not write (or not open at all).
_CANNOT_WRITE = {
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_AUTH,
}

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases (
    probe_id      TEXT    NOT NULL,
    sample        INTEGER NOT NULL,
    response      TEXT,
    model         TEXT,
    finish_reason TEXT,
    error         TEXT,
    input_tokens  INTEGER,
    output_tokens INTEGER,
    attempts      INTEGER NOT NULL,
    cached        INTEGER NOT NULL,
    latency_s     REAL    NOT NULL,
    request       TEXT    NOT NULL,
    recorded_at   TEXT    NOT NULL,
    reasoning     TEXT,
    PRIMARY KEY (probe_id, sample)
);
"""
_ADDED_COLUMNS = {"reasoning": "TEXT"}
"""Columns added to ``cases`` since its first release, each at the end: a journal written
before one gains it when it is opened again (its rows hold ``NULL`` there)."""
_COLUMNS = (
    "probe_id, sample, response, model, finish_reason, error, input_tokens, output_tokens, "
    "attempts, cached, latency_s, request, recorded_at, reasoning"
)
# A case sent again (--retry-errors) replaces its outcome but adds its attempts, so the run's
# request count covers every sitting; an error that happens again says how many requests it
# took over every sitting too, as the column does.
_SUMMED = {
    "attempts": "cases.attempts + excluded.attempts",
    "error": (
        "CASE WHEN excluded.error IS NULL THEN NULL ELSE json_set(excluded.error, '$.attempts', "
        "cases.attempts + excluded.attempts) END"
    ),
}
_UPDATED = ", ".join(
    f"{c} = {_SUMMED.get(c, f'excluded.{c}')}" for c in _COLUMNS.replace(" ", "").split(",")[2:]
)
_UPSERT = (
    f"INSERT INTO cases ({_COLUMNS}) VALUES ({', '.join('?' * len(_COLUMNS.split(',')))}) "
    f"ON CONFLICT (probe_id, sample) DO UPDATE SET {_UPDATED}"
)


@dataclass(frozen=True)
class Entry:
    """One case as the journal records it.

    Attributes:
        probe_id: The probe.
        sample: Which generation.
        response: The answer, or ``None`` when the target failed.
        model: The model that answered, as the target named it.
        finish_reason: Why generation stopped.
        error: The failure (``kind``, ``message``, ``status``, ``attempts``), or ``None``.
        input_tokens: Tokens of the request, when counted.
        output_tokens: Tokens of the answer, when counted.
        attempts: Requests sent for this case (0 when it came from the cache).
        cached: Whether the answer came from the response cache.
        latency_s: Seconds from the first attempt to the outcome.
        request: The request as sent: messages and parameters, no secrets.
        reasoning: A reasoning model's reasoning, when the target returned it apart from
            the answer.
    """

    probe_id: str
    sample: int
    response: str | None
    model: str | None
    finish_reason: str | None
    error: Mapping[str, Any] | None
    input_tokens: int | None
    output_tokens: int | None
    attempts: int
    cached: bool
    latency_s: float
    request: Mapping[str, Any]
    reasoning: str | None = None

    def row(self) -> tuple[Any, ...]:
        """The entry as a ``cases`` row; a lone surrogate in any text is stored as U+FFFD.

        SQLite text is UTF-8, which cannot hold a lone surrogate: left in, one such string
        would fail its whole commit and stop the writer.
        """
        return (
            well_formed(self.probe_id),
            self.sample,
            _text(self.response),
            _text(self.model),
            _text(self.finish_reason),
            None if self.error is None else well_formed(json.dumps(self.error, ensure_ascii=False)),
            self.input_tokens,
            self.output_tokens,
            self.attempts,
            int(self.cached),
            self.latency_s,
            well_formed(json.dumps(self.request, ensure_ascii=False, sort_keys=True)),
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            _text(self.reasoning),
        )

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Entry:
        """An entry read back from a ``cases`` row."""
        return cls(
            probe_id=row[0],
            sample=row[1],
            response=row[2],
            model=row[3],
            finish_reason=row[4],
            error=None if row[5] is None else json.loads(row[5]),
            input_tokens=row[6],
            output_tokens=row[7],
            attempts=row[8],
            cached=bool(row[9]),
            latency_s=row[10],
            request=json.loads(row[11]),
            reasoning=row[13],
        )


class Journal:
    """The journal of one run directory.

    Open it with :meth:`open`; after :meth:`start`, :meth:`record` queues an entry for the
    writer thread, and :meth:`stop` commits what is queued and stops the thread.
    """

    def __init__(self, path: Path, connection: sqlite3.Connection, sittings: int) -> None:
        self.path = path
        self.sittings = sittings
        self._db = connection
        self._queue: queue.SimpleQueue[Entry | None] = queue.SimpleQueue()
        self._failure: BaseException | None = None
        self._error: RecordingError | None = None
        self._writer: threading.Thread | None = None
        self._on_commit: Callable[[list[Entry]], None] | None = None

    @classmethod
    def open(
        cls,
        directory: Path,
        fingerprint: Mapping[str, Any],
        *,
        resume: bool,
        probes: ProbeSet | None = None,
    ) -> Journal:
        """Open (or create) the journal in ``directory`` for a run with this fingerprint.

        Nothing is written to a journal before it has been read whole, so a damaged one is
        left as it was. With ``probes`` (whose :func:`probe_set_digest` is the fingerprint's
        ``probe_set``), the journal keeps each probe's id and a digest of each of its fields,
        so that a resume with another probe set can say which probes changed, and how.

        Raises:
            UsageError: The directory holds a run and ``resume`` is false, or it holds a
                different run (another probe set, target or parameters). A run that
                recorded no case is neither: it starts over.
            InputError: The journal is damaged (not an SQLite database, or cut short), or
                cannot be written (a read-only file, directory or file system).
        """
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / JOURNAL_NAME
        existed = path.exists()
        if existed:
            _check_writable(path)
        try:
            db = _connect(path)
        except sqlite3.Error as exc:
            raise _unusable(path, exc) from None
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall()) if existed else {}
            # Read every case before anything is written: damage shows here, not halfway
            # through the run.
            recorded = _recorded(db) if meta else {}
        except sqlite3.Error as exc:
            db.close()
            raise _unusable(path, exc) from None
        if meta and not recorded:
            # A run that recorded nothing (stopped by a rejected key or an unknown model) starts
            # over, with or without --resume: there is nothing to mix a corrected run with.
            meta = {}
        if meta and not resume:
            db.close()
            raise UsageError(
                f"{directory} already holds a run ({len(recorded)} cases recorded in "
                f"{JOURNAL_NAME}); pass --resume to continue it, or choose another --out"
            )
        wanted = json.dumps(dict(fingerprint), sort_keys=True)
        listed = False
        if meta:
            found = json.loads(meta.get("fingerprint", "{}"))
            if probes is not None and found.get("probe_set") == probes.sha256:
                # Recorded before probe sets were compared as sets: the same probes in the
                # same order.
                found["probe_set"] = fingerprint.get("probe_set")
            target, recorded_target = fingerprint.get("target"), found.get("target")
            if (
                isinstance(target, dict)
                and isinstance(recorded_target, dict)
                and "private" in target
                and "private" not in recorded_target
            ):
                # Recorded before the base URL's query and the header values were compared:
                # there is nothing to compare them with.
                recorded_target["private"] = target["private"]
            try:
                listed = _listed(db)
            except sqlite3.Error as exc:
                db.close()
                raise _unusable(path, exc) from None
            _check_same(path, found, dict(fingerprint), db, probes)
        sittings = int(meta.get("sittings", "0")) + 1
        try:
            with db:
                _add_columns(db)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA,))
                db.execute("INSERT OR REPLACE INTO meta VALUES ('fingerprint', ?)", (wanted,))
                db.execute("INSERT OR REPLACE INTO meta VALUES ('sittings', ?)", (str(sittings),))
                if probes is not None and not (meta and listed):
                    _list_probes(db, probes)
        except sqlite3.Error as exc:
            db.close()
            raise _unusable(path, exc) from None
        return cls(path, db, sittings)

    def recorded(self) -> dict[tuple[str, int], bool]:
        """Every recorded case, ``(probe_id, sample)`` to whether it is an error."""
        try:
            return _recorded(self._db)
        except sqlite3.Error as exc:
            raise _unusable(self.path, exc) from None

    def entries(self) -> Iterator[Entry]:
        """Every recorded entry, in no particular order."""
        try:
            for row in self._db.execute(f"SELECT {_COLUMNS} FROM cases"):
                yield Entry.from_row(row)
        except sqlite3.Error as exc:
            raise _unusable(self.path, exc) from None

    def start(self, on_commit: Callable[[list[Entry]], None] | None = None) -> None:
        """Start the writer thread; from now on only it touches the database.

        Args:
            on_commit: Called by the writer with the entries of each commit, once it is
                durable (the response cache stores the answers then); what it raises stops
                the writer as a failed commit would.
        """
        self._on_commit = on_commit
        self._writer = threading.Thread(
            target=self._write_loop, name="faultline-journal", daemon=True
        )
        self._writer.start()

    def record(self, entry: Entry) -> None:
        """Queue an entry to be committed (a failed writer's error is raised here).

        Raises:
            RecordingError: The writer could not commit (a full disk, an I/O error).
        """
        if self._failure is not None:
            raise self._failed()
        self._queue.put(entry)

    def stop(self) -> None:
        """Commit every queued entry and stop the writer (the journal stays readable).

        Raises:
            RecordingError: The writer could not commit (a full disk, an I/O error).
        """
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join()
            self._writer = None
        if self._failure is not None:
            raise self._failed()

    def _failed(self) -> BaseException:
        """The writer's failure, as the error to raise: once made, always the same one.

        A file system that failed (a full disk, an I/O error) is a :class:`RecordingError`
        that says how many cases are safe; anything else is a bug, raised as it is.
        """
        failure = self._failure
        if isinstance(failure, FaultlineError):  # says what it is itself (the cache's)
            return failure
        if not isinstance(failure, sqlite3.Error | OSError):
            assert failure is not None
            return failure
        if self._error is None:
            reason = _storage_problem(self.path) or str(failure)
            recorded = recorded_count(self.path.parent)
            self._error = RecordingError(
                f"{self.path} could not be written ({reason}); the {recorded:,} cases recorded "
                "in it are safe: make room (or fix the cause) and run the same command with "
                "--resume to send only the rest"
            )
        return self._error

    def close(self) -> None:
        """Stop the writer (committing what is queued) and close the database."""
        try:
            self.stop()
        finally:
            self._db.close()

    def _write_loop(self) -> None:
        # The connection was made on another thread; from here on this thread alone uses it.
        stop = False
        while not stop:
            batch: list[Entry] = []
            item = self._queue.get()
            while item is not None:
                batch.append(item)
                if len(batch) == _BATCH:  # a full batch: the next one takes the rest
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            stop = item is None
            if not batch:
                continue
            try:
                with self._db:
                    self._db.executemany(_UPSERT, [e.row() for e in batch])
                if self._on_commit is not None:
                    self._on_commit(batch)
            except BaseException as exc:  # disk full, I/O error: surfaced to the runner
                self._failure = exc
                return


def _text(value: str | None) -> str | None:
    return None if value is None else well_formed(value)


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False, isolation_level="DEFERRED")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=5000")
    db.executescript(_DDL)
    return db


def _add_columns(db: sqlite3.Connection) -> None:
    """Give a journal written by an earlier faultline the columns added since."""
    have = {row[1] for row in db.execute("PRAGMA table_info(cases)")}
    for name, kind in _ADDED_COLUMNS.items():
        if name not in have:
            db.execute(f"ALTER TABLE cases ADD COLUMN {name} {kind}")


def _recorded(db: sqlite3.Connection) -> dict[tuple[str, int], bool]:
    rows = db.execute("SELECT probe_id, sample, error IS NOT NULL FROM cases")
    return {(p, s): bool(e) for p, s, e in rows}


def _check_writable(path: Path) -> None:
    """Raise :class:`InputError` when the journal's files cannot be opened for writing.

    SQLite would say only "unable to open database file" or "attempt to write a readonly
    database"; the operating system says why (a read-only file system, no permission).
    """
    for file in (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
        try:
            fd = os.open(file, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise cannot_write(path, (exc.strerror or str(exc)).lower()) from None
        os.close(fd)


def _storage_problem(path: Path) -> str | None:
    """What stopped ``path`` (or its ``-wal`` file) from growing, when it is one of the usual.

    SQLite says "database or disk is full" or "disk I/O error" but not which; the file
    system and the process's limits can say.
    """
    try:
        if os.statvfs(path.parent).f_bavail == 0:
            return "no space left on device"
    except OSError:
        pass
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        for file in (path, path.with_name(f"{path.name}-wal")):
            with contextlib.suppress(OSError):
                if file.stat().st_size >= limit:
                    return f"the file size limit of {limit:,} bytes (ulimit -f) is reached"
    return None


def _unusable(path: Path, exc: sqlite3.Error) -> InputError:
    """The error for a journal SQLite could not open, read or write: what is wrong, what to do."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in _CANNOT_WRITE:
        return cannot_write(path, str(exc))
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return InputError(
            f"is locked by another program ({exc}); close what holds it open and run again",
            path=path,
        )
    return InputError(
        f"is not a readable faultline journal ({exc}): it was damaged (cut short or "
        "overwritten); restore it from a copy, or start the run again in another --out",
        path=path,
    )


def cannot_write(path: Path, reason: str) -> InputError:
    """The error for a run directory (or its journal) that cannot be written, and what to do."""
    return InputError(
        f"cannot be written ({reason}): a run records every answer in it as it arrives; make "
        "the run directory writable, or copy it to a place faultline can write and run the same "
        "command there with --out and --resume",
        path=path,
    )


def recorded_count(directory: str | Path) -> int:
    """How many cases the journal in ``directory`` holds (0 when there is none)."""
    path = Path(directory) / JOURNAL_NAME
    if not path.exists():
        return 0
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT count(*) FROM cases").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        db.close()


def _check_same(
    path: Path,
    found: dict[str, Any],
    wanted: dict[str, Any],
    db: sqlite3.Connection,
    probes: ProbeSet | None,
) -> None:
    differ = sorted(k for k in set(found) | set(wanted) if found.get(k) != wanted.get(k))
    if not differ:
        return
    details = []
    for k in differ[:3]:
        change = None
        if k == "probe_set" and probes is not None:
            change = _probe_changes(db, probes)
        if change is None and k == "target":
            change = _target_change(found.get(k), wanted.get(k))
        if change is None:
            change = f"recorded {json.dumps(found.get(k))}, now {json.dumps(wanted.get(k))}"
        details.append(f"{k}: {change}")
    db.close()
    raise UsageError(
        f"{path}: --resume continues the same run, but the {', '.join(differ)} changed "
        f"({'; '.join(details)}); run again with the recorded options, or start a new run in "
        "another --out"
    )


def _target_change(found: object, wanted: object) -> str | None:
    """How the target changed, its ``private`` digest said in words (``None``: say it whole)."""
    if not (isinstance(found, dict) and isinstance(wanted, dict)):
        return None
    private = found.get("private") != wanted.get("private")
    found = {k: v for k, v in found.items() if k != "private"}
    wanted = {k: v for k, v in wanted.items() if k != "private"}
    said = []
    if found != wanted:
        said.append(f"recorded {json.dumps(found)}, now {json.dumps(wanted)}")
    if private:
        said.append(
            "the base URL's query or user info, or a --header name or value, differs from the "
            "recorded run's (compared by a digest: the values are not recorded)"
        )
    return "; ".join(said)


# -- the probe set, as a set ---------------------------------------------------------------
#
# Cases are keyed by (probe id, sample), and a probe's requests do not depend on where it
# stands in the set, so the same probes in another order (a re-sorted file, transforms
# named in another order) are the same run. The journal lists each probe's id with a digest
# of each of its fields, to say which probes a changed set added, removed or edited, and how.

_PROBES_DDL = (
    "CREATE TABLE IF NOT EXISTS probes (id TEXT PRIMARY KEY, fields TEXT NOT NULL) WITHOUT ROWID"
)
_NAMED = 5  # the most probes a message names of each kind of change
_encode = msgspec.json.Encoder(order="deterministic").encode


def probe_set_digest(probes: ProbeSet) -> str:
    """SHA-256 of the probes in id order: the same probes in any order have the same digest."""
    ordered = sorted(probes, key=lambda p: p.id)
    return sha256_bytes(msgspec.json.encode([digest_record(p) for p in ordered]))


def _field_digests(probe: Probe) -> str:
    """``field:digest,...`` for every field of the probe but its id (12 hex digits each)."""
    return ",".join(
        [
            f"{name}:{hashlib.blake2b(_encode(getattr(probe, name)), digest_size=6).hexdigest()}"
            for name in probe.__struct_fields__
            if name != "id" and (name != "canaries" or probe.canaries)  # as digest_record
        ]
    )


def _listed(db: sqlite3.Connection) -> bool:
    """Whether the journal lists its probes (journals from before the list do not)."""
    row = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'probes'")
    return row.fetchone() is not None and bool(db.execute("SELECT 1 FROM probes").fetchone())


def _list_probes(db: sqlite3.Connection, probes: ProbeSet) -> None:
    db.execute(_PROBES_DDL)
    db.execute("DELETE FROM probes")
    db.executemany(
        "INSERT INTO probes VALUES (?, ?)",
        ((well_formed(p.id), _field_digests(p)) for p in probes),
    )


def _probe_changes(db: sqlite3.Connection, probes: ProbeSet) -> str | None:
    """What differs between the journal's probes and ``probes``, or ``None`` if unknown."""
    try:
        if not _listed(db):
            return None
        before = dict(db.execute("SELECT id, fields FROM probes").fetchall())
    except sqlite3.Error:
        return None
    now = {well_formed(p.id): _field_digests(p) for p in probes}
    edited = []
    for probe_id in sorted(before.keys() & now.keys()):
        if before[probe_id] != now[probe_id]:
            old, new = (
                dict(f.split(":") for f in d.split(",")) for d in (before[probe_id], now[probe_id])
            )
            fields = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            edited.append(f"{probe_id} ({', '.join(fields)})")
    parts = [
        _some(f"{len(ids)} probe{'s' if len(ids) != 1 else ''} {what}", ids)
        for what, ids in (
            ("edited", edited),
            ("added", sorted(now.keys() - before.keys())),
            ("removed", sorted(before.keys() - now.keys())),
        )
        if ids
    ]
    return ", ".join(parts) if parts else None


def _some(head: str, items: list[str]) -> str:
    shown = ", ".join(items[:_NAMED])
    more = f" and {len(items) - _NAMED:,} more" if len(items) > _NAMED else ""
    return f"{head}: {shown}{more}"
