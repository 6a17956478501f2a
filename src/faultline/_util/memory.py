"""Give memory the process has freed back to the operating system.

glibc's allocator keeps freed heap memory for reuse and rarely returns it: a long run that
allocates and frees many small arrays (a batch's keys, a merge's temporaries) grows its
resident set long after the memory is free. ``malloc_trim(0)`` returns what is free; Dask's
workers call it for the same reason. On a 1M run it brought the parent from 437 MiB back to
316 MiB, its size before scoring began (docs/benchmarks.md).

Elsewhere (macOS, musl, Windows) :func:`release_free_memory` does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Callable

__all__ = ["release_free_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


def release_free_memory() -> None:
    """Return the heap's free memory to the operating system (glibc only; else nothing)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
