"""How many CPUs this process may use: the default number of scoring workers.

``os.cpu_count()`` counts the machine's CPUs, not the ones a process may run on. A container
limited to 2 CPUs on a 64-core host (a Kubernetes pod, ``docker run --cpus 2``) sees 64, and
one worker per CPU then means 64 processes sharing 2 CPUs: slower than 2, and each holds its
own scorer and batches in memory. :func:`usable_cpus` takes the smallest of the CPUs the
process is allowed to run on (its affinity) and the CPU time its cgroup may use (v2
``cpu.max``, or v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``), rounded up.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["CGROUP_ROOT", "usable_cpus"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
"""Where cgroup v2 (and, in ``cpu/``, v1) has its files on Linux."""


def usable_cpus(cgroup_root: Path = CGROUP_ROOT) -> int:
    """The CPUs this process may use: its affinity, capped by its cgroup's CPU quota.

    Args:
        cgroup_root: The cgroup file system (another directory in tests).

    Returns:
        At least 1.
    """
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        allowed = os.cpu_count() or 1
    quota = _cgroup_quota(cgroup_root)
    if quota is not None:
        allowed = min(allowed, max(1, math.ceil(quota)))
    return max(1, allowed)


def _cgroup_quota(root: Path) -> float | None:
    """The CPUs' worth of time the cgroup may use, or ``None`` when unlimited or unknown."""
    v2 = _read(root / "cpu.max")
    if v2 is not None:
        parts = v2.split()
        return _ratio(parts[0], parts[1]) if len(parts) == 2 else None
    quota, period = (
        _read(root / "cpu" / "cpu.cfs_quota_us"),
        _read(root / "cpu" / "cpu.cfs_period_us"),
    )
    if quota is None or period is None:
        return None
    return _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    """``quota / period`` when both are positive numbers ("max" and -1 mean no limit)."""
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
