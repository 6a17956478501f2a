"""One run per run directory at a time: an exclusive lock on ``DIR/run.lock``.

Two processes writing one run directory would send every case twice, add up each other's
attempts, and could mix answers to two probe sets in one journal. So a run holds an
exclusive ``flock`` on ``run.lock`` from before it reads the journal until its reports are
written, and a second ``faultline run`` on that directory is refused at once (exit 2).

``flock`` rather than SQLite's own locking: the lock has to cover the run before the journal
is read and after it is closed (while the reports are written), the journal may be started
over, and SQLite's exclusive locking mode would also shut out readers (a progress watcher,
``sqlite3 journal.sqlite``); a busy SQLite database is waited for, then reported as "database
is locked", which says nothing of another run. The kernel releases a ``flock`` when the process
holding it ends, however it ends (``kill -9`` included), so a crashed run leaves nothing to
clean up and ``--resume`` works at once. The descriptor is not inherited by programs the run
starts, and a process forked from the run (a ``python:`` target's own workers) closes its copy,
so nothing that outlives the run holds its directory. The file itself is never written or
removed (removing it would let two runs lock two different files).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from faultline.errors import UsageError
from faultline.runner.journal import cannot_write

__all__ = ["LOCK_NAME", "run_lock"]

LOCK_NAME = "run.lock"

#: File systems that cannot lock (some network and FUSE file systems) say so with these.
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}

_held: set[int] = set()  # descriptors of the locks this process holds
_guard = threading.Lock()


def _close_in_child() -> None:
    """In a forked child: drop its copies of the locks, which are the parent's to hold."""
    for fd in list(_held):
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()


os.register_at_fork(after_in_child=_close_in_child)


@contextlib.contextmanager
def run_lock(directory: Path) -> Iterator[None]:
    """Hold the run directory ``directory`` (created if missing) for one run.

    Raises:
        UsageError: Another process holds the directory (another ``faultline run``).
        InputError: The directory cannot be written (a read-only file system, no permission).
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:  # the first write a run makes in its directory
        raise cannot_write(directory, (exc.strerror or str(exc)).lower()) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"{directory} is in use by another faultline run (it holds {path}); wait for "
                "that run to finish or stop it, then run again (with --resume to continue its "
                "run), or choose another --out"
            ) from None
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                raise
            # A file system without locks: run unguarded, as faultline did before it locked.
        with _guard:
            _held.add(fd)
        try:
            yield
        finally:
            with _guard:
                _held.discard(fd)
    finally:
        os.close(fd)
