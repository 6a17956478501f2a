"""The response cache (``--cache DIR``): answers reused across runs.

Keyed by the SHA-256 of the target (provider, model, endpoint, and a digest of the base URL's
query and user info and of the ``--header`` names and values), the messages, the request
parameters and the sample number (and the probe id, for a Python function given it), so a
change to any of them asks the model again, and the ``k``-th sample of a probe is reused
only as the ``k``-th sample. Only answers are cached, never failures. Header values, query
values and keys are never stored; the key is not part of the cache key (a rotated key
reaches the same model).

A run stores its answers in the cache only once its journal has committed them
(:meth:`ResponseCache.put_answers`, called by the journal's writer): an answer in the cache
that the run directory does not hold is always another run's, so a run resumed after a crash
never takes an answer it paid for itself for a free one from the cache.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from faultline._util.text import well_formed
from faultline.errors import InputError, RecordingError
from faultline.runner.journal import Entry
from faultline.targets.base import Completion

__all__ = ["CACHE_NAME", "ResponseCache", "cache_key"]

CACHE_NAME = "responses.sqlite"
_DDL = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    response TEXT NOT NULL,
    model TEXT,
    finish_reason TEXT,
    input_tokens INTEGER,
    output_tokens INTEGER
);
CREATE TABLE IF NOT EXISTS reasoning (
    key TEXT PRIMARY KEY,
    reasoning TEXT NOT NULL
);
"""
# A reasoning model's reasoning, beside its answer: a table of its own, so that a cache
# written by this version is still one to a faultline from before reasoning was recorded.
_COLUMNS = ("key", "response", "model", "finish_reason", "input_tokens", "output_tokens")
_WHAT_TO_DO = "delete it (the cache is rebuilt as runs answer), or give --cache another directory"


def cache_key(
    target: Mapping[str, Any], request: Mapping[str, Any], sample: int, probe_id: str
) -> str:
    """The cache key of one request: what was asked, of whom, and which sample.

    Args:
        target: The target's :func:`~faultline.targets.base.answer_identity`.
        request: The request as the journal records it (messages and parameters).
        sample: The sample number.
        probe_id: The probe, part of the key only when the target is given it.
    """
    who = {k: target.get(k) for k in ("provider", "model", "base_url")}
    # Only when they apply, so that the keys of every other target stay as they were.
    if target.get("private"):
        who["private"] = target["private"]
    key: dict[str, Any] = {"v": 2, "target": who, "sample": sample}
    if target.get("probe_ids"):
        key["probe_id"] = probe_id
    key["request"] = {
        k: v for k, v in request.items() if k != "timeout"
    }  # how long we wait is not what we ask
    blob = json.dumps(
        key,
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """A cache directory shared by runs (and by processes: SQLite serialises writers).

    Its connection serves two threads: the runner's, which looks answers up, and the
    journal's writer, which stores them; a lock keeps them apart.

    Args:
        directory: Where the cache lives (created if missing).

    Raises:
        InputError: The directory cannot be made, or ``responses.sqlite`` in it is not a
            faultline cache (not an SQLite database, or its ``answers`` table has other
            columns) or cannot be opened or written; the message names the file, says what
            is wrong and what to do. Nothing in the file is changed then.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            raise InputError(
                f"cannot be made a cache directory ({reason}); expected a directory faultline "
                "can write: give --cache another directory",
                path=self.directory,
                field="--cache",
            ) from None
        self.path = self.directory / CACHE_NAME
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise _unusable(self.path, exc) from None
        try:
            self._db.execute("PRAGMA busy_timeout=10000")
            _check_schema(self._db, self.path)  # before anything is written to it
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_DDL)
        except InputError:
            self._db.close()
            raise
        except sqlite3.Error as exc:
            self._db.close()
            raise _unusable(self.path, exc) from None
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, key: str) -> Completion | None:
        """The cached answer for ``key``, or ``None``.

        Raises:
            InputError: The cache cannot be read (damaged since it was opened).
        """
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT response, model, finish_reason, input_tokens, output_tokens, "
                    "reasoning.reasoning FROM answers LEFT JOIN reasoning USING (key) "
                    "WHERE answers.key = ?",
                    (key,),
                ).fetchone()
            except sqlite3.Error as exc:
                raise _unusable(self.path, exc, during_run=True) from None
        if row is None:
            return None
        self.hits += 1
        return Completion(*row)

    def put_many(self, answers: Iterable[tuple[str, Completion]]) -> None:
        """Store answers, in one transaction.

        Raises:
            RecordingError: The cache could not be written (a full disk, an I/O error).
        """
        given = list(answers)
        rows = [
            (
                key,
                well_formed(c.text),
                None if c.model is None else well_formed(c.model),
                None if c.finish_reason is None else well_formed(c.finish_reason),
                c.input_tokens,
                c.output_tokens,
            )
            for key, c in given
        ]
        if not rows:
            return
        reasoning = [
            (key, None if c.reasoning is None else well_formed(c.reasoning)) for key, c in given
        ]
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(
                        "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)", rows
                    )
                    self._db.executemany(
                        "DELETE FROM reasoning WHERE key = ?",
                        [(key,) for key, text in reasoning if text is None],
                    )
                    self._db.executemany(
                        "INSERT OR REPLACE INTO reasoning VALUES (?, ?)",
                        [(key, text) for key, text in reasoning if text is not None],
                    )
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise RecordingError(
                    f"{self.path} could not be written ({exc}); the run's answers are recorded "
                    "in its journal all the same: fix the cause (or leave out --cache) and run "
                    "the same command with --resume to send only the rest"
                ) from None

    def put_answers(self, target: Mapping[str, Any], entries: Iterable[Entry]) -> None:
        """Store the answers among ``entries`` (committed to a run's journal) sent to ``target``.

        ``target`` is the target's :func:`~faultline.targets.base.answer_identity`.

        Failures, and answers that came from the cache, are left out.
        """
        self.put_many(
            (
                cache_key(target, e.request, e.sample, e.probe_id),
                Completion(
                    e.response,
                    e.model,
                    e.finish_reason,
                    e.input_tokens,
                    e.output_tokens,
                    e.reasoning,
                ),
            )
            for e in entries
            if e.response is not None and e.error is None and not e.cached
        )

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def _check_schema(db: sqlite3.Connection, path: Path) -> None:
    """Raise :class:`InputError` unless ``db`` is empty or holds a faultline cache.

    Reading the schema is what shows a file that is not an SQLite database at all; one row is
    read too, so that a table that cannot be read shows here rather than halfway through a run.
    """
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "answers" not in tables:
        return
    columns = tuple(row[1] for row in db.execute("PRAGMA table_info(answers)"))
    if columns != _COLUMNS:
        raise InputError(
            f"is not a faultline response cache: its table 'answers' has the columns "
            f"({', '.join(columns)}), expected ({', '.join(_COLUMNS)}); {_WHAT_TO_DO}",
            path=path,
        )
    db.execute(f"SELECT {', '.join(_COLUMNS)} FROM answers LIMIT 1").fetchall()


def _unusable(path: Path, exc: sqlite3.Error, *, during_run: bool = False) -> InputError:
    """The error for a cache SQLite could not open or read: what is wrong and what to do."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        what = f"is locked by another program ({exc}); close what holds it open and run again"
    elif code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
        what = (
            f"cannot be opened for writing ({exc}); make it writable, or give --cache "
            "another directory"
        )
    else:
        what = f"is not a readable faultline response cache ({exc}); {_WHAT_TO_DO}"
    if during_run:
        what += (
            "; the answers this run recorded are kept in its journal: run the same command "
            "with --resume (and another --cache, or none) to send only the rest"
        )
    return InputError(what, path=path)
