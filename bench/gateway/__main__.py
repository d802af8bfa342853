"""`python -m bench.gateway` (`make bench`): start a private stack, measure the in-process bound and the gateway
over HTTP for the JSON and Avro paths, then ack latency at half the sustained load; end with one JSON line.

The bound and the gateway worker each run alone on one core (core 0), while the broker, the registry and the
load generator share the others (`bench/cpus.py`): both figures are then per core and neither pays for
the other side's work. Each is the best of two runs (a maximum on a shared, noisy machine).

Variables: HEADWATER_BENCH_SECONDS (length of each sustained phase, default 8), HEADWATER_BENCH_CONCURRENCY
(keep-alive connections of the closed-loop phase, default 64), HEADWATER_GATEWAY_WORKERS (default 1: the
bound is one process, so one worker makes the ratio a per-process figure), HEADWATER_BENCH_PIN (default 1; 0
leaves scheduling to the OS), HEADWATER_BENCH_WARM_S (longest broker warm-up before the first figure, default
120; 0 skips it: bench/gateway/warm.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from typing import Any

from bench import cpus
from bench.gateway import costs as cost_model
from bench.gateway.bound import run_bound
from bench.gateway.load import LoadResult, at_rate, percentile, sustained
from bench.gateway.procs import Procs, pin, procs_of
from bench.gateway.schemas import schema_cache, schema_doc
from bench.gateway.warm import WARM_TOPIC, warm_broker
from bench.gateway.workload import EVENTS_PER_BATCH, Workload
from bench.private_stack import stack_config
from common.ports import free_port
from gateway.loop import loop_name
from gateway.schema_cache import SchemaCache
from stack.config import StackConfig
from stack.launcher import Stack
from stack.topics import EVENTS_TOPIC, TopicSpec, ensure_topics, topic_specs


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        sys.exit(f"bench: {name}={raw!r} is not an integer")


def _bound(kind: str, bodies: list[Any], cache: SchemaCache, bootstrap: str, plan: cpus.CpuPlan | None) -> float:
    """One bound run, on the measured core when pinning (the producer's threads inherit the mask)."""
    if plan is None:
        return run_bound(bodies, cache, bootstrap, kind)
    os.sched_setaffinity(0, plan.measured)
    try:
        return run_bound(bodies, cache, bootstrap, kind)
    finally:
        os.sched_setaffinity(0, plan.others)


def _costs(kind: str, env: dict[str, str], cache: SchemaCache, workload: Workload, *, procs: Procs,
           plan: cpus.CpuPlan | None, concurrency: int) -> dict[str, float]:
    """The cost model of one path (bench/gateway/costs.py), on the measured core like the bound."""
    bodies = workload.bodies(kind, 300)
    if plan is not None:
        os.sched_setaffinity(0, plan.measured)
    try:
        costs, batches = cost_model.pipeline_costs(kind, bodies, cache)
        costs.update(cost_model.kafka_costs(batches, env["KAFKA_BOOTSTRAP"], procs.broker))
    finally:
        if plan is not None:
            os.sched_setaffinity(0, plan.others)
    for uvloop in (True, False):
        costs["http" if uvloop else "http_asyncio"] = cost_model.http_cost(
            workload.bodies(kind, 600), env["HEADWATER_WRITE_KEY"], free_port(), plan, concurrency, uvloop=uvloop)
    return {k: round(v, 2) for k, v in costs.items()}


def _measured(procs: Procs, run: Any) -> tuple[LoadResult, float, float]:
    """A load run with the gateway workers' and the broker's CPU seconds over it."""
    w0, b0 = sum(cost_model.cpu_seconds(p) for p in procs.workers), cost_model.cpu_seconds(procs.broker)
    result: LoadResult = asyncio.run(run)
    return (result, sum(cost_model.cpu_seconds(p) for p in procs.workers) - w0,
            cost_model.cpu_seconds(procs.broker) - b0)


def _phase(kind: str, env: dict[str, str], cache: SchemaCache, workload: Workload, *, seconds: int,
           concurrency: int, plan: cpus.CpuPlan | None, procs: Procs) -> dict[str, Any]:
    url, key = env["GATEWAY_URL"] + "/v1/batch", env["HEADWATER_WRITE_KEY"]
    print(f"[{kind}] in-process bound ...", flush=True)
    pilot = _bound(kind, workload.bodies(kind, 100), cache, env["KAFKA_BOOTSTRAP"], plan)
    count = int(min(6000, max(200, pilot * seconds / EVENTS_PER_BATCH)))
    # Both figures are maxima: the best of two runs of about `seconds` each (this machine is shared and noisy).
    bound = max(pilot, *(_bound(kind, workload.bodies(kind, count), cache, env["KAFKA_BOOTSTRAP"], plan)
                         for _ in range(2)))
    print(f"[{kind}] bound {bound:,.0f} events/s; sustained load with {count} batches, twice ...", flush=True)
    asyncio.run(sustained(url, key, workload.bodies(kind, 50), concurrency))  # warm-up
    runs = [_measured(procs, sustained(url, key, workload.bodies(kind, count), concurrency)) for _ in range(2)]
    load, worker_cpu, broker_cpu = max(runs, key=lambda r: r[0].events_per_s)
    load.errors = sum(r[0].errors for r in runs)
    accepted = float(load.events)
    rate = load.events_per_s / 2 / EVENTS_PER_BATCH
    print(f"[{kind}] gateway {load.events_per_s:,.0f} events/s ({load.errors} errors); "
          f"latency at {rate:.0f} batches/s ...", flush=True)
    half = asyncio.run(at_rate(url, key, workload.bodies(kind, max(50, int(rate * seconds))), rate))
    print(f"[{kind}] cost model ...", flush=True)
    costs = _costs(kind, env, cache, workload, procs=procs, plan=plan, concurrency=concurrency)
    gateway_us = worker_cpu * 1e6 / accepted if accepted else None
    print(cost_model.render(kind, costs, gateway_us), flush=True)
    return {
        "bound_events_per_s": round(bound), "gateway_events_per_s": round(load.events_per_s),
        "ratio": round(load.events_per_s / bound, 3) if bound else None, "errors": load.errors + half.errors,
        "half_load_events_per_s": round(half.events_per_s),
        "p50_ms": round(percentile(half.latencies_ms, 0.50), 2),
        "p99_ms": round(percentile(half.latencies_ms, 0.99), 2),
        "gateway_cpu_us_per_event": round(gateway_us, 2) if gateway_us else None,
        "events_per_gateway_cpu_s": round(accepted / worker_cpu) if worker_cpu else None,
        "broker_cpu_ms_per_1000_events": round(broker_cpu * 1e6 / accepted, 2) if accepted else None,
        "events_per_gateway_and_broker_cpu_s": round(accepted / (worker_cpu + broker_cpu))
        if worker_cpu + broker_cpu else None,
        "costs_us_per_event": costs, "costs_sum_us": round(cost_model.floor(costs), 2),
    }


def main(argv: list[str] | None = None) -> int:
    # No options (the variables above configure it); --help says so instead of starting a stack.
    argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    seconds = _env_int("HEADWATER_BENCH_SECONDS", 8)
    concurrency = _env_int("HEADWATER_BENCH_CONCURRENCY", 64)
    workers = _env_int("HEADWATER_GATEWAY_WORKERS", 1)
    os.environ["HEADWATER_GATEWAY_WORKERS"] = str(workers)
    os.environ.setdefault("HEADWATER_GATEWAY_LOG_LEVEL", "WARNING")
    with tempfile.TemporaryDirectory(prefix="headwater-bench-") as state:
        cfg = stack_config(state)
        stack = Stack(cfg)
        try:
            print("starting a private stack (Kafka, registry, gateway) ...", flush=True)
            env = stack.up().env
            plan = pin(stack, cfg)
            procs = procs_of(stack, cfg)
            _warm(cfg, procs.broker)
            cache = asyncio.run(schema_cache(env["REGISTRY_URL"]))
            latest = cache.by_version(cache.routes["page_view"], None)
            if latest is None:
                print("bench: page_view has no schema in the registry", file=sys.stderr)
                return 1
            schema_text = json.dumps(schema_doc(env["REGISTRY_URL"], latest.schema_id))
            workload = Workload(schema_text, latest.schema_id)
            results = {kind: _phase(kind, env, cache, workload, seconds=seconds, concurrency=concurrency,
                                    plan=plan, procs=procs)
                       for kind in ("json", "avro")}
        finally:
            stack.down()
    _report(results, workers, concurrency, plan)
    return 0


def _warm(cfg: StackConfig, broker: int) -> None:
    """The broker's JIT warmed before anything is measured (bench/gateway/warm.py; HEADWATER_BENCH_WARM_S)."""
    seconds = float(os.environ.get("HEADWATER_BENCH_WARM_S", "120"))
    if not seconds:
        return
    spec = next(s for s in topic_specs(cfg) if s.name == EVENTS_TOPIC)
    ensure_topics(cfg.bootstrap, [TopicSpec(WARM_TOPIC, spec.partitions, spec.config)])
    warm = warm_broker(cfg.bootstrap, broker, max_seconds=seconds)
    print(f"broker warmed by {warm.transactions} transactions in {warm.seconds} s: {warm.first_ms_per_txn} -> "
          f"{warm.last_ms_per_txn} ms of its CPU per transaction", flush=True)


def _report(results: dict[str, dict[str, Any]], workers: int, concurrency: int, plan: cpus.CpuPlan | None) -> None:
    print()
    print(f"{'path':6} {'bound ev/s':>12} {'gateway ev/s':>13} {'ratio':>6} {'half-load ev/s':>15} "
          f"{'p50 ms':>8} {'p99 ms':>8} {'gw µs/ev':>9} {'broker ms/1k':>13}")
    for kind, r in results.items():
        print(f"{kind:6} {r['bound_events_per_s']:>12,} {r['gateway_events_per_s']:>13,} {r['ratio']:>6} "
              f"{r['half_load_events_per_s']:>15,} {r['p50_ms']:>8} {r['p99_ms']:>8} "
              f"{r['gateway_cpu_us_per_event'] or 0:>9} {r['broker_cpu_ms_per_1000_events'] or 0:>13}")
    per_cpu = {k: r["events_per_gateway_cpu_s"] or 0 for k, r in results.items()}
    line = {
        "bench": "gateway", "workers": workers, "concurrency": concurrency, "cpus": os.cpu_count(),
        "pinned": plan is not None, "loop": loop_name(os.environ.get("HEADWATER_GATEWAY_UVLOOP", "1") != "0"),
        "kafka_compression": os.environ.get("HEADWATER_GATEWAY_KAFKA_COMPRESSION", "none"),
        "events_per_batch": EVENTS_PER_BATCH, **{f"{k}_{m}": v for k, r in results.items() for m, v in r.items()},
        "json_ratio": results["json"]["ratio"], "avro_ratio": results["avro"]["ratio"],
        "avro_over_json": round(
            results["avro"]["gateway_events_per_s"] / max(1, results["json"]["gateway_events_per_s"]), 2),
        "avro_over_json_per_cpu": round(per_cpu["avro"] / max(1, per_cpu["json"]), 2),
    }
    print(json.dumps(line))


if __name__ == "__main__":
    sys.exit(main())
