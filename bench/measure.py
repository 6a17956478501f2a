"""Measuring processes: wall time, peak memory of a process tree, CPU load, the machine.

``run_measured`` runs a command and reports its wall time, the peak resident set of the
largest process in its tree that it waited for (``ru_maxrss`` from ``wait4``; a pool's
workers forked by a forkserver are not waited for by the command, so this is in practice the
main process), the peak of the summed resident sets of the whole tree (sampled from ``/proc``
every ``interval`` seconds; shared pages count once per process, so it overstates a forked
pool; the pages of a memory-mapped file that has been read count too), the peak of their
anonymous parts alone (without file-backed and shared pages), the tree's CPU seconds (the
larger of ``wait4``'s figure, which includes the descendants the command waited for, and the
sum of the samples, which may miss a process shorter than ``interval``), and the machine's
busy CPU seconds over the same interval: what is left over is ``other_cpu_seconds``, the
work of other processes that competed for the cores. On a virtual machine,
``steal_cpu_seconds`` is the time the hypervisor gave the cores to someone else.
"""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Measured:
    """What one measured process run cost."""

    command: list[str]
    returncode: int
    seconds: float
    maxrss_bytes: int
    tree_rss_peak_bytes: int
    tree_anon_peak_bytes: int
    tree_cpu_seconds: float
    machine_busy_cpu_seconds: float
    other_cpu_seconds: float
    steal_cpu_seconds: float
    load_before: list[float] = field(default_factory=list)
    load_after: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _processes() -> dict[int, tuple[int, int]]:
    """Every process: pid -> (parent pid, CPU ticks used so far)."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return table


def tree_usage(root: int, cpu: dict[int, int] | None = None) -> tuple[int, int]:
    """The summed resident sets of ``root`` and its descendants, and their anonymous parts.

    The anonymous part is the resident set less its file-backed and shared pages: the pages
    of a memory-mapped file that has been read count in the resident set, not in it.

    Args:
        root: The process at the top of the tree.
        cpu: Updated with the CPU ticks of every process seen in the tree.

    Returns:
        Resident and anonymous bytes.
    """
    table = _processes()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    total, private, todo = 0, 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, ()))
        if cpu is not None and pid in table:
            cpu[pid] = max(cpu.get(pid, 0), table[pid][1])
        try:
            with open(f"/proc/{pid}/statm", "rb") as handle:
                fields = handle.read().split()
        except OSError:
            continue
        total += int(fields[1]) * PAGE
        private += (int(fields[1]) - int(fields[2])) * PAGE
    return total, private


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds since boot: spent busy in this machine, and stolen by its hypervisor."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]] + [0] * 8
    busy = sum(fields[:7]) - fields[3] - fields[4]  # user .. softirq, without idle and iowait
    return busy / TICK, fields[7] / TICK


class _Sampler(threading.Thread):
    def __init__(self, pid: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak, self.anon_peak = pid, interval, 0, 0
        self.cpu: dict[int, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            resident, anon = tree_usage(self.pid, self.cpu)
            self.peak = max(self.peak, resident)
            self.anon_peak = max(self.anon_peak, anon)
            self.done.wait(self.interval)


def run_measured(
    command: list[str], *, log: Path | None = None, interval: float = 0.2, env: Any = None
) -> Measured:
    """Run ``command`` to completion and measure it (stdout and stderr go to ``log``)."""
    load_before = list(os.getloadavg())
    busy0, steal0 = cpu_seconds()
    sink = log.open("wb") if log is not None else subprocess.DEVNULL
    try:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
        sampler = _Sampler(proc.pid, interval)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        sampler.done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if log is not None:
            sink.close()  # type: ignore[union-attr]
    # wait4's usage includes the descendants the command itself waited for (Dask's workers,
    # say) but not those reaped elsewhere (a forkserver's pool); the samples see every live
    # process. Their larger sum counts each process once.
    tree_cpu = max(usage.ru_utime + usage.ru_stime, sum(sampler.cpu.values()) / TICK)
    busy1, steal1 = cpu_seconds()
    busy = busy1 - busy0
    return Measured(
        command=[str(c) for c in command],
        returncode=proc.returncode,
        seconds=seconds,
        maxrss_bytes=usage.ru_maxrss * 1024,
        tree_rss_peak_bytes=sampler.peak,
        tree_anon_peak_bytes=sampler.anon_peak,
        tree_cpu_seconds=tree_cpu,
        machine_busy_cpu_seconds=busy,
        other_cpu_seconds=max(0.0, busy - tree_cpu),
        steal_cpu_seconds=steal1 - steal0,
        load_before=load_before,
        load_after=list(os.getloadavg()),
    )


def peak_rss_self() -> int:
    """This process's peak resident set, in bytes (VmHWM, else ``ru_maxrss``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def rss_self() -> int:
    """This process's current resident set, in bytes."""
    with open("/proc/self/statm", "rb") as handle:
        return int(handle.read().split()[1]) * PAGE


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set to its current one (Linux ``clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def machine() -> dict[str, Any]:
    """The machine the benchmark runs on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "ram_bytes": ram,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "os": _os_name(),
        "kernel": platform.release(),
        "load_average": list(os.getloadavg()),
    }


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


def git_state(root: Path) -> dict[str, Any]:
    """The commit the benchmark measured and whether the tree had local changes."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    changed = [line[3:] for line in git("status", "--porcelain").splitlines()]
    return {
        "commit": git("rev-parse", "HEAD") or None,
        "dirty": [p for p in changed if p.startswith("src/")],
        "src_sha256": package_digest(root / "src" / "faultline"),
    }


def package_digest(package: Path) -> str:
    """SHA-256 over the paths and bytes of a package's files: which code was measured."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            name = str(path.relative_to(package.parent.parent))
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
