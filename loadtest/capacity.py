"""Capacity model: gateway cores and instances, connection memory and Kafka partitions for N nodes at a rate.

    python -m loadtest.capacity --nodes 100000 --events 40 --interval 10 [--results loadtest/results]

Inputs measured here (`curve.json` from `loadtest.curve`, `connections.json` from `loadtest.connections`, mean
Kafka value size from a reconciliation): gateway events per CPU-second, the ack-latency-versus-load curve, and
memory per keep-alive connection. Inputs assumed (flags, documented in loadtest/README.md): cores per gateway
instance, spare instances, per-partition write and read throughput, broker count. The arithmetic is in pure
functions (`plan`), unit-tested in tests/loadtest/test_capacity.py.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loadtest.curve import RESULTS_DIR

MAX_PLANNED_UTILIZATION = 0.7
FALLBACK_UTILIZATION = 0.5


@dataclass(frozen=True)
class Measured:
    """What this repository's scripts measured."""

    events_per_core_s: float     # acknowledged events per gateway CPU-second (JSON path, zstd, 40-event batches)
    utilization: float           # planned busy fraction of a gateway core (from the latency curve)
    bytes_per_connection: float  # gateway RSS per idle keep-alive connection
    mean_event_bytes: float      # Confluent-framed Avro value size in Kafka


@dataclass(frozen=True)
class Assumptions:
    """What the model cannot measure on one machine; each has a flag."""

    cores_per_instance: int = 4
    spare_instances: int = 1                 # N+1: one instance may fail or be redeployed
    partition_write_mb_s: float = 10.0       # sustained produce throughput one partition is planned for
    partition_read_events_s: float = 20_000  # events/s one pipeline task (one partition) is planned to decode
    brokers: int = 3                         # partitions are rounded up to a multiple of this
    connections_per_node: int = 1            # the SDK's keep-alive pool per node


@dataclass(frozen=True)
class Plan:
    """The answer for one fleet."""

    nodes: int
    events_per_s: float
    batches_per_s: float
    mb_per_s: float
    nodes_per_core: float
    gateway_cores: int
    instances: int
    connections_per_instance: int
    connection_mib_per_instance: float
    partitions: int
    partitions_by_write: int
    partitions_by_read: int


def plan(nodes: int, events_per_batch: int, interval_s: float, measured: Measured, assume: Assumptions) -> Plan:
    """Gateway cores and instances, connection memory and partitions for `nodes` each sending a batch per interval."""
    if nodes < 1 or events_per_batch < 1 or interval_s <= 0:
        raise ValueError("nodes, events per batch and interval must be positive")
    if measured.events_per_core_s <= 0 or not 0 < measured.utilization <= 1:
        raise ValueError("events per core must be positive and utilization in (0, 1]")
    events_per_s = nodes * events_per_batch / interval_s
    per_core = measured.events_per_core_s * measured.utilization
    cores = math.ceil(events_per_s / per_core)
    serving = math.ceil(cores / assume.cores_per_instance)
    instances = serving + assume.spare_instances
    connections = math.ceil(nodes * assume.connections_per_node / serving)  # after losing the spare(s)
    mb_per_s = events_per_s * measured.mean_event_bytes / 1e6
    by_write = math.ceil(mb_per_s / assume.partition_write_mb_s)
    by_read = math.ceil(events_per_s / assume.partition_read_events_s)
    partitions = math.ceil(max(by_write, by_read, 1) / assume.brokers) * assume.brokers
    return Plan(
        nodes=nodes, events_per_s=events_per_s, batches_per_s=nodes / interval_s, mb_per_s=mb_per_s,
        nodes_per_core=per_core / (events_per_batch / interval_s), gateway_cores=cores, instances=instances,
        connections_per_instance=connections,
        connection_mib_per_instance=connections * measured.bytes_per_connection / 2**20,
        partitions=partitions, partitions_by_write=by_write, partitions_by_read=by_read,
    )


def events_per_core(points: list[dict[str, Any]], min_cores: float = 0.05) -> float:
    """The median events per gateway CPU-second over the curve's steps that kept the gateway busy enough to tell."""
    values = [p["events_per_core_s"] for p in points if p["gateway_cores"] >= min_cores and p["events_per_core_s"] > 0]
    if not values:
        raise ValueError("no curve point with a measurable gateway CPU time")
    return float(statistics.median(values))


def latency_bounded_utilization(points: list[dict[str, Any]], p99_target_ms: float) -> float:
    """The busiest a gateway process was while its p99 stayed within target, capped at MAX_PLANNED_UTILIZATION.

    Falls back to FALLBACK_UTILIZATION (half of a core, the design's "p99 at half of max load") when no step
    met the target.
    """
    within = [p["gateway_cores"] for p in points if 0 < p["post_p99_ms"] <= p99_target_ms]
    if not within:
        return FALLBACK_UTILIZATION
    return float(min(max(within), MAX_PLANNED_UTILIZATION))


def load_measured(results: Path, utilization: str, p99_target_ms: float, mean_event_bytes: float | None) -> Measured:
    """The model's measured inputs; `utilization` is a fraction, or "curve" to derive it from the latency curve."""
    curve = json.loads((results / "curve.json").read_text())
    conns = json.loads((results / "connections.json").read_text())
    mean_bytes = mean_event_bytes or float(curve.get("mean_event_bytes") or 1400.0)
    planned = (latency_bounded_utilization(curve["points"], p99_target_ms) if utilization == "curve"
               else float(utilization))
    return Measured(events_per_core_s=events_per_core(curve["points"]), utilization=planned,
                    bytes_per_connection=float(conns["idle"]["bytes_per_connection"]), mean_event_bytes=mean_bytes)


def describe(p: Plan, m: Measured, a: Assumptions, events_per_batch: int, interval_s: float) -> str:
    return "\n".join([
        f"fleet: {p.nodes} nodes x {events_per_batch} events every {interval_s:g}s = {p.events_per_s:,.0f} events/s, "
        f"{p.batches_per_s:,.0f} batches/s, {p.mb_per_s:,.1f} MB/s into Kafka",
        f"measured: {m.events_per_core_s:,.0f} events per gateway core-second, planned at {m.utilization:.0%} busy "
        f"-> {m.events_per_core_s * m.utilization:,.0f} events/s per core = {p.nodes_per_core:,.0f} nodes per core",
        f"gateway: {p.gateway_cores} cores = {p.instances} instances of {a.cores_per_instance} cores "
        f"({p.instances - a.spare_instances} serving + {a.spare_instances} spare)",
        f"connections: {p.connections_per_instance:,} keep-alive connections per instance "
        f"x {m.bytes_per_connection / 1024:.1f} KiB = {p.connection_mib_per_instance:,.0f} MiB",
        f"kafka: {p.partitions} partitions of the events topic (write: {p.partitions_by_write} at "
        f"{a.partition_write_mb_s:g} MB/s each; read: {p.partitions_by_read} at {a.partition_read_events_s:,.0f} "
        f"events/s each; rounded up to a multiple of {a.brokers} brokers)",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtest.capacity", description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=40, help="events per batch")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between a node's batches")
    ap.add_argument("--results", type=Path, default=RESULTS_DIR)
    ap.add_argument("--utilization", default=str(FALLBACK_UTILIZATION),
                    help='planned busy fraction of a gateway core, or "curve": the busiest step within --p99-ms')
    ap.add_argument("--p99-ms", type=float, default=100.0, help="ack-latency target for --utilization curve")
    ap.add_argument("--mean-event-bytes", type=float, default=None, help="default: measured (curve.json)")
    for name, field in Assumptions.__dataclass_fields__.items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=type(field.default), default=field.default)
    args = ap.parse_args(argv)
    measured = load_measured(args.results, args.utilization, args.p99_ms, args.mean_event_bytes)
    assume = Assumptions(**{name: getattr(args, name) for name in Assumptions.__dataclass_fields__})
    result = plan(args.nodes, args.events, args.interval, measured, assume)
    print(describe(result, measured, assume, args.events, args.interval))
    out = {"measured": asdict(measured), "assumptions": asdict(assume), "plan": asdict(result)}
    (args.results / "capacity.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
