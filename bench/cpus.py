"""Pins benchmark processes to CPUs: the measured one (the gateway bound or worker, the live Spark application) gets a
core of its own, the rest share the others, so a figure does not pay for the work around it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CpuPlan:
    measured: set[int]   # the core of the bound and of the gateway worker
    others: set[int]     # broker, registry, supervisor and the load generator

    def describe(self) -> str:
        return f"measured process on CPU {sorted(self.measured)}, everything else on CPUs {sorted(self.others)}"


def plan(enabled: bool) -> CpuPlan | None:
    """Core 0 for the measured process, the rest for the others; None with fewer than two usable CPUs."""
    if not enabled or not hasattr(os, "sched_getaffinity"):
        return None
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        return None
    return CpuPlan({usable[0]}, set(usable[1:]))


def pin_process_tree(pid: int, cpus: set[int]) -> int:
    """Every thread of `pid` and of its descendants to `cpus` (threads started later inherit the mask of the thread
    that starts them). Returns how many threads were pinned."""
    pinned = 0
    for proc in [pid, *descendants(pid)]:
        pinned += pin_threads(proc, cpus)
    return pinned


def pin_threads(pid: int, cpus: set[int]) -> int:
    pinned = 0
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return 0
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
            pinned += 1
        except (ProcessLookupError, PermissionError):
            continue
    return pinned


def descendants(pid: int) -> list[int]:
    """Children, grandchildren, ... of `pid` (from /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
