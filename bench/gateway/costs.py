"""The cost model: the CPU cost per event of each step the gateway cannot avoid, each measured alone on the same bodies.

Steps: HTTP request handling (an aiohttp server on the gateway's loop whose handler only reads the body and
answers), zstd decompression, envelope decode, property validation, Avro encoding (the generated encoder and
fastavro's writer, side by side), building the records, produce (librdkafka `produce()` + delivery, idempotent,
acks=all, no transaction) and the transaction commit (a transaction per batch and per 10 batches, less the
produce). Figures are CPU microseconds per event of the measuring process (all its threads, librdkafka's
included) or of the server process, so a loaded machine slows them less than it slows wall-clock figures; the
broker's CPU per event is read beside produce and commit (`/proc/<pid>/stat` of the broker JVM).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Producer

from bench import cpus
from bench.gateway.bound import produce_all
from bench.gateway.load import sustained
from bench.gateway.trivial_server import UVLOOP
from bench.gateway.workload import Body
from gateway.avro_batch import decode_avro_batch
from gateway.body import decompress
from gateway.config import Limits
from gateway.ingest import encode_json_event, fastavro_encode, plan_avro, plan_json
from gateway.json_batch import decode_json_batch
from gateway.producer import kafka_config
from gateway.records import KafkaRecord, RequestMeta
from gateway.schema_cache import SchemaCache

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
_TICKS = 100.0  # USER_HZ: /proc/<pid>/stat counts in 1/100 s on Linux


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far, all its threads (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _timed(fn: Callable[[], T], events: int, runs: int = 2) -> tuple[T, float]:
    """fn's result and its CPU µs per event (the least of `runs` runs: noise only ever adds)."""
    best, result = float("inf"), None
    for _ in range(runs):
        t0 = time.process_time()
        result = fn()
        best = min(best, time.process_time() - t0)
    assert result is not None
    return result, best * 1e6 / events


def _meta() -> RequestMeta:
    return RequestMeta.make(str(uuid.uuid4()), int(time.time() * 1000), "bench", "127.0.0.1", "bench/1")


Batches = list[list[KafkaRecord]]


def pipeline_costs(kind: str, bodies: list[Body], cache: SchemaCache) -> tuple[dict[str, float], Batches]:
    """µs per event of the in-process steps, and the records of each batch (for the Kafka steps)."""
    limits, events = Limits(), sum(b.events for b in bodies)
    raws, out = _timed(lambda: [decompress(b.data, "zstd", limits) for b in bodies], events)
    costs = {"decompress": out}
    meta = _meta()
    if kind == "avro":
        avro, costs["envelope"] = _timed(lambda: [decode_avro_batch(r, limits) for r in raws], events)
        plans, costs["validate_and_records"] = _timed(
            lambda: [plan_avro(a, cache, meta, "headwater.deadletter") for a in avro], events)
        return costs, [p.records for p in plans]
    decoded, costs["envelope"] = _timed(lambda: [decode_json_batch(r, limits) for r in raws], events)
    schemas = [[cache.by_version(cache.routes[ev.event_type], ev.schema_version) for ev in evs] for _, evs in decoded]

    def validate() -> list[list[Any]]:
        return [[s.properties_decoder.decode(ev.properties) for ev, s in zip(evs, ss, strict=True) if s]
                for (_, evs), ss in zip(decoded, schemas, strict=True)]

    props, costs["validate"] = _timed(validate, events)

    def generated() -> int:
        n = 0
        for (batch, evs), ss in zip(decoded, schemas, strict=True):
            parts: dict[int, tuple[bytes, ...]] = {}
            n += sum(isinstance(encode_json_event(i, batch, ev, s, meta, parts=parts), bytes)
                     for i, (ev, s) in enumerate(zip(evs, ss, strict=True)) if s)
        return n

    def reference() -> int:
        return sum(isinstance(fastavro_encode(i, batch, ev, s, meta, props=p), bytes)
                   for (batch, evs), ss, ps in zip(decoded, schemas, props, strict=True)
                   for i, (ev, s, p) in enumerate(zip(evs, ss, ps, strict=True)) if s)

    _, with_validate = _timed(generated, events)  # encode_json_event validates again: subtract it
    costs["encode_generated"] = max(0.0, with_validate - costs["validate"])
    _, costs["encode_fastavro"] = _timed(reference, events)
    plans, whole = _timed(lambda: [plan_json(b, evs, cache, meta, "headwater.deadletter") for b, evs in decoded],
                          events)
    costs["records"] = max(0.0, whole - with_validate)
    return costs, [p.records for p in plans]


def kafka_costs(batches: Batches, bootstrap: str, broker_pid: int | None) -> dict[str, float]:
    """µs per event of produce + delivery (with each producer compression), and of the commit at 1 and 10 batches
    per transaction (uncompressed, the gateway's default); the broker's µs per event beside each."""
    events = sum(len(b) for b in batches)
    out: dict[str, float] = {}
    for compression in ("none", "zstd", "lz4"):
        plain = kafka_config(bootstrap, "unused", 10.0, 20.0, compression=compression)
        del plain["transactional.id"]
        suffix = "" if compression == "none" else f"_{compression}"
        out[f"produce{suffix}"], out[f"broker_produce{suffix}"] = _kafka_run(Producer(plain), batches, None,
                                                                             broker_pid)
    for per_txn in (1, 10):
        config = kafka_config(bootstrap, f"headwater-bench-costs-{uuid.uuid4()}", 10.0, 20.0)
        producer = Producer(config)
        producer.init_transactions(30)
        total, broker = _kafka_run(producer, batches, per_txn, broker_pid)
        out[f"commit_{per_txn}"] = max(0.0, total - out["produce"])
        out[f"broker_commit_{per_txn}"] = max(0.0, broker - out["broker_produce"])
    return {k: v * 1e6 / events for k, v in out.items()}


def _kafka_run(producer: Any, batches: Batches, per_txn: int | None,
               broker_pid: int | None) -> tuple[float, float]:
    """(CPU seconds of this process, of the broker) to produce every batch, in transactions of `per_txn` batches."""
    time.sleep(0.5)  # let the broker finish what came before
    t0, b0 = time.process_time(), cpu_seconds(broker_pid) if broker_pid else 0.0
    for i, records in enumerate(batches):
        if per_txn and i % per_txn == 0:
            producer.begin_transaction()
        produce_all(producer, records)
        if per_txn and (i % per_txn == per_txn - 1 or i == len(batches) - 1):
            producer.commit_transaction(30)
    if not per_txn:
        producer.flush(30)
    spent = time.process_time() - t0
    time.sleep(0.5)  # the broker's last writes and log flushes of this run
    return spent, (cpu_seconds(broker_pid) - b0) if broker_pid else 0.0


def http_cost(bodies: list[Body], key: str, port: int, plan: cpus.CpuPlan | None, concurrency: int, *,
              uvloop: bool = True) -> float:
    """Server CPU µs per event of a trivial aiohttp server (bench/gateway/trivial_server.py) under the same load."""
    env = {**os.environ, UVLOOP: "1" if uvloop else "0"}
    server = subprocess.Popen([sys.executable, "-m", "bench.gateway.trivial_server", str(port)], cwd=ROOT, env=env)
    try:
        url = f"http://127.0.0.1:{port}/v1/batch"
        deadline = time.monotonic() + 30
        while not asyncio.run(_answers(url)):
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the trivial HTTP server did not start")
            time.sleep(0.2)
        if plan is not None:
            cpus.pin_threads(server.pid, plan.measured)
        asyncio.run(sustained(url, key, bodies[: max(1, len(bodies) // 4)], concurrency))  # warm-up
        c0 = cpu_seconds(server.pid)
        result = asyncio.run(sustained(url, key, bodies, concurrency))
        spent = cpu_seconds(server.pid) - c0
        return spent * 1e6 / max(1, result.events)
    finally:
        server.terminate()
        server.wait(10)


async def _answers(url: str) -> bool:
    import aiohttp  # noqa: PLC0415

    try:
        async with aiohttp.ClientSession() as session, session.post(url, data=b"x") as resp:
            return resp.status == 200
    except aiohttp.ClientError:
        return False


_ROWS = [("http", "HTTP request handling (trivial aiohttp handler)"), ("decompress", "zstd decompression"),
         ("envelope", "envelope decode"), ("validate", "property validation (msgspec)"),
         ("encode_generated", "Avro encoding, generated encoder"), ("records", "records + headers"),
         ("validate_and_records", "Avro read-check + records + headers"),
         ("produce", "produce + delivery (librdkafka, uncompressed)"),
         ("commit_10", "transaction commit, 10 batches/txn")]
_ASIDE = [("encode_fastavro", "(Avro encoding, fastavro writer + to_builtins)"),
          ("http_asyncio", "(HTTP request handling on asyncio's own loop)"),
          ("produce_zstd", "(produce + delivery, zstd)"), ("produce_lz4", "(produce + delivery, lz4)"),
          ("commit_1", "(transaction commit, 1 batch/txn)")]


def floor(costs: dict[str, float]) -> float:
    """The sum of the unavoidable steps (one encoder, commit at 10 batches per transaction)."""
    return sum(costs.get(key, 0.0) for key, _ in _ROWS)


def render(kind: str, costs: dict[str, float], gateway_us: float | None) -> str:
    """The cost table of one path beside the gateway's own CPU µs per event."""
    lines = [f"[{kind}] cost model, CPU µs per event (each step alone):"]
    for key, label in [*_ROWS, *_ASIDE]:
        if key in costs:
            broker = costs.get(f"broker_{key}")
            extra = f"   broker {broker:6.1f}" if broker is not None else ""
            lines.append(f"  {label:52} {costs[key]:7.1f}{extra}")
    total = floor(costs)
    lines.append(f"  {'sum of the steps':52} {total:7.1f}")
    if gateway_us:
        lines.append(f"  {'the gateway (worker CPU per event under load)':52} {gateway_us:7.1f}"
                     f"   = {gateway_us / total:.2f} x the sum" if total else "")
    return "\n".join(lines)
