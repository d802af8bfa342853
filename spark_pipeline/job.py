"""Wires extract -> decode -> enrich/dedup/aggregate -> sinks, for the streaming job and the batch replay.

Streaming (`run`): five queries, each with its own checkpoint: `events` (enriched, deduplicated rows to
Parquet by date), `deadletter` (undecodable records with the reason), `aggregates_live` (update mode to
the aggregates topic), `aggregates_final` (append mode, exact final windows to Parquet) and `loss_audit`
(seq gaps per producer to Parquet, `audit.py`); with `console`, a sixth prints the live aggregates. The
supervisor loop (`supervisor.py`) watches them: a batch that meets an unknown schema id fails before it
commits; the loop then takes a new registry snapshot and restarts every query from its checkpoint, so a
version registered while the job runs is picked up without restarting the process. The registry is also
polled, so a new latest (reader) version is adopted the same way. Beside them (not with `--available-now`, not in
the `files` group) the rule manager runs each streaming SQL rule as a query of its own (`spark_pipeline/rules/`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from common.registry_client import RegistryClient
from spark_pipeline import aggregate, decode, enrich, extract, load, shared
from spark_pipeline.audit import idle_batch_settings, loss_audit_stream
from spark_pipeline.checkpoint import clear_interrupted_first_batch, hadoop_path
from spark_pipeline.config import PipelineConfig, join
from spark_pipeline.metrics import PipelineMetrics, Sampler, figures
from spark_pipeline.rules import runtime
from spark_pipeline.session import NO_DATA_BATCHES, build_session, query_conf
from spark_pipeline.snapshot import SchemaSnapshot, take_snapshot
from spark_pipeline.supervisor import SlotRetries, SlotShortage, stop_all, supervise

log = logging.getLogger("spark_pipeline")


@dataclass(frozen=True)
class Outputs:
    """Where each output of the pipeline goes, under one root folder (a local path or a Hadoop URI)."""

    root: str

    @property
    def events(self) -> str:
        return join(self.root, "events")

    @property
    def deadletter(self) -> str:
        return join(self.root, "deadletter")

    @property
    def aggregates_final(self) -> str:
        return join(self.root, "aggregates_final")

    @property
    def loss_audit(self) -> str:
        return join(self.root, "loss_audit")

    @property
    def checkpoints(self) -> str:
        return join(self.root, "checkpoints")


def committed_output(spark: SparkSession, sink: str) -> bool:
    """Whether a Parquet file sink has committed a batch at `sink` (its `_spark_metadata` log exists), on
    whichever Hadoop file system the path names."""
    fs, log_dir = hadoop_path(spark, join(sink, "_spark_metadata"))
    return bool(fs.exists(log_dir))


def _streams(spark: SparkSession, cfg: PipelineConfig, snapshot: SchemaSnapshot, inventory: DataFrame,
             fields: frozenset[str] | None = None) -> tuple[DataFrame, DataFrame, DataFrame]:
    """Fresh (decoded, deduplicated events, windowed aggregates) frames over a new Kafka stream, decoding
    only the event-row columns `fields` (default all).

    Each query gets its own plan: queries that shared one plan's expression objects raced in Spark's
    lazy initialisation of from_avro (seen here as IndexOutOfBounds in CreateMap while planning).
    """
    decoded = decode.decode(decode.frame(extract.kafka_stream(spark, cfg)), snapshot, strict=True, fields=fields)
    deduped = aggregate.deduplicate(aggregate.with_watermark(decode.events(decoded), cfg.lateness))
    return decoded, deduped, aggregate.windowed_aggregates(enrich.with_inventory(deduped, inventory))


LIVE_QUERIES = ("aggregates_live", "console", "enriched")
# Queries in Spark's real-time mode: one long-running task per Kafka partition (and per shuffle partition).
REALTIME_QUERIES = ("enriched",)
FILE_QUERIES = ("events", "deadletter", "aggregates_final", "loss_audit")
QUERY_GROUPS = {"all": LIVE_QUERIES + FILE_QUERIES, "live": LIVE_QUERIES, "files": FILE_QUERIES}


def query_settings(name: str, trigger: str, available_now: bool) -> dict[str, str]:
    """The session settings query `name` starts with (each query keeps its own).

    The live queries run no batches without data: in update mode such a batch (run to evict state once the
    watermark moved) emits nothing, yet the next batch with data waited for it, 0.2-0.3 s here; eviction
    happens in the next batch with data instead. The loss audit's timeouts need them (`idle_batch_settings`).
    """
    if name in LIVE_QUERIES:
        return {NO_DATA_BATCHES: "false"}
    if name == "loss_audit":
        return idle_batch_settings(None if available_now else trigger)
    return {}


def start_queries(spark: SparkSession, cfg: PipelineConfig, snapshot: SchemaSnapshot, aggregate_schema_id: int,
                  available_now: bool, *, group: str = "all", enriched_schema_id: int | None = None
                  ) -> list[StreamingQuery]:
    """Build the plans from `snapshot` and start the queries of `group` (QUERY_GROUPS).

    `live` and `files` let the latency-bound live aggregates and the Parquet outputs run as two applications
    (docs/tuning-small-hosts.md); `all` runs every query in this one. The shared enriched stream (`enriched`,
    real-time mode) runs when `enriched_schema_id` is given (the rules read it) and not with `available_now`.
    """
    out = Outputs(cfg.output_dir)
    inventory = enrich.read_inventory(spark, cfg.nodes_file).cache()
    wanted = QUERY_GROUPS[group]

    live_realtime = cfg.live_mode == "realtime" and enriched_schema_id is not None

    def ck(writer: DataStreamWriter, name: str, trigger: str) -> StreamingQuery:
        # A query's thread inherits the local properties set when it starts: its scheduler pool.
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", "live" if name in LIVE_QUERIES else "files")
        realtime = name in REALTIME_QUERIES or (name == "aggregates_live" and live_realtime)
        # A real-time live query reads another topic than the micro-batch one: a checkpoint of its own (`_v2`: since
        # it drops the shared stream's repeats, a stateful operator the older checkpoints lack).
        folder = f"{name}_realtime_v2" if realtime and name not in REALTIME_QUERIES else name
        if removed := clear_interrupted_first_batch(spark, join(out.checkpoints, folder)):
            log.warning("query %s: removed %s, left by its first batch's interrupted log write", name, removed)
        with query_conf(spark, query_settings(name, trigger, available_now)):
            if realtime:
                writer = writer.queryName(name).option("checkpointLocation", join(out.checkpoints, folder))
                return writer.trigger(realTime=trigger).start()  # type: ignore[call-overload,no-any-return]
            return load.checkpointed(writer, out.checkpoints, name, trigger, available_now).start()

    def streams(fields: frozenset[str] | None = decode.AGGREGATE_FIELDS) -> tuple[DataFrame, DataFrame, DataFrame]:
        # The aggregates and the loss audit decode only what they read (2.5x faster); the events and
        # dead-letter outputs decode whole records.
        return _streams(spark, cfg, snapshot, inventory, fields)

    def events() -> DataStreamWriter:
        enriched = enrich.enrich(streams(None)[1], inventory).withColumn("date", F.to_date("event_time"))
        return load.parquet_sink(enriched, out.events, ["date"])

    def live() -> DataFrame:
        if not live_realtime:
            return streams()[2]
        # Real-time mode: the windows over the shared enriched stream (decoded, deduplicated, enriched once).
        start = "latest" if cfg.starting_offsets == "latest" else "earliest"
        enriched = shared.without_repeats(shared.read_enriched(spark, cfg, start, realtime=True))
        return aggregate.windowed_aggregates(enriched, p95_accuracy=aggregate.REALTIME_P95_ACCURACY)

    def final() -> DataStreamWriter:
        return load.parquet_sink(streams()[2].withColumn("date", F.to_date("window_start")), out.aggregates_final,
                                 ["date"])

    builders: dict[str, tuple[Callable[[], DataStreamWriter], str]] = {
        "events": (events, cfg.file_trigger),
        "deadletter": (lambda: load.parquet_sink(decode.dead_letters(streams(None)[0]), out.deadletter, ["date"]),
                       cfg.file_trigger),
        "aggregates_live": (lambda: load.live_aggregates_sink(live(), cfg.bootstrap, cfg.aggregates_topic,
                                                              aggregate_schema_id, cfg.kafka_security),
                            cfg.realtime_batch if live_realtime else cfg.live_trigger),
        "aggregates_final": (final, cfg.file_trigger),
        "loss_audit": (lambda: load.parquet_sink(loss_audit_stream(decode.events(streams()[0]), cfg.loss_grace_ms),
                                                 out.loss_audit, ["date"]), cfg.file_trigger),
    }
    if cfg.console and not available_now:
        builders["console"] = (lambda: load.console_sink(streams()[2]), "5 seconds")
    if enriched_schema_id is not None and not available_now:
        builders["enriched"] = (lambda: shared.enriched_sink(
            shared.enriched_stream(spark, cfg, snapshot, inventory, realtime=True), cfg, enriched_schema_id),
            cfg.realtime_batch)
    return [ck(build(), name, trigger) for name, (build, trigger) in builders.items() if name in wanted]


def run(cfg: PipelineConfig, available_now: bool = False, spark: SparkSession | None = None,
        group: str = "all") -> None:
    """The streaming job (the queries of `group`); with `available_now`, process what is in the topic now and
    return."""
    spark = spark or build_session(f"headwater-pipeline-{group}")
    registry = RegistryClient.of(cfg.registry_url, cfg.registry_access)
    aggregate_id = registry.register(cfg.aggregate_subject, load.AGGREGATE_SCHEMA_JSON)
    bad: frozenset[int] = frozenset()
    # The streaming SQL rules (spark_pipeline/rules/, docs/rules-runtime.md) run beside the built-in queries, over
    # the shared enriched stream the `enriched` query writes.
    with_rules = not available_now and group != "files" and runtime.enabled(os.environ)
    enriched_id = None
    if (with_rules and cfg.rules_realtime) or (cfg.live_mode == "realtime" and not available_now and group != "files"):
        shared.ensure_topic(cfg)
        enriched_id = registry.register(shared.subject(cfg), shared.ENRICHED_SCHEMA_JSON)
    rules = runtime.maybe_start(spark, cfg, os.environ) if with_rules else None
    running: list[StreamingQuery] = []
    restarts = [0]
    sampler = None if available_now else start_metrics(cfg, lambda: (running, restarts[0]))
    slot_retries = SlotRetries()  # a query refused its task slots (or lost a shuffle): when to start them again
    try:
        while True:
            snapshot = take_snapshot(registry, cfg.subject_prefix, bad)
            log.info("decoding %d writer schemas of %d subjects", len(snapshot.writers), len(snapshot.readers))
            queries = start_queries(spark, cfg, snapshot, aggregate_id, available_now, group=group,
                                    enriched_schema_id=enriched_id)
            running[:] = queries
            for q in queries:
                log.info("started query %s (checkpoint %s)", q.name, join(cfg.checkpoint_dir, str(q.name)))
            started_at = time.monotonic()
            try:
                unknown = supervise(queries, partial(take_snapshot, registry, cfg.subject_prefix, snapshot.bad_ids),
                                    snapshot, cfg.registry_poll_s, available_now)
            except SlotShortage as short:  # supervise stopped the queries
                delay = slot_retries.next_delay(time.monotonic() - started_at)
                if delay is None:
                    raise short.error from None
                log.warning("%s: starting the queries again from their checkpoints in %.0f s (%d of %d)", short,
                            delay, slot_retries.count, len(SlotRetries.DELAYS_S))
                restarts[0] += 1
                time.sleep(delay)
                continue
            except BaseException:
                stop_all(queries)
                raise
            if unknown is None:
                return
            restarts[0] += 1
            fresh = take_snapshot(registry, cfg.subject_prefix)
            bad = frozenset(bad | {i for i in unknown if i not in fresh.writers})
    finally:
        if sampler is not None:
            sampler.stop()
        if rules is not None:
            rules.stop()


def start_metrics(cfg: PipelineConfig, current: Callable[[], tuple[list[StreamingQuery], int]]) -> Sampler:
    """Sample the built-in queries (`current()`: the running ones and how often they were restarted) and the rules
    into the Prometheus gauges, served on HEADWATER_PIPELINE_METRICS_PORT (a port in use is logged, not fatal)."""
    watermarks = runtime.KafkaWatermarks(cfg.bootstrap, max_age_s=5.0, security=cfg.kafka_security)

    def collect(m: PipelineMetrics) -> None:
        queries, restarts = current()
        for q in list(queries):
            m.set_query(str(q.name), bool(q.isActive), figures(q.lastProgress, watermarks), restarts)
        for manager in runtime.running():
            if isinstance(manager, runtime.PipelineRules):
                m.set_rules(manager.figures(watermarks))

    sampler = Sampler(PipelineMetrics(), collect)
    try:
        return sampler.start(cfg.metrics_port)
    except OSError as exc:
        log.warning("no /metrics endpoint on port %d: %s", cfg.metrics_port, exc)
        return sampler.start(None)


def replay(cfg: PipelineConfig, output: str, starting: str = "earliest", ending: str = "latest",
           spark: SparkSession | None = None) -> dict[str, int]:
    """Recompute the aggregates from an offset range into `output` (batch, exact: no watermark)."""
    spark = spark or build_session("headwater-replay")
    snapshot = take_snapshot(RegistryClient.of(cfg.registry_url, cfg.registry_access), cfg.subject_prefix)
    decoded = decode.decode(decode.frame(extract.kafka_batch(spark, cfg, starting, ending)), snapshot,
                            strict=False).persist()
    try:
        events = aggregate.deduplicate(decode.events(decoded)).persist()
        inventory = enrich.read_inventory(spark, cfg.nodes_file)
        written = write_replay(events, decode.dead_letters(decoded), enrich.with_inventory(events, inventory), output)
        events.unpersist()
        return written
    finally:
        decoded.unpersist()


def write_replay(events: DataFrame, dead: DataFrame, regional: DataFrame, output: str) -> dict[str, int]:
    """Write the replay's outputs (overwriting) and return the row count of each."""
    parts = {
        "counts_1m": aggregate.counts_per_minute(events),
        "aggregates": aggregate.windowed_aggregates(regional),
        "loss_audit": aggregate.loss_audit(events),
        "deadletter": dead,
    }
    counts = {}
    for name, df in parts.items():
        df.write.mode("overwrite").parquet(join(output, name))
        counts[name] = df.sparkSession.read.parquet(join(output, name)).count()
    counts["events"] = events.count()
    return counts


def audit(cfg: PipelineConfig, spark: SparkSession | None = None) -> DataFrame:
    """The seq-gap loss audit over the streaming job's events output."""
    spark = spark or build_session("headwater-audit")
    return aggregate.loss_audit(spark.read.parquet(Outputs(cfg.output_dir).events))
