from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from faultline._util.memory import _malloc_trim, release_free_memory


def _resident_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or _malloc_trim() is None, reason="glibc only"
)
def test_freed_heap_memory_goes_back_to_the_system() -> None:
    # 64 KB arrays come from the heap (below glibc's mmap threshold); keeping the last one
    # pins the top of the heap, so the allocator cannot give the rest back on its own.
    arrays = [np.ones(8192) for _ in range(3000)]
    last = arrays[-1]
    del arrays
    before = _resident_bytes()
    release_free_memory()
    after = _resident_bytes()
    assert before - after > 100 << 20
    assert last.sum() == 8192
