"""Registers the temp views rules are written against: `events`, one view per event type, one per rule output.

- `events`: every decoded, deduplicated, enriched event: the envelope columns, `event_time` (the pipeline's
  watermarked event time), the enrichment (`region`, `datacenter`, `service` from the node inventory,
  `country` from the client IP, `browser`/`os`/`device` from the user agent), the typed helper columns
  (`user_id`, `metric_value`, and `user_agent`: the event's, else the sender's HTTP header) and `properties` as
  a map<string,string> (nested values as JSON).
- `<event_type>` (e.g. `page_view`): that type's events with the same columns (but `user_id` and `metric_value`,
  which come from the properties), `properties` as the typed struct of the registry's latest schema of the type,
  and each property also as a top-level column unless its name is one of those columns (then it is only
  `properties.<name>`, e.g. a server_metric's own `service`). Older writer versions are resolved to the
  latest by Avro when the pipeline decodes; `type_view_schema` gives the (schema id, struct) a view was built
  from, so the runtime re-registers the views when a new version appears.
- `rule_<name>`: the output of rule `<name>` read from its topic and decoded by its registry schema (every
  version as writer, the latest as reader); with backticks, `` `rule.<name>` `` names the same view. Its
  `event_time` (a filter's output), else `window.end` as column `window_time`, is its watermarked time column.

`register_views(..., only=named_in(sql))` builds only the views one rule's SQL can name (the CLI: analysing a rule
over `events` builds no type view and reads no other rule's schemas); Spark resolves a view only by a name written in
the SQL, so the rule analyses exactly as over every view.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import StructType, TimestampType

from common.kafka_security import KafkaSecurity
from common.registry_client import RegistryClient
from spark_pipeline import aggregate, decode, enrich, extract, shared
from spark_pipeline.config import PipelineConfig
from spark_pipeline.extract import NO_JMX
from spark_pipeline.rules.model import OUTPUT_TOPIC_PREFIX, OUTPUT_VIEW_PREFIX, Rule, output_subject, referenced_rules
from spark_pipeline.snapshot import SchemaSnapshot, WriterSchema, subject_versions

EVENTS_VIEW = "events"
ENVELOPE_COLUMNS = ["event_id", "event_type", "producer_id", "seq", "node_id", "created_at", "sent_at",
                    "received_at", "sdk_name", "sdk_version", "context"]
ENRICHMENT_COLUMNS = ["region", "datacenter", "service", "country", "client_ip"]
TYPED_HELPERS = ["user_id", "user_agent", "metric_value"]
EVENTS_COLUMNS = [*ENVELOPE_COLUMNS, "event_time", "properties", *ENRICHMENT_COLUMNS, "browser", "os", "device",
                  *TYPED_HELPERS, "ingest_latency_ms"]
RULE_TIME = "window_time"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"[a-z_][a-z0-9_]*")


@dataclass(frozen=True)
class Views:
    """What `register_views` registered: view name -> frame, and per event type the (schema id, properties
    struct) its view was built from (compare `fingerprint()` to notice a new schema version)."""

    frames: dict[str, DataFrame]
    types: dict[str, tuple[int, StructType]] = field(default_factory=dict)
    rules: tuple[str, ...] = ()

    def fingerprint(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted((t, sid) for t, (sid, _) in self.types.items()))

    @property
    def names(self) -> list[str]:
        return sorted(self.frames)


def named_in(sql: str) -> frozenset[str]:
    """The names, lower case, that `sql` can refer to a view or a function by: every identifier-like word of the
    text (comments and strings included) and `rule_<name>` for each rule it names (`` `rule.<name>` `` too). A
    superset: a view or plugin function whose name is not in it cannot be what the SQL reads or calls."""
    return frozenset(_TOKEN.findall(sql.lower())) | {f"{OUTPUT_VIEW_PREFIX}{n}" for n in referenced_rules(sql)}


def pipeline_events(spark: SparkSession, cfg: PipelineConfig, snapshot: SchemaSnapshot, inventory: DataFrame | None, *,
                    streaming: bool, since_ms: int | None = None, realtime: bool = False,
                    starting_offsets: str = "latest") -> DataFrame:
    """The pipeline's decoded, deduplicated, enriched event rows (`shared.COLUMNS`).

    Streaming: the shared enriched stream (`shared.read_enriched`: the internal topic the built-in query `enriched`
    writes, watermarked; `realtime` for a real-time query, `starting_offsets` for a new checkpoint), or with
    `rules_realtime` off the events topic read by the rule itself (from `cfg.starting_offsets`). Batch: the
    events topic itself decoded, deduplicated exactly and enriched the same way (from the records written at or
    after `since_ms`, epoch ms, when given), which the CLI tests rules on. `inventory` (`enrich.read_inventory`) is
    not read for the shared stream (enriched already): `inventory_needed` says when it may be None.
    """
    if streaming and cfg.rules_realtime:
        return shared.read_enriched(spark, cfg, starting_offsets, realtime=realtime)
    if inventory is None:
        raise ValueError("the node inventory is needed to enrich the events here (inventory_needed)")
    if streaming:  # HEADWATER_RULES_REALTIME=0: the rule reads, decodes, deduplicates and enriches on its own
        decoded = decode.decode(decode.frame(extract.kafka_stream(spark, cfg)), snapshot, strict=True)
        watermarked = aggregate.with_watermark(decode.events(decoded), cfg.lateness)
        return shared.enriched_rows(aggregate.deduplicate(watermarked), inventory)
    raw = extract.kafka_batch(spark, cfg) if since_ms is None else (
        spark.read.format("kafka").options(**extract._kafka_options(cfg))
        .option("startingTimestamp", str(since_ms)).option("startingOffsetsByTimestampStrategy", "latest")
        .option("endingOffsets", "latest").option("failOnDataLoss", "false").load())
    rows = decode.events(decode.decode(decode.frame(raw), snapshot, strict=False))
    return shared.enriched_rows(aggregate.deduplicate(rows), inventory)


def inventory_needed(cfg: PipelineConfig, *, streaming: bool) -> bool:
    """Whether `pipeline_events` joins the node inventory itself (not when it reads the shared enriched stream)."""
    return not (streaming and cfg.rules_realtime)


def avro_struct(spark: SparkSession, schema: str) -> StructType:
    """The Spark type `from_avro` gives Avro schema `schema` (analysed only, nothing is read)."""
    dtype = spark.range(0).select(from_avro(F.lit(None).cast("binary"), schema).alias("x")).schema["x"].dataType
    if not isinstance(dtype, StructType):
        raise ValueError(f"schema is {dtype.simpleString()}, not a record")
    return dtype


def type_view_schema(spark: SparkSession, reader: WriterSchema) -> tuple[int, StructType]:
    """(schema id, properties struct) of an event type's view, from its subject's latest (reader) version.

    A type whose schema has no `properties` record gets an empty struct.
    """
    struct = avro_struct(spark, reader.schema)
    props = struct["properties"].dataType if "properties" in struct.fieldNames() else None
    return reader.schema_id, props if isinstance(props, StructType) else StructType([])


def _readers(source: SchemaSnapshot | RegistryClient, prefix: str) -> dict[str, WriterSchema]:
    if isinstance(source, SchemaSnapshot):
        return dict(source.readers)
    readers = {}
    for subject in sorted(s for s in source.subjects() if s.startswith(prefix)):
        versions = subject_versions(source, subject)
        if versions:
            readers[subject] = max(versions, key=lambda w: w.version)
    return readers


def events_view(rows: DataFrame) -> DataFrame:
    """The `events` view over the enriched rows (`pipeline_events`): the two lookups that run in Python (browser,
    OS and device from the user agent, country from the client IP) are computed here, so only for the rules
    that read them (Spark prunes an unread column, UDF included)."""
    looked_up = rows.select("*", enrich.user_agent_parts(F.col("user_agent")).alias("ua"),
                            enrich.country_of(F.col("client_ip")).alias("country"))
    props = F.from_json(F.col("properties_json"), "map<string,string>")
    return looked_up.select(
        *ENVELOPE_COLUMNS, "event_time", props.alias("properties"), *ENRICHMENT_COLUMNS,
        F.col("ua.browser").alias("browser"), F.col("ua.os").alias("os"), F.col("ua.device").alias("device"),
        "user_id", "user_agent", "metric_value", "ingest_latency_ms", "properties_json")


def type_view(events: DataFrame, event_type: str, props: StructType) -> DataFrame:
    """The view of one event type over `events_view` rows: typed `properties` and its top-level columns."""
    typed = F.from_json(F.col("properties_json"), props)
    common = [c for c in EVENTS_COLUMNS if c not in ("properties", "user_id", "metric_value")]
    flat = [F.col("properties")[f.name].alias(f.name) for f in props.fields
            if f.name not in common and f.name != "properties" and _IDENTIFIER.fullmatch(f.name)]
    rows = events.where(F.col("event_type") == event_type).select(*common, typed.alias("properties"))
    return rows.select(*common, "properties", *flat)


def rule_output_view(raw: DataFrame, writers: list[WriterSchema], lateness: str) -> DataFrame:
    """Rule output records (Kafka rows of the rule's topic) decoded: each writer version by its id, resolved to
    the latest; records of an unknown id are skipped. Watermarked on `event_time` or `window.end`."""
    reader = max(writers, key=lambda w: w.version).schema
    sid = F.expr("cast(conv(hex(substring(value, 2, 4)), 16, 10) as int)")
    body = F.expr("substring(value, 6)")
    decoded: Column | None = None
    for w in sorted(writers, key=lambda w: w.schema_id):
        value = from_avro(body, w.schema, {"avroSchema": reader, "mode": "PERMISSIVE"})
        decoded = F.when(sid == w.schema_id, value) if decoded is None else decoded.when(sid == w.schema_id, value)
    if decoded is None:
        raise ValueError("a rule output view needs at least one writer schema")
    df = raw.select(decoded.alias("r")).where(F.col("r").isNotNull()).select("r.*")
    fields = {f.name: f.dataType for f in df.schema.fields}
    if isinstance(fields.get("event_time"), TimestampType):
        return df.withWatermark("event_time", lateness)
    window = fields.get("window")
    if isinstance(window, StructType) and "end" in window.fieldNames():
        return df.withColumn(RULE_TIME, F.col("window.end")).withWatermark(RULE_TIME, lateness)
    return df


def rule_source(spark: SparkSession, bootstrap: str, name: str, streaming: bool,
                security: KafkaSecurity | None = None) -> DataFrame:
    """The raw Kafka rows of rule `name`'s output topic (a stream from the earliest offset, or a batch)."""
    options = {"kafka.bootstrap.servers": bootstrap, **(security or KafkaSecurity()).spark_options(),
               "subscribe": f"{OUTPUT_TOPIC_PREFIX}{name}", "startingOffsets": "earliest", "failOnDataLoss": "false",
               **NO_JMX}
    if streaming:
        return spark.readStream.format("kafka").options(**options).load()
    return spark.read.format("kafka").options(**options).load()


def register_views(spark: SparkSession, events_df: DataFrame, snapshot_or_registry: SchemaSnapshot | RegistryClient,
                   rule_outputs: Mapping[str, Rule], *, bootstrap: str, subject_prefix: str = "headwater.events.",
                   lateness: str = "30 seconds", registry: RegistryClient | None = None,
                   security: KafkaSecurity | None = None, only: Collection[str] | None = None) -> Views:
    """Register `events`, a view per event type and one per emitting rule of `rule_outputs` (as temp views of
    `spark`, replacing views of the same names) and return them.

    `events_df`: the pipeline's decoded, deduplicated, enriched event rows (`pipeline_events`, stream or batch).
    Rule outputs are read the same way (stream or batch) through their topics; their schemas come from `registry`
    (default `snapshot_or_registry` when it is a client). `only` (lower-case names, `named_in`): build just those
    type and rule views (`events` always), as many as one rule can name.
    """
    frames: dict[str, DataFrame] = {}
    events = events_view(events_df)
    frames[EVENTS_VIEW] = events.drop("properties_json")
    types: dict[str, tuple[int, StructType]] = {}
    for subject, reader in sorted(_readers(snapshot_or_registry, subject_prefix).items()):
        event_type = subject[len(subject_prefix):]
        if not _IDENTIFIER.fullmatch(event_type) or event_type == EVENTS_VIEW:
            continue
        if only is not None and event_type.lower() not in only:
            continue
        try:
            types[event_type] = type_view_schema(spark, reader)
        except Exception:  # a schema Spark cannot decode: the pipeline dead-letters it, no view
            continue
        frames[event_type] = type_view(events, event_type, types[event_type][1])
    client = registry or (snapshot_or_registry if isinstance(snapshot_or_registry, RegistryClient) else None)
    rules = []
    for name, rule in sorted(rule_outputs.items()):
        if rule.output_schema_id is None or client is None:
            continue
        if only is not None and f"{OUTPUT_VIEW_PREFIX}{name}".lower() not in only:
            continue
        writers = subject_versions(client, output_subject(name))
        if not writers:
            continue
        raw = rule_source(spark, bootstrap, name, events_df.isStreaming, security)
        frames[f"{OUTPUT_VIEW_PREFIX}{name}"] = rule_output_view(raw, writers, lateness)
        rules.append(name)
    for view, df in frames.items():
        df.createOrReplaceTempView(view)
        if view.startswith(OUTPUT_VIEW_PREFIX):  # the same view as `rule.<name>` (backticks in SQL)
            df.createOrReplaceTempView(f"`rule.{view[len(OUTPUT_VIEW_PREFIX):]}`")
    return Views(frames, types, tuple(rules))
