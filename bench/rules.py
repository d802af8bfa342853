"""Rules benchmark (not a test): created_at -> rule output latency, apply -> running query, cost of N running rules.

    python -m bench.rules [--seconds 30] [--rate 200] [--drain 120] [--cost-events 20000] [--cost-rules 0,5,20]
        [--skip-latency] [--env-file PATH]

Against the running stack (`make up`; endpoints from `.headwater/stack.env`), with the pipeline (`job.run`, live
queries and the rule manager) in this process on Spark local[2]:

1. latency: a routing rule (`SELECT event_id, created_at FROM events WHERE producer_id IN (...)`) while events
   are posted through the gateway at `--rate` events/s (batches of 40, created_at stamped at send); a consumer of
   `headwater.rule.<name>` records when each event's record arrives. Also how long `rules apply` takes, and from
   its start to the rule's query running in Spark and to its status saying `running`.
2. cost: for each N of `--cost-rules`, a fresh pipeline over a private events topic with N rules running (a mix
   of windowed counts and filters), then `--cost-events` events produced at once: events/s = events / time until
   every query (built-in and rules) has read them all; also the built-in live query's own catch-up time.

The rules it applies are deleted at the end (a pipeline `make demo` runs meanwhile would run them too). Prints
the figures, then one JSON line (`python -m bench.report --add` renders docs/benchmarks/).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import SparkSession

from bench.spark.generate import Encoder, generate, produce, register_catalog
from common.avro_frame import WriterSchemas
from common.envfile import read_env, stack_env_file
from spark_pipeline import job
from spark_pipeline.config import PipelineConfig
from spark_pipeline.rules import cli, runtime
from spark_pipeline.rules.model import Rule
from spark_pipeline.rules.store import RuleStore
from spark_pipeline.session import build_session

COST_TEMPLATES = [
    "SELECT window(event_time, '1 minute') AS w, event_type, region, count(*) AS events FROM events "
    "GROUP BY window(event_time, '1 minute'), event_type, region",
    "SELECT event_id, event_type, node_id FROM events WHERE event_type = 'purchase'",
    "SELECT window(event_time, '10 seconds') AS w, node_id, count(*) AS events FROM events "
    "GROUP BY window(event_time, '10 seconds'), node_id",
]


def new_topic(bootstrap: str, prefix: str, partitions: int = 3) -> str:
    name = f"{prefix}.{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        fut.result(30)
    return name


def apply_rule(cfg: PipelineConfig, sql: str, name: str, store: RuleStore) -> Rule:
    """`rules apply` (analysis against the live views, output schema, topic, store); the stored rule."""
    path = Path(cfg.output_dir) / f"{name}.sql"
    path.write_text(sql, encoding="utf-8")
    if cli.apply(cfg, path, name) != 0:
        raise RuntimeError(f"rules apply {name} failed")
    return store.latest_rules()[name]


class Running:
    """job.run in a thread (the live queries and the rule manager), stopped by stopping the built-in queries."""

    def __init__(self, spark: SparkSession, cfg: PipelineConfig) -> None:
        self.spark = spark
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(cfg,), daemon=True)
        self.thread.start()
        wait("the built-in live query", lambda: self.query("aggregates_live") is not None, 300)

    def _run(self, cfg: PipelineConfig) -> None:
        try:
            job.run(cfg, spark=self.spark, group="live")
        except BaseException as exc:
            self.errors.append(exc)

    def query(self, name: str) -> Any:
        """A built-in query, or a rule query (those run in sessions of their own, listed by the manager)."""
        managers = runtime.running()
        rules = list(managers[-1].queries().values()) if managers else []
        return next((q for q in [*self.spark.streams.active, *rules] if q.name == name and q.isActive), None)

    def queries(self) -> list[Any]:
        managers = runtime.running()
        return [*self.spark.streams.active, *(managers[-1].queries().values() if managers else [])]

    def stop(self) -> None:
        for q in self.spark.streams.active:
            if not str(q.name).startswith("rule."):
                q.stop()
        self.thread.join(180)
        if self.errors:
            raise self.errors[0]


def wait(what: str, check: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


def percentile(values: list[int], q: float) -> float | None:
    return float(values[min(len(values) - 1, int(q * len(values)))]) if values else None


def post(env: dict[str, str], events: list[dict[str, Any]]) -> None:
    body = {"batch_id": str(uuid.uuid4()), "sent_at": int(time.time() * 1000),
            "sdk": {"name": "headwater-bench", "version": "0"}, "events": events}
    req = urllib.request.Request(f"{env['GATEWAY_URL'].rstrip('/')}/v1/batch", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json",
                                                         "Authorization": f"Bearer {env['HEADWATER_WRITE_KEY']}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        if json.loads(resp.read()).get("rejected"):
            raise RuntimeError("the gateway rejected events")


def consume_output(cfg: PipelineConfig, topic: str, arrivals: dict[str, tuple[int, int]], stop: threading.Event,
                   ready: threading.Event) -> None:
    """event_id -> (arrival ms, created_at ms) of each record of the rule's output topic."""
    consumer = Consumer({"bootstrap.servers": cfg.bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10})
    schemas = WriterSchemas(cfg.registry_url)
    try:
        consumer.subscribe([topic], on_assign=lambda c, parts: ready.set())
        while not stop.is_set():
            msg = consumer.poll(0.1)
            value = None if msg is None or msg.error() is not None else msg.value()
            if value is None:
                continue
            now = int(time.time() * 1000)
            row: Any = schemas.decode(value)
            created = row["created_at"]
            arrivals.setdefault(str(row["event_id"]), (now, int(created.timestamp() * 1000)))
    finally:
        consumer.close()


def latency_phase(spark: SparkSession, env: dict[str, str], cfg: PipelineConfig, store: RuleStore, *,
                  seconds: float, rate: int, drain: float) -> dict[str, Any]:
    producers = [str(uuid.uuid4()) for _ in range(4)]
    name = f"bench_route_{uuid.uuid4().hex[:6]}"
    ids = ", ".join(f"'{p}'" for p in producers)
    pipeline = Running(spark, cfg)
    rule: Rule | None = None
    try:
        t0 = time.monotonic()
        rule = apply_rule(cfg, f"SELECT event_id, created_at FROM events WHERE producer_id IN ({ids})", name, store)
        applied = time.monotonic() - t0
        query = f"rule.{name}.v{rule.version}"
        wait("the rule's query", lambda: pipeline.query(query) is not None, 120)
        to_query = time.monotonic() - t0
        wait("status running", lambda: (s := store.statuses().get(name)) is not None and s.state == "running", 120)
        to_running = time.monotonic() - t0
        arrivals: dict[str, tuple[int, int]] = {}
        stop, ready = threading.Event(), threading.Event()
        reader = threading.Thread(target=consume_output, args=(cfg, rule.topic, arrivals, stop, ready), daemon=True)
        reader.start()
        ready.wait(30)
        sent = send(env, producers, seconds=seconds, rate=rate)
        deadline = time.monotonic() + drain
        while time.monotonic() < deadline and len(arrivals) < len(sent):
            time.sleep(0.5)
        stop.set()
        reader.join(10)
        latencies = sorted(arrivals[i][0] - arrivals[i][1] for i in sent if i in arrivals)
        return {"apply_s": round(applied, 2), "apply_to_query_s": round(to_query, 2),
                "apply_to_running_s": round(to_running, 2), "events": len(sent),
                "missing": sum(1 for i in sent if i not in arrivals), "rate": rate,
                "p50_ms": percentile(latencies, 0.5), "p99_ms": percentile(latencies, 0.99),
                "max_ms": float(latencies[-1]) if latencies else None, "goal_p99_ms": 2000}
    finally:
        if rule is not None:
            store.delete(name)
        pipeline.stop()


def send(env: dict[str, str], producers: list[str], *, seconds: float, rate: int) -> list[str]:
    """Post batches of 40 events through the gateway at `rate` events/s; the ids sent."""
    pool = generate(int(seconds * rate) + 40, producers=len(producers), spacing_ms=0, seed=int(time.time()))
    seqs = dict.fromkeys(producers, 0)
    sent: list[str] = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        now = int(time.time() * 1000)
        batch = []
        for n in range(40):
            e = next(pool).record
            pid = producers[n % len(producers)]
            batch.append({"event_id": e["event_id"], "event_type": e["event_type"], "producer_id": pid,
                          "seq": seqs[pid], "node_id": e["node_id"], "created_at": now, "context": e["context"],
                          "properties": e["properties"], "schema_version": 2})
            seqs[pid] += 1
        post(env, batch)
        sent += [str(b["event_id"]) for b in batch]
        time.sleep(max(0.0, start + len(sent) / rate - time.monotonic()))
    return sent


def rows_read(q: Any) -> int:
    return sum(int(p["numInputRows"]) for p in q.recentProgress)


def cost_phase(spark: SparkSession, cfg: PipelineConfig, store: RuleStore, encoder: Encoder, *, n: int,
               events: int) -> dict[str, Any]:
    topic = new_topic(cfg.bootstrap, "bench.rules.events")
    run_cfg = cfg.with_overrides(events_topic=topic, starting_offsets="earliest",
                                 output_dir=tempfile.mkdtemp(prefix="bench-rules-"))
    pipeline = Running(spark, run_cfg)
    names = [f"bench_cost_{uuid.uuid4().hex[:6]}_{i}" for i in range(n)]
    try:
        for i, name in enumerate(names):
            apply_rule(run_cfg, COST_TEMPLATES[i % len(COST_TEMPLATES)], name, store)
        wait(f"{n} rules running", lambda: all((s := store.statuses().get(x)) is not None and s.state == "running"
                                               for x in names), 600)
        payloads = [(e.key, encoder.encode(e), e.headers) for e in generate(events, start_ms=int(time.time() * 1000),
                                                                            spacing_ms=1, seed=n)]
        t0 = time.monotonic()
        produce(cfg.bootstrap, topic, payloads)
        queries = [q for q in pipeline.queries() if q.name == "aggregates_live" or str(q.name).startswith("rule.")]
        done: dict[str, float] = {}
        deadline = time.monotonic() + 1800
        while len(done) < len(queries) and time.monotonic() < deadline:
            for q in queries:
                if q.name not in done and rows_read(q) >= events:
                    done[str(q.name)] = time.monotonic() - t0
            time.sleep(0.2)
        total = max(done.values()) if len(done) == len(queries) else float("nan")
        return {"rules": n, "events": events, "seconds": round(total, 2), "events_per_s": round(events / total),
                "builtin_catch_up_s": round(done.get("aggregates_live", float("nan")), 2)}
    finally:
        for name in names:
            store.delete(name)
        pipeline.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rules", description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--drain", type=float, default=120.0, help="seconds to wait for the last outputs")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--cost-events", type=int, default=20_000)
    parser.add_argument("--cost-rules", default="0,5,20")
    parser.add_argument("--env-file", type=Path, default=stack_env_file())
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    env = {**read_env(args.env_file), **os.environ}
    cfg = PipelineConfig.from_env(env).with_overrides(output_dir=tempfile.mkdtemp(prefix="bench-rules-"),
                                                      starting_offsets="latest", registry_poll_s=3600)
    encoder = Encoder(register_catalog(cfg.registry_url))
    os.environ["HEADWATER_RULE_STATUS_S"] = "1"
    spark = build_session("headwater-bench-rules")
    store = RuleStore(cfg.bootstrap)
    os.environ["HEADWATER_RULE_STARTING_OFFSETS"] = "latest"
    load_before = os.getloadavg()[0]
    latency: dict[str, Any] = {}
    if not args.skip_latency:
        latency = latency_phase(spark, env, cfg, store, seconds=args.seconds, rate=args.rate, drain=args.drain)
        print(f"latency created_at -> rule output: p50 {latency['p50_ms']} ms, p99 {latency['p99_ms']} ms "
              f"(goal p99 <= 2000 ms), {latency['events']} events at {args.rate}/s, {latency['missing']} missing")
        print(f"apply: {latency['apply_s']} s (analysis, schema, store); query started "
              f"{latency['apply_to_query_s']} s and running {latency['apply_to_running_s']} s after apply began")
    os.environ["HEADWATER_RULE_STARTING_OFFSETS"] = "earliest"
    cost = []
    for n in [int(x) for x in args.cost_rules.split(",") if x.strip()]:
        row = cost_phase(spark, cfg, store, encoder, n=n, events=args.cost_events)
        cost.append(row)
        print(f"{n:>3} rules: {row['events_per_s']} events/s through every query ({row['seconds']} s for "
              f"{row['events']} events); built-in live query caught up in {row['builtin_catch_up_s']} s")
    base = cost[0]["events_per_s"] if cost else None
    for row in cost:
        row["vs_first"] = round(row["events_per_s"] / base, 3) if base else None
    spark.stop()
    # The host's 1-minute load average around the run: figures from a shared 2-core host move with it.
    load = {"before": round(load_before, 1), "after": round(os.getloadavg()[0], 1), "cores": os.cpu_count()}
    print(json.dumps({"bench": "rules", "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
                      "latency": latency, "cost": cost, "load_average": load}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
