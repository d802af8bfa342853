"""The shared enriched stream: events decoded, deduplicated and enriched once, in the JVM, for every rule to read.

The built-in query `enriched` reads the events topic (and the mirrored ones, `extract.py`), decodes each record by
its writer schema (`decode.py`, Spark's `from_avro`), deduplicates by (event_id, event_time) within the watermark,
joins the node inventory and adds the ingest latency and the source topic, all without Python, so it runs in
Spark's real-time mode. It writes one Avro record per event to the internal topic ENRICHED_TOPIC (Confluent
framing, schema ENRICHED_SCHEMA registered under `<topic>-value`, keyed by event_id). The rules
(`spark_pipeline/rules/`) read that topic instead of the events topic: a rule costs its own SQL, not another
decode, deduplication and enrichment of every event.

The two enrichments that run in Python (browser/OS/device from the user agent, country from the client IP) are not
in the record: the rule views add them, as pandas UDFs, for the rules that read them (those run in micro-batches).
"""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro
from pyspark.sql.streaming.readwriter import DataStreamWriter

from spark_pipeline import aggregate, decode, enrich, extract
from spark_pipeline.config import PipelineConfig
from spark_pipeline.load import confluent_frame
from spark_pipeline.metrics import observe_latency
from spark_pipeline.snapshot import SchemaSnapshot

_TS = {"type": "long", "logicalType": "timestamp-millis"}
# (column, Avro type): the order of the record and of the rows `read_enriched` returns.
FIELDS: list[tuple[str, Any]] = [
    ("event_id", "string"), ("event_type", "string"), ("producer_id", "string"), ("seq", "long"),
    ("node_id", "string"), ("created_at", _TS), ("sent_at", _TS), ("received_at", _TS), ("sdk_name", "string"),
    ("sdk_version", "string"), ("context", {"type": "map", "values": ["null", "string"]}), ("event_time", _TS),
    ("properties_json", "string"), ("user_id", "string"), ("user_agent", "string"), ("metric_value", "double"),
    ("client_ip", "string"), ("region", "string"), ("datacenter", "string"), ("service", "string"),
    ("ingest_latency_ms", "long"), ("batch_id", "string"), ("source", "string"), ("schema_id", "int"),
    # Added with MIRRORED_EVENTS_TOPICS: the Kafka topic the event was read from (the events topic or a mirrored
    # one). Last, with a default, so the schema stays backward compatible (`decode_enriched` reads both versions).
    ("source_topic", "string"),
]
COLUMNS = [name for name, _ in FIELDS]
# Column of the event rows (`decode.events`) each enriched column comes from, where the names differ.
_FROM = {"source_topic": "topic"}
# Every field nullable (Spark's to_avro refuses a nullable column for a non-null type).
ENRICHED_SCHEMA = {
    "type": "record", "name": "enriched_event", "namespace": "headwater.internal",
    "doc": "One decoded, deduplicated event with the pipeline's JVM enrichment (internal: the rules read it).",
    "fields": [{"name": n, "type": ["null", t], "default": None} for n, t in FIELDS],
}
ENRICHED_SCHEMA_JSON = json.dumps(ENRICHED_SCHEMA)
# The first version, without `source_topic`: records it wrote may still be in the topic when a pipeline with the
# second starts (a day of retention), and Avro needs a record's own writer schema to read it.
ENRICHED_SCHEMA_V1_JSON = json.dumps({**ENRICHED_SCHEMA, "fields": ENRICHED_SCHEMA["fields"][:-1]})
# The rules read the topic as it is written; a day covers a rule in the microbatch tier catching up after a stop.
RETENTION_MS = 24 * 3600 * 1000


def ensure_topic(cfg: PipelineConfig, timeout_s: float = 30.0) -> bool:
    """Create the internal topic if missing (`enriched_partitions` partitions, a day of retention); whether it was."""
    admin = AdminClient({"bootstrap.servers": cfg.bootstrap, **cfg.kafka_security.librdkafka()})
    meta = admin.list_topics(timeout=timeout_s)
    if cfg.enriched_topic in meta.topics:
        return False
    rf = max(1, min(3, len(meta.brokers)))
    spec = NewTopic(cfg.enriched_topic, num_partitions=cfg.enriched_partitions, replication_factor=rf,
                    config={"cleanup.policy": "delete", "retention.ms": str(RETENTION_MS)})
    try:
        admin.create_topics([spec], operation_timeout=timeout_s)[cfg.enriched_topic].result(timeout=timeout_s)
    except Exception as exc:
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise
    return True


def subject(cfg: PipelineConfig) -> str:
    """The registry subject of the internal topic's records (topic-name strategy)."""
    return f"{cfg.enriched_topic}-value"


def enriched_rows(events: DataFrame, inventory: DataFrame) -> DataFrame:
    """Decoded (and deduplicated) event rows (`decode.events`) with the JVM enrichment, as COLUMNS.

    `user_agent` is the event's, else the sender's HTTP header; unknown nodes get region `unknown`; `source_topic` is
    the Kafka topic the row was read from.
    """
    joined = enrich.with_inventory(events, inventory)
    computed = {
        "user_agent": F.coalesce(F.col("user_agent"), F.col("header_user_agent")),
        "ingest_latency_ms": F.unix_millis("received_at") - F.unix_millis("created_at"),
    }
    return joined.select(*[computed.get(c, F.col(_FROM.get(c, c))).alias(c) for c in COLUMNS])


def enriched_stream(spark: SparkSession, cfg: PipelineConfig, snapshot: SchemaSnapshot, inventory: DataFrame, *,
                    realtime: bool) -> DataFrame:
    """The events topic decoded (`strict`: an unknown schema id fails the batch, as in the built-in queries),
    watermarked, deduplicated and enriched.

    Deduplication keeps the first copy per (event_id, event_time) until the watermark passes it: a retried event
    keeps its event time, so this drops retries as `dropDuplicatesWithinWatermark(event_id)` does (which real-time
    mode does not run), except for a retry of an event whose created_at is ahead of the gateway's clock (its event
    time is then the received_at of each copy).
    """
    raw = extract.kafka_stream(spark, cfg, realtime=realtime)
    events = decode.events(decode.decode(decode.frame(raw), snapshot, strict=True))
    deduped = aggregate.with_watermark(events, cfg.lateness).dropDuplicates(["event_id", "event_time"])
    return enriched_rows(deduped, inventory)


def enriched_records(rows: DataFrame, schema_id: int) -> DataFrame:
    """Rows as Kafka (key = event_id, value = Confluent-framed Avro of ENRICHED_SCHEMA)."""
    value = confluent_frame(to_avro(F.struct(*[F.col(c) for c in COLUMNS]), ENRICHED_SCHEMA_JSON), schema_id)
    return rows.select(F.col("event_id").cast("binary").alias("key"), value.alias("value"))


def enriched_sink(rows: DataFrame, cfg: PipelineConfig, schema_id: int) -> DataStreamWriter:
    """Spark's Kafka sink to the internal topic (at least once: a replayed batch re-sends the same records, which
    the aggregations reading the topic drop with `without_repeats`); the latency from created_at to here is
    observed per batch (`metrics.observe_latency`)."""
    observed = observe_latency(rows, F.unix_millis("created_at"))
    return (enriched_records(observed, schema_id).writeStream.format("kafka").outputMode("update")
            .options(**cfg.spark_kafka()).option("topic", cfg.enriched_topic)
            .option("kafka.linger.ms", "0").option("kafka.acks", "all").option("kafka.enable.idempotence", "true")
            .options(**extract.NO_JMX))


def without_repeats(rows: DataFrame) -> DataFrame:
    """Rows of `read_enriched` without the records the internal topic holds twice: the first copy per
    (event_id, event_time) until the watermark passes it.

    The `enriched` query's Kafka sink is at least once: a batch replayed after a restart writes its records again
    (5 of 117 events in the rules' stack test). A projection or filter passes a repeat on as a repeated output
    record with the same key; an aggregation must not count it twice, so every stateful reader applies this (a
    second state store, evicted by the same watermark).
    """
    return rows.dropDuplicates(["event_id", "event_time"])


def decode_enriched(raw: DataFrame) -> DataFrame:
    """Kafka rows of the internal topic as COLUMNS (a record of neither version gives a row of nulls).

    A record of the first version (no `source_topic`) ends where the current one's last field would start, so
    decoding it with the current schema fails, and it is read again with its own, resolved to the current
    (`source_topic` null). PERMISSIVE from_avro gives a failed record as a struct of nulls, not a null struct: a
    decoded record is told by its event time, which every record the pipeline writes has. Two projections, so the
    current decode runs once per record (in one, Spark evaluated it in the condition and again in the branch).
    """
    body = F.expr("substring(value, 6)")
    permissive = {"mode": "PERMISSIVE"}
    current = raw.select(body.alias("_body"), from_avro(body, ENRICHED_SCHEMA_JSON, permissive).alias("_e"))
    first = from_avro(F.col("_body"), ENRICHED_SCHEMA_V1_JSON, {**permissive, "avroSchema": ENRICHED_SCHEMA_JSON})
    decoded = F.when(F.col("_e.event_time").isNotNull(), F.col("_e")).otherwise(first)
    return current.select(decoded.alias("e")).select("e.*")


def read_enriched(spark: SparkSession, cfg: PipelineConfig, starting_offsets: str, *, realtime: bool) -> DataFrame:
    """The internal topic as a stream of enriched rows, watermarked on `event_time` with the pipeline's lateness."""
    reader = (spark.readStream.format("kafka").options(**cfg.spark_kafka())
              .option("subscribe", cfg.enriched_topic).option("startingOffsets", starting_offsets)
              .option("failOnDataLoss", "false").options(**extract.NO_JMX)
              .option("kafka.fetch.max.wait.ms", str(cfg.realtime_fetch_wait_ms if realtime else 1)))
    if not realtime:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    # Filtered after the watermark, which keeps the filter above the decode (below it, Spark would repeat
    # from_avro in the filter): a record that did not decode has no event time.
    rows = aggregate.with_watermark(decode_enriched(reader.load()), cfg.lateness)
    return rows.where(F.col("event_time").isNotNull())

