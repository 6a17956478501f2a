"""The CPUs a process may use: its affinity, capped by its cgroup's CPU quota."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from faultline._util.cpus import usable_cpus

AFFINITY = len(os.sched_getaffinity(0))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="ascii")


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [
        ("max 100000\n", AFFINITY),  # no limit
        ("100000 100000\n", 1),
        ("50000 100000\n", 1),  # half a CPU still needs one worker
        ("150000 100000\n", min(AFFINITY, 2)),  # 1.5 CPUs: two
        ("6400000 100000\n", AFFINITY),  # a quota above the affinity: the affinity
        ("garbage\n", AFFINITY),
        ("0 100000\n", AFFINITY),
    ],
)
def test_a_cgroup_v2_quota_caps_the_affinity(tmp_path: Path, cpu_max: str, expected: int) -> None:
    _write(tmp_path / "cpu.max", cpu_max)
    assert usable_cpus(tmp_path) == expected


@pytest.mark.parametrize(
    ("quota", "period", "expected"),
    [("-1", "100000", AFFINITY), ("100000", "100000", 1), ("250000", "100000", min(AFFINITY, 3))],
)
def test_a_cgroup_v1_quota_caps_the_affinity(
    tmp_path: Path, quota: str, period: str, expected: int
) -> None:
    _write(tmp_path / "cpu" / "cpu.cfs_quota_us", quota)
    _write(tmp_path / "cpu" / "cpu.cfs_period_us", period)
    assert usable_cpus(tmp_path) == expected


def test_without_cgroup_files_it_is_the_affinity(tmp_path: Path) -> None:
    assert usable_cpus(tmp_path / "none") == AFFINITY
