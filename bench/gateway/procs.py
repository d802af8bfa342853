"""The processes of a gateway benchmark's stack: which to measure, and their CPU pinning."""

from __future__ import annotations

import os
from dataclasses import dataclass

from bench import cpus
from stack.config import StackConfig
from stack.launcher import Stack
from stack.services import services


@dataclass(frozen=True)
class Procs:
    """The processes whose CPU a gateway benchmark measures."""

    workers: list[int]  # the gateway's worker processes
    broker: int         # the Kafka broker's JVM


def procs_of(stack: Stack, cfg: StackConfig) -> Procs:
    """The gateway's worker processes and the broker's JVM of a running stack."""
    gateway = next((s.process(cfg).pid() for s in services(cfg) if s.name == "gateway"), None)
    workers = (cpus.descendants(gateway) or [gateway]) if gateway else []
    return Procs([w for w in workers if w], stack.kafka.node(1).process.pid() or 0)


def pin(stack: Stack, cfg: StackConfig, enabled: bool | None = None,
        measured: str = "{n} gateway worker(s)") -> cpus.CpuPlan | None:
    """Pin the gateway's workers to the measured core and everything else to the others (bench/cpus.py); None
    when not pinning (fewer than two CPUs, or `enabled` false: by default HEADWATER_BENCH_PIN=0). `measured`
    names what runs on the measured core in the line printed ({n}: the gateway's workers)."""
    if enabled is None:
        enabled = os.environ.get("HEADWATER_BENCH_PIN", "1") != "0"
    plan = cpus.plan(enabled)
    if plan is None:
        print("not pinning CPUs (fewer than two, or HEADWATER_BENCH_PIN=0)", flush=True)
        return None
    others = [p for p in (stack.kafka.node(1).process.pid(), *(s.process(cfg).pid() for s in services(cfg))) if p]
    for pid in others:
        cpus.pin_process_tree(pid, plan.others)
    gateway = next((s.process(cfg).pid() for s in services(cfg) if s.name == "gateway"), None)
    # One worker runs in the gateway's own process; several are children of a supervisor.
    workers = (cpus.descendants(gateway) or [gateway]) if gateway else []
    for pid in workers:
        cpus.pin_threads(pid, plan.measured)
    cpus.pin_threads(os.getpid(), plan.others)
    print(f"pinning: {plan.describe()} ({measured.format(n=len(workers))})", flush=True)
    return plan
