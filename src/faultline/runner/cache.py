"""The response cache (``--cache DIR``): answers reused across runs.

Keyed by the SHA-256 of the target (provider, model, endpoint), the messages, the request
parameters and the sample number, so a change to any of them asks the model again, and the
``k``-th sample of a probe is reused only as the ``k``-th sample. Only answers are cached,
never failures. Header values and keys are not part of the key and are never stored.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
"""


def cache_key(target: Mapping[str, Any], request: Mapping[str, Any], sample: int) -> str:
    """The cache key of one request: what was asked, of whom, and which sample."""
    who = {k: target.get(k) for k in ("provider", "model", "base_url")}
    asked = {
        k: v for k, v in request.items() if k != "timeout"
    }  # how long we wait is not what we ask
    blob = json.dumps(
        {"v": 2, "target": who, "request": asked, "sample": sample},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """A cache directory shared by runs (and by processes: SQLite serialises writers).

    Args:
        directory: Where the cache lives (created if missing).
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / CACHE_NAME
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.executescript(_DDL)
        self.hits = 0

    def get(self, key: str) -> Completion | None:
        """The cached answer for ``key``, or ``None``."""
        row = self._db.execute(
            "SELECT response, model, finish_reason, input_tokens, output_tokens FROM answers WHERE key = ?",
            (key,),
        ).fetchone()
        if row is None:
            return None
        self.hits += 1
        return Completion(*row)

    def put(self, key: str, completion: Completion) -> None:
        """Store an answer."""
        self._db.execute(
            "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
            (
                key,
                completion.text,
                completion.model,
                completion.finish_reason,
                completion.input_tokens,
                completion.output_tokens,
            ),
        )

    def close(self) -> None:
        """Close the database."""
        self._db.close()
