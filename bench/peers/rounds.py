"""One measured side of a round: a closed-loop phase with the CPU of the server and the broker over the same window,
then an open-loop phase at the common rate for the ack latency."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.gateway.load import at_rate, percentile, sustained, transactions
from bench.gateway.workload import EVENTS_PER_BATCH, Body
from bench.peers.procs import cpu_seconds


@dataclass(frozen=True)
class Side:
    """A server under test: its URL, the key it wants, and the root of its process tree."""

    name: str          # "gateway" or "peer"
    url: str
    key: str
    pid: Callable[[], int | None]


def broker_idle_cores(broker_pid: int | None, seconds: float = 5.0) -> float:
    """The broker's CPU while nothing is sent (timers, metadata, the log cleaner): its fixed cost per second."""
    b0, t0 = cpu_seconds(broker_pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(broker_pid) - b0) / (time.monotonic() - t0)


def sustained_phase(side: Side, broker_pid: int | None, bodies: list[Body], concurrency: int) -> dict[str, Any]:
    """Every body once by `concurrency` keep-alive connections; events/s and the CPU it cost (`net_of_idle`
    adds the broker's cost net of its idle CPU once that is known)."""
    server_pid = side.pid()
    txn0 = _transactions(side)
    s0, b0, t0 = cpu_seconds(server_pid), cpu_seconds(broker_pid), time.monotonic()
    load = asyncio.run(sustained(side.url, side.key, bodies, concurrency))
    server_cpu = cpu_seconds(server_pid) - s0
    broker_cpu = cpu_seconds(broker_pid) - b0
    wall = time.monotonic() - t0
    txn1 = _transactions(side)
    events = (load.batches - load.errors) * EVENTS_PER_BATCH
    extra = {}
    if txn0 is not None and txn1 is not None and txn1[0] > txn0[0]:
        extra = {"transactions_per_s": round((txn1[0] - txn0[0]) / wall, 1),
                 "batches_per_transaction": round((txn1[1] - txn0[1]) / (txn1[0] - txn0[0]), 1)}
    return {
        "events_per_s": round(load.events_per_s),
        "server_cpu_s": round(server_cpu, 2), "broker_cpu_s": round(broker_cpu, 2),
        "events_per_server_cpu_s": round(events / server_cpu) if server_cpu else None,
        "events_per_system_cpu_s": round(events / (server_cpu + broker_cpu)) if server_cpu + broker_cpu else None,
        "broker_ms_per_1k_events": round(broker_cpu * 1e6 / events, 2) if events else None,
        "server_ms_per_1k_events": round(server_cpu * 1e6 / events, 2) if events else None,
        "errors": load.errors, "events": events, "wall_s": round(wall, 2), **extra,
    }


def _transactions(side: Side) -> tuple[float, float] | None:
    """The gateway's transactions and the batches they carried so far (None for the peer, which has none)."""
    if not side.name.startswith("gateway"):
        return None
    return transactions(side.url.rsplit("/v1/", 1)[0])


def net_of_idle(row: dict[str, Any], idle_cores: float) -> None:
    """The broker's CPU per 1,000 events less what it burns idle over the same wall time (its fixed cost, which
    weighs more on the slower side's longer phase)."""
    net = max(0.0, row["broker_cpu_s"] - idle_cores * row["wall_s"])
    row["broker_net_ms_per_1k_events"] = round(net * 1e6 / row["events"], 2) if row["events"] else None


def latency_phase(side: Side, bodies: list[Body], events_per_s: float) -> dict[str, Any]:
    """Open loop: one body every 40/`events_per_s` seconds whatever the answers; p50/p99 of the acks."""
    load = asyncio.run(at_rate(side.url, side.key, bodies, events_per_s / EVENTS_PER_BATCH))
    return {
        "rate_events_per_s": round(load.events_per_s),
        "p50_ms": round(percentile(load.latencies_ms, 0.50), 2),
        "p99_ms": round(percentile(load.latencies_ms, 0.99), 2),
        "rate_errors": load.errors,
    }


RATIO_KEYS = ("events_per_s", "events_per_server_cpu_s", "events_per_system_cpu_s")


def ratios(gateway: dict[str, Any], peer: dict[str, Any]) -> dict[str, float | None]:
    """gateway ÷ peer of each throughput figure; the broker's cost and the latency as peer-relative too."""
    out: dict[str, float | None] = {}
    for key in (*RATIO_KEYS, "broker_ms_per_1k_events", "broker_net_ms_per_1k_events", "p50_ms", "p99_ms"):
        g, p = gateway.get(key), peer.get(key)
        out[key] = round(g / p, 3) if isinstance(g, (int, float)) and isinstance(p, (int, float)) and p else None
    return out


def median(values: list[float | None]) -> float | None:
    known = sorted(v for v in values if v is not None)
    if not known:
        return None
    mid = len(known) // 2
    return known[mid] if len(known) % 2 else round((known[mid - 1] + known[mid]) / 2, 3)


def capacity(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Cores per 10 k events/s at saturation, each side's median over rounds: the server's (10 k ÷ events per
    server CPU-second) and the broker's (its CPU-seconds per event × 10 k, net of its idle cost when measured)."""
    out: dict[str, float | None] = {}
    for side in ("gateway", "gateway-avro", "peer"):
        mine = [r for r in rows if r["side"] == side]
        if not mine:
            continue
        per_cpu = median([r["events_per_server_cpu_s"] for r in mine])
        broker = median([r.get("broker_net_ms_per_1k_events", r["broker_ms_per_1k_events"]) for r in mine])
        key = side.replace("-", "_")
        out[f"{key}_server_cores"] = round(10_000 / per_cpu, 2) if per_cpu else None
        out[f"{key}_broker_cores"] = round(broker / 100, 2) if broker is not None else None
    return out


# Issue 28's targets: the ratios are medians over rounds, the latencies must hold in every round.
P50_MS, HALF_OWN_P99_MS, SERVER_RATIO, SYSTEM_RATIO, BROKER_RATIO, AVRO_OVER_JSON = 15.0, 50.0, 3.0, 2.5, 1.2, 2.0


def targets(rows: list[dict[str, Any]], ratio_rows: list[dict[str, Any]]) -> dict[str, bool]:
    """Each target of the gateway against the peer, per path (json, avro): True when met."""
    out: dict[str, bool] = {}
    peer = {r["round"]: r for r in rows if r["side"] == "peer"}
    for path, side in (("json", "gateway"), ("avro", "gateway-avro")):
        mine = [r for r in rows if r["side"] == side]
        med = next((r for r in ratio_rows if r.get("path", "json") == path and r["round"] == "median"), None)
        if not mine or med is None:
            continue
        out[f"{path}_server_cpu_ratio_3"] = (med["events_per_server_cpu_s"] or 0) >= SERVER_RATIO
        out[f"{path}_system_cpu_ratio_2_5"] = (med["events_per_system_cpu_s"] or 0) >= SYSTEM_RATIO
        out[f"{path}_broker_per_event_1_2_of_peer"] = (med["broker_ms_per_1k_events"] or 99) <= BROKER_RATIO
        out[f"{path}_p99_at_common_rate_le_peer_every_round"] = all(
            r.get("p99_ms") is not None and r["p99_ms"] <= peer[r["round"]]["p99_ms"] for r in mine)
        out[f"{path}_p50_at_common_rate_le_15ms_every_round"] = all((r.get("p50_ms") or 1e9) <= P50_MS for r in mine)
        out[f"{path}_p99_at_half_own_saturation_le_50ms_every_round"] = all(
            (r.get("half_own_p99_ms") or 1e9) <= HALF_OWN_P99_MS for r in mine)
    json_rows = {r["round"]: r for r in rows if r["side"] == "gateway"}
    avro: list[float | None] = [
        r["events_per_server_cpu_s"] / json_rows[r["round"]]["events_per_server_cpu_s"] for r in rows
        if r["side"] == "gateway-avro" and r["events_per_server_cpu_s"]
        and json_rows.get(r["round"], {}).get("events_per_server_cpu_s")]
    if avro:
        out["avro_over_json_per_gateway_cpu_2"] = (median(avro) or 0) >= AVRO_OVER_JSON
    return out
