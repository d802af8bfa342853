"""`python -m bench.gateway.variants`: what each gateway optimisation buys, A/B in one run on one private broker.

Each variant is the gateway started with a set of tuning variables (`docs/gateway.md`, "Tuning"): the generated
Avro encoder or fastavro's writer, uvloop or asyncio's loop, the minimum interval between transactions, the
producer's compression. Rounds run every variant in turn (interleaved, so a slower minute of this shared machine
hits all of them), each a fresh one-worker gateway pinned alone on one core, measured with:

- closed-loop throughput (HEADWATER_BENCH_CONCURRENCY keep-alive connections, default 64) with the worker's and
  the broker JVM's CPU seconds over it: gateway µs per event, broker ms per 1,000 events, events per CPU-second
  of gateway + broker;
- p50 / p99 ack latency at one common open-loop rate (HEADWATER_BENCH_RATE events/s; default half the first
  variant's throughput in the first round).

Ends with one JSON line (`bench: gateway-variants`) for `python -m bench.report --add`. Variables:
HEADWATER_BENCH_SECONDS (default 6), HEADWATER_BENCH_ROUNDS (2), HEADWATER_BENCH_KIND (json or avro),
HEADWATER_BENCH_VARIANTS (comma-separated names, default all), HEADWATER_BENCH_WARM_S (longest broker warm-up
before the first variant, default 120: bench/gateway/warm.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench import cpus
from bench.gateway.costs import cpu_seconds
from bench.gateway.load import at_rate, percentile, sustained, transactions
from bench.gateway.procs import pin, procs_of
from bench.gateway.schemas import schema_cache, schema_doc
from bench.gateway.warm import WARM_TOPIC, warm_broker
from bench.gateway.workload import EVENTS_PER_BATCH, Workload
from bench.private_stack import stack_config
from common.ports import free_port
from common.write_keys import key_entry
from stack.launcher import Stack
from stack.topics import EVENTS_TOPIC, TopicSpec, ensure_topics, topic_specs

ROOT = Path(__file__).resolve().parents[2]
_BEFORE = {"HEADWATER_GATEWAY_AVRO_CODEGEN": "0", "HEADWATER_GATEWAY_UVLOOP": "0",
           "HEADWATER_GATEWAY_COMMIT_MIN_INTERVAL_MS": "0", "HEADWATER_GATEWAY_KAFKA_COMPRESSION": "zstd",
           "HEADWATER_GATEWAY_KAFKA_LINGER_MS": "1", "HEADWATER_GATEWAY_COMMIT_BUSY_CPU": "0"}
# Each variant adds one change to the one before it (the last three compare compressions on the full set).
VARIANTS: dict[str, dict[str, str]] = {
    "before": _BEFORE,
    "codegen": {**_BEFORE, "HEADWATER_GATEWAY_AVRO_CODEGEN": "1"},
    "uvloop": {**_BEFORE, "HEADWATER_GATEWAY_AVRO_CODEGEN": "1", "HEADWATER_GATEWAY_UVLOOP": "1"},
    "interval10": {**_BEFORE, "HEADWATER_GATEWAY_AVRO_CODEGEN": "1", "HEADWATER_GATEWAY_UVLOOP": "1",
                   "HEADWATER_GATEWAY_COMMIT_MIN_INTERVAL_MS": "10"},
    "interval25": {**_BEFORE, "HEADWATER_GATEWAY_AVRO_CODEGEN": "1", "HEADWATER_GATEWAY_UVLOOP": "1",
                   "HEADWATER_GATEWAY_COMMIT_MIN_INTERVAL_MS": "25"},
    "lz4": {**_BEFORE, "HEADWATER_GATEWAY_AVRO_CODEGEN": "1", "HEADWATER_GATEWAY_UVLOOP": "1",
            "HEADWATER_GATEWAY_COMMIT_MIN_INTERVAL_MS": "10", "HEADWATER_GATEWAY_KAFKA_COMPRESSION": "lz4"},
    "none": {**_BEFORE, "HEADWATER_GATEWAY_AVRO_CODEGEN": "1", "HEADWATER_GATEWAY_UVLOOP": "1",
             "HEADWATER_GATEWAY_COMMIT_MIN_INTERVAL_MS": "10", "HEADWATER_GATEWAY_KAFKA_COMPRESSION": "none",
             "HEADWATER_GATEWAY_COMMIT_LANES": "1", "HEADWATER_GATEWAY_COMMIT_BUSY_INTERVAL_MS": "0"},
}
# Issue 28's changes, each on the defaults of the one before ("none" above is where they start).
_ISSUE22 = VARIANTS["none"]
VARIANTS.update({
    "lanes2": {**_ISSUE22, "HEADWATER_GATEWAY_COMMIT_LANES": "2"},
    "lanes3": {**_ISSUE22, "HEADWATER_GATEWAY_COMMIT_LANES": "3"},
    "lanes2_i20": {**_ISSUE22, "HEADWATER_GATEWAY_COMMIT_LANES": "2", "HEADWATER_GATEWAY_COMMIT_MIN_INTERVAL_MS": "20"},
    "busy50": {**_ISSUE22, "HEADWATER_GATEWAY_COMMIT_LANES": "2", "HEADWATER_GATEWAY_COMMIT_BUSY_INTERVAL_MS": "50"},
    "busy100": {**_ISSUE22, "HEADWATER_GATEWAY_COMMIT_LANES": "2", "HEADWATER_GATEWAY_COMMIT_BUSY_INTERVAL_MS": "100"},
    # The ack-latency work of issue 28, each on "busy50" (the defaults before it).
    "linger100": {**_ISSUE22, "HEADWATER_GATEWAY_COMMIT_LANES": "2", "HEADWATER_GATEWAY_COMMIT_BUSY_INTERVAL_MS": "50",
                  "HEADWATER_GATEWAY_KAFKA_LINGER_MS": "100"},
    "busy_cpu": {**_ISSUE22, "HEADWATER_GATEWAY_COMMIT_LANES": "2", "HEADWATER_GATEWAY_COMMIT_BUSY_INTERVAL_MS": "50",
                 "HEADWATER_GATEWAY_KAFKA_LINGER_MS": "100", "HEADWATER_GATEWAY_COMMIT_BUSY_CPU": "0.85"},
    "cpu_lanes3": {**_ISSUE22, "HEADWATER_GATEWAY_COMMIT_LANES": "3", "HEADWATER_GATEWAY_COMMIT_BUSY_INTERVAL_MS": "50",
                   "HEADWATER_GATEWAY_KAFKA_LINGER_MS": "100", "HEADWATER_GATEWAY_COMMIT_BUSY_CPU": "0.85"},
    "cpu_lanes4": {**_ISSUE22, "HEADWATER_GATEWAY_COMMIT_LANES": "4", "HEADWATER_GATEWAY_COMMIT_BUSY_INTERVAL_MS": "50",
                   "HEADWATER_GATEWAY_KAFKA_LINGER_MS": "100", "HEADWATER_GATEWAY_COMMIT_BUSY_CPU": "0.85"},
})


def _start(env: dict[str, str], knobs: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc_env = {**os.environ, "KAFKA_BOOTSTRAP": env["KAFKA_BOOTSTRAP"], "REGISTRY_URL": env["REGISTRY_URL"],
                "HEADWATER_GATEWAY_WRITE_KEYS": key_entry(env["HEADWATER_WRITE_KEY"], "dev"),
                "HEADWATER_GATEWAY_PORT": str(port), "HEADWATER_GATEWAY_WORKERS": "1",
                "HEADWATER_GATEWAY_LOG_LEVEL": os.environ.get("HEADWATER_BENCH_GATEWAY_LOG_LEVEL", "WARNING"),
                "HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX": f"headwater-bench-variant-{port}", **knobs}
    proc = subprocess.Popen([sys.executable, "-m", "gateway"], cwd=ROOT, env=proc_env)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("a variant gateway did not become ready")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _one(env: dict[str, str], knobs: dict[str, str], workload: Workload, *, kind: str, count: int,
         concurrency: int, rate: float | None, plan: cpus.CpuPlan | None, broker: int) -> dict[str, float]:
    port = free_port()
    proc = _start(env, knobs, port)
    try:
        if plan is not None:
            cpus.pin_threads(proc.pid, plan.measured)
        base = f"http://127.0.0.1:{port}"
        url, key = f"{base}/v1/batch", env["HEADWATER_WRITE_KEY"]
        asyncio.run(sustained(url, key, workload.bodies(kind, 40), concurrency))  # warm-up
        w0, b0, t0 = cpu_seconds(proc.pid), cpu_seconds(broker), transactions(base)
        load = asyncio.run(sustained(url, key, workload.bodies(kind, count), concurrency))
        worker, brk, t1 = cpu_seconds(proc.pid) - w0, cpu_seconds(broker) - b0, transactions(base)
        batches_per_s = (rate or load.events_per_s / 2) / EVENTS_PER_BATCH
        b1 = cpu_seconds(broker)
        half = asyncio.run(at_rate(url, key, workload.bodies(kind, max(40, int(batches_per_s * 6))), batches_per_s))
        brk_rate, t2 = cpu_seconds(broker) - b1, transactions(base)
    finally:
        _stop(proc)
    events = max(1, load.events)
    return {"events_per_s": load.events_per_s, "gateway_us_per_event": worker * 1e6 / events,
            "broker_ms_per_1000": brk * 1e6 / events, "events_per_cpu_s": events / max(1e-9, worker + brk),
            "batches_per_txn": (t1[1] - t0[1]) / max(1.0, t1[0] - t0[0]),
            "errors": load.errors + half.errors, "rate": batches_per_s * EVENTS_PER_BATCH,
            "rate_broker_ms_per_1000": brk_rate * 1e6 / max(1, half.events),
            "rate_batches_per_txn": (t2[1] - t1[1]) / max(1.0, t2[0] - t1[0]),
            "p50_ms": percentile(half.latencies_ms, 0.5), "p99_ms": percentile(half.latencies_ms, 0.99)}


def _summary(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per variant: the mean of its rounds (errors summed)."""
    out = {k: round(sum(r[k] for r in runs) / len(runs), 2) for k in runs[0] if k != "errors"}
    out["errors"] = sum(r["errors"] for r in runs)
    return out


def main() -> int:
    seconds = int(os.environ.get("HEADWATER_BENCH_SECONDS", "6"))
    rounds = int(os.environ.get("HEADWATER_BENCH_ROUNDS", "2"))
    kind = os.environ.get("HEADWATER_BENCH_KIND", "json")
    concurrency = int(os.environ.get("HEADWATER_BENCH_CONCURRENCY", "64"))
    names = [n for n in os.environ.get("HEADWATER_BENCH_VARIANTS", ",".join(VARIANTS)).split(",") if n]
    rate_env = os.environ.get("HEADWATER_BENCH_RATE")
    rate = float(rate_env) if rate_env else None
    os.environ["HEADWATER_GATEWAY_WORKERS"] = "1"
    results: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="headwater-bench-") as state:
        cfg = stack_config(state)
        stack = Stack(cfg)
        try:
            print("starting a private stack (Kafka, registry) ...", flush=True)
            env = stack.up().env
            plan = pin(stack, cfg)
            broker = procs_of(stack, cfg).broker
            spec = next(s for s in topic_specs(cfg) if s.name == EVENTS_TOPIC)
            ensure_topics(cfg.bootstrap, [TopicSpec(WARM_TOPIC, spec.partitions, spec.config)])
            warm_s = float(os.environ.get("HEADWATER_BENCH_WARM_S", "120"))
            warm = warm_broker(cfg.bootstrap, broker, max_seconds=warm_s, min_transactions=2000 if warm_s else 0)
            print(f"broker warmed by {warm.transactions} transactions: {warm.first_ms_per_txn} -> "
                  f"{warm.last_ms_per_txn} ms of its CPU per transaction", flush=True)
            cache = asyncio.run(schema_cache(env["REGISTRY_URL"]))
            latest = cache.by_version(cache.routes["page_view"], None)
            assert latest is not None
            workload = Workload(json.dumps(schema_doc(env["REGISTRY_URL"], latest.schema_id)), latest.schema_id)
            count = int(os.environ.get("HEADWATER_BENCH_BATCHES", "0")) or max(100, seconds * 150)
            for r in range(rounds):
                for name in names if r % 2 == 0 else list(reversed(names)):
                    res = _one(env, VARIANTS[name], workload, kind=kind, count=count, concurrency=concurrency,
                               rate=rate, plan=plan, broker=broker)
                    rate = rate or res["rate"]
                    results[name].append(res)
                    print(f"round {r + 1} {name:11} {res['events_per_s']:8,.0f} ev/s  gateway "
                          f"{res['gateway_us_per_event']:6.1f} µs/ev  broker {res['broker_ms_per_1000']:6.1f} "
                          f"ms/1k  {res['batches_per_txn']:5.1f} b/txn  "
                          f"p50/p99 {res['p50_ms']:6.1f}/{res['p99_ms']:6.1f} "
                          f"ms at {res['rate']:,.0f} ev/s (broker {res['rate_broker_ms_per_1000']:6.1f} ms/1k, "
                          f"{res['rate_batches_per_txn']:4.1f} b/txn)",
                          flush=True)
        finally:
            stack.down()
    _report(results, kind, names)
    return 0


def _report(results: dict[str, list[dict[str, float]]], kind: str, names: list[str]) -> None:
    summary = {n: _summary(results[n]) for n in names}
    base = summary[names[0]]
    print(f"\n{'variant':11} {'ev/s':>8} {'gw µs/ev':>9} {'broker ms/1k':>13} {'ev/CPU-s gw+broker':>19} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'per-CPU x':>10}")
    for n in names:
        s = summary[n]
        gain = base["gateway_us_per_event"] / s["gateway_us_per_event"] if s["gateway_us_per_event"] else 0
        s["gateway_cpu_gain"] = round(gain, 2)
        s["system_cpu_gain"] = round(s["events_per_cpu_s"] / base["events_per_cpu_s"], 2)
        print(f"{n:11} {s['events_per_s']:8,.0f} {s['gateway_us_per_event']:9.1f} {s['broker_ms_per_1000']:13.1f} "
              f"{s['events_per_cpu_s']:19,.0f} {s['p50_ms']:7.1f} {s['p99_ms']:7.1f} {gain:10.2f}")
    line = {"bench": "gateway-variants", "kind": kind, "cpus": os.cpu_count(),
            "variants": [{"name": n, **VARIANTS[n], **summary[n]} for n in names]}
    print(json.dumps(line))


if __name__ == "__main__":
    sys.exit(main())
