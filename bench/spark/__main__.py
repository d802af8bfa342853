"""Pipeline benchmark: decode/aggregate throughput on local[2] and created_at -> aggregate-visible latency.

    python -m bench.spark [--events 200000] [--seconds 30] [--warmup 20] [--rate 400]
        [--modes throughput,microbatch,microbatch_live_only,microbatch_one_app,realtime] [--no-gateway]
        [--env-file PATH]

Reads the stack's endpoints from `.headwater/stack.env` (or --env-file); posts through the gateway when
the stack has one (GATEWAY_URL + HEADWATER_WRITE_KEY), else produces straight to Kafka. Prints the
figures, then one JSON line with all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import SparkSession

from bench.spark import latency, throughput
from bench.spark.generate import Encoder, generate, produce, register_catalog
from common.envfile import read_env, stack_env_file
from common.registry_client import RegistryClient
from spark_pipeline import aggregate, decode, enrich, job, load
from spark_pipeline.config import PipelineConfig, join
from spark_pipeline.session import build_session
from spark_pipeline.snapshot import SchemaSnapshot, take_snapshot


def _topic(bootstrap: str, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        fut.result(30)
    return name


def _files_app(cfg: PipelineConfig, env_file: Path) -> subprocess.Popen[bytes]:
    """The Parquet queries as a second application at the lowest CPU priority (docs/tuning-small-hosts.md)."""
    env = {**os.environ, "KAFKA_BOOTSTRAP": cfg.bootstrap, "REGISTRY_URL": cfg.registry_url,
           "EVENTS_TOPIC": cfg.events_topic, "HEADWATER_PIPELINE_DIR": str(cfg.output_dir),
           "HEADWATER_STARTING_OFFSETS": cfg.starting_offsets}
    # process_group, not start_new_session: with Linux's autogroup scheduling (sched_autogroup_enabled=1) a new
    # session is a new scheduling group, which gets an equal CPU share whatever its nice value.
    return subprocess.Popen(["nice", "-n", "19", sys.executable, "-m", "spark_pipeline", "--env-file", str(env_file),
                             "run", "--queries", "files"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, process_group=0)


def _stop_app(app: subprocess.Popen[bytes]) -> None:
    if app.poll() is None:
        app.send_signal(signal.SIGINT)
        try:
            app.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(app.pid, signal.SIGKILL)
            app.wait()


def _latency_run(spark: SparkSession, cfg: PipelineConfig, snapshot: SchemaSnapshot, agg_id: int, *, seconds: float,
                 warmup: float, rate: int, gateway: tuple[str, str] | None, ids: dict[tuple[str, int], int],
                 mode: str, env_file: Path) -> dict[str, Any]:
    files = None
    if mode == "realtime":
        queries = [_realtime_query(spark, cfg, snapshot, agg_id)]
    elif mode == "microbatch":  # two applications: live queries here, the Parquet outputs niced in another
        files = _files_app(cfg, env_file)
        queries = job.start_queries(spark, cfg, snapshot, agg_id, available_now=False, group="live")
    elif mode == "microbatch_live_only":  # the live queries alone (the Parquet application on other machines)
        queries = job.start_queries(spark, cfg, snapshot, agg_id, available_now=False, group="live")
    else:  # microbatch_one_app: every query in this application
        queries = job.start_queries(spark, cfg, snapshot, agg_id, available_now=False)
    obs, stop, ready = latency.Observations(), threading.Event(), threading.Event()
    consumer = threading.Thread(target=latency.consume_aggregates, args=(cfg, obs, stop, ready), daemon=True)
    try:
        time.sleep(10)  # first (empty) batches, code generation
        consumer.start()
        ready.wait(30)
        # Steady state, as a pipeline that runs for days: the first batches with data run interpreted code and
        # take 2-3x longer. Warm up with the same traffic, then measure from the next 10-second window on, so
        # no measured window also counts warm-up events.
        latency.send(cfg, latency.Observations(), seconds=warmup, rate=rate, gateway=gateway, ids=ids)
        # The niced Parquet application starts slowly while the live one is busy: measure only once it has
        # committed a batch, so the figure includes its steady work.
        deadline = time.monotonic() + 240
        while files is not None and not _file_batches(cfg) and time.monotonic() < deadline:
            latency.send(cfg, latency.Observations(), seconds=5, rate=rate, gateway=gateway, ids=ids)
        before = _file_batches(cfg)
        time.sleep(10 - time.time() % 10 + 0.05)
        sent = latency.send(cfg, obs, seconds=seconds, rate=rate, gateway=gateway, ids=ids)
        latency.drain(obs, quiet_s=5.0, max_s=30.0)
        batches = {str(q.name): _batch_ms(q) for q in queries}
        # Batches the Parquet queries committed (in whichever application ran them): proof they kept running.
        file_batches = _file_batches(cfg) - before
    finally:
        stop.set()
        consumer.join(10)
        for q in queries:
            q.stop()
        if files is not None:
            _stop_app(files)
    values, missing = obs.latencies_ms()
    return {"sent": sent, "missing": missing, "p50_ms": latency.percentile(values, 0.5),
            "p99_ms": latency.percentile(values, 0.99), "max_ms": float(values[-1]) if values else float("nan"),
            "batch_ms_p50_by_query": batches, "files_app": files is not None,
            "events_file_batches_while_measuring": file_batches}


def _file_batches(cfg: PipelineConfig) -> int:
    """Micro-batches the events Parquet query has committed (its sink's log)."""
    return len(list((Path(cfg.output_dir) / "events" / "_spark_metadata").glob("[0-9]*")))  # a local folder


def _batch_ms(query: Any) -> dict[str, float]:
    """Median wall time of the query's recent micro-batches that had input, in all and by phase (Spark's
    durationMs: addBatch is the processing, the rest planning, offset and commit logs): where the latency goes."""
    progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
    phases = sorted({k for p in progress for k in p["durationMs"]})
    out = {}
    for phase in phases:
        values = sorted(int(p["durationMs"].get(phase, 0)) for p in progress)
        out[phase] = float(values[len(values) // 2])
    return out


def _realtime_query(spark: SparkSession, cfg: PipelineConfig, snapshot: SchemaSnapshot, agg_id: int) -> Any:
    """All-JVM path for Spark's real-time mode: Kafka -> from_avro -> dedup -> 10 s windows -> Kafka."""
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", cfg.bootstrap)
           .option("subscribe", cfg.events_topic).option("kafka.isolation.level", "read_committed")
           .option("includeHeaders", "true").option("startingOffsets", "latest").load())
    events = decode.events(decode.decode(decode.frame(raw), snapshot, strict=False, fields=decode.AGGREGATE_FIELDS))
    inventory = enrich.read_inventory(spark, cfg.nodes_file).cache()
    # dropDuplicatesWithinWatermark is not on real-time mode's allowlist; dropDuplicates over (event_id,
    # event_time) is the same for retries (a retried event keeps its created_at) and its state expires too.
    deduped = aggregate.with_watermark(events, cfg.lateness).dropDuplicates(["event_id", "event_time"])
    aggs = aggregate.windowed_aggregates(enrich.with_inventory(deduped, inventory), (aggregate.WINDOWS[0],))
    return (load.aggregate_records(aggs, agg_id).writeStream.format("kafka").outputMode("update")
            .option("kafka.bootstrap.servers", cfg.bootstrap).option("topic", cfg.aggregates_topic)
            .option("checkpointLocation", join(cfg.checkpoint_dir, "realtime"))
            .trigger(realTime="5 seconds").start())  # type: ignore[call-overload]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env-file", type=Path, default=stack_env_file())
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=400, help="events/s sent during the latency run")
    parser.add_argument("--warmup", type=float, default=20.0,
                        help="seconds of the same traffic sent before the latency run (not measured)")
    parser.add_argument("--modes", default="throughput,microbatch",
                        help="comma-separated: throughput, microbatch (live queries here, the Parquet outputs as a "
                             "second, niced application), microbatch_live_only (the live queries alone), "
                             "microbatch_one_app (every query in this application), "
                             "realtime (real-time mode runs every stage at once: give it enough task slots, e.g. "
                             "SPARK_MASTER=local[12])")
    parser.add_argument("--no-gateway", action="store_true", help="produce straight to Kafka")
    args = parser.parse_args()
    env = {**read_env(args.env_file), **os.environ} if args.env_file.exists() else dict(os.environ)
    cfg = PipelineConfig.from_env(env)
    ids = register_catalog(cfg.registry_url)
    results: dict[str, Any] = {"events": args.events}

    modes = args.modes.split(",")
    spark = build_session("headwater-bench")
    results["master"] = spark.sparkContext.master
    registry = RegistryClient(cfg.registry_url)
    snapshot = take_snapshot(registry, cfg.subject_prefix)
    if "throughput" in modes:
        topic = _topic(cfg.bootstrap, f"bench.events.{int(time.time())}", 6)
        encoder = Encoder(ids)
        produce(cfg.bootstrap, topic, [(e.key, encoder.encode(e), e.headers) for e in generate(args.events)])
        rates = throughput.measure(spark, cfg.with_overrides(events_topic=topic), snapshot, args.events)
        results.update({k: round(v) for k, v in rates.items()})
        print(f"decode + aggregate on {spark.sparkContext.master}, {args.events} events:")
        for name, value in rates.items():
            print(f"  {name:34s} {value:12,.0f} events/s", flush=True)

    gateway = None if args.no_gateway or "GATEWAY_URL" not in env else (env["GATEWAY_URL"], env["HEADWATER_WRITE_KEY"])
    agg_id = registry.register(cfg.aggregate_subject, load.AGGREGATE_SCHEMA_JSON)
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as tmp:
        live_topic = cfg.events_topic if gateway else _topic(cfg.bootstrap, f"bench.live.{int(time.time())}", 6)
        live_cfg = cfg.with_overrides(events_topic=live_topic, output_dir=tmp, starting_offsets="latest")
        for mode in [m for m in modes if m != "throughput"]:
            try:
                mode_cfg = live_cfg.with_overrides(output_dir=join(tmp, mode))  # own checkpoints per mode
                figures = _latency_run(spark, mode_cfg, snapshot, agg_id, seconds=args.seconds, warmup=args.warmup,
                                       rate=args.rate, gateway=gateway, ids=ids, mode=mode, env_file=args.env_file)
            except Exception as exc:  # real-time mode may refuse the plan: report why
                figures = {"error": str(exc).splitlines()[0][:300]}
            results[mode] = figures
            via = "gateway" if gateway else "Kafka directly"
            print(f"latency created_at -> aggregate ({mode}, {args.rate} ev/s via {via}): {figures}", flush=True)
    results["gateway_in_loop"] = gateway is not None
    print(json.dumps(results))
    spark.stop()


if __name__ == "__main__":
    main()
