"""Decodes Confluent-framed Avro records into one flat event row per record, by writer schema id, in the JVM.

Each record's schema id selects its writer schema; `from_avro(body, writer, {avroSchema: reader})` resolves
it to the latest version of its subject by Avro's rules (the second argument is the WRITER schema, the
option the READER). All event types share the topic, so every type is reduced to one stable row: the
envelope fields, the type's `properties` as JSON, and the few typed columns the aggregates need
(`user_id`, `user_agent`, `metric_value`). A new version or event type therefore changes the decoder but
never the output schema, which is what the streaming state and the Parquet files depend on.

Records whose id the snapshot does not know make the batch fail with UNKNOWN_SCHEMA_ID (`strict=True`,
streaming): the job then takes a new snapshot and restarts from the checkpoint, so nothing is lost or
counted twice. Ids the registry does not know either, bad framing and Avro errors go to the dead-letter
output with a reason.

Each subject's decoded struct is brought to the canonical row by `normalise.py` before the coalesce (a plain
`long` created_at becomes a timestamp, ...). A subject whose schema cannot be normalised, or that Spark
cannot decode at all, is skipped with a logged warning: the other types decode as usual and its records go
to the dead letters as `unusable schema <subject>: <why>`, so one odd schema never stops the job.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import fastavro
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from spark_pipeline import normalise
from spark_pipeline.snapshot import SchemaSnapshot

log = logging.getLogger("spark_pipeline")

UNKNOWN_ID_MARKER = "HEADWATER_UNKNOWN_SCHEMA_ID="

ENVELOPE = ["event_id", "event_type", "producer_id", "seq", "node_id", "created_at", "sent_at",
            "received_at", "sdk_name", "sdk_version", "context"]

# Which `properties` fields feed the typed columns, per event type, first present non-null wins.
# A type missing here still decodes; its typed columns are null.
TYPED_FIELDS: dict[str, dict[str, list[str]]] = {
    "page_view": {"user_id": ["user_id", "session_id"], "user_agent": ["user_agent"],
                  "metric_value": ["load_time_ms"]},
    "purchase": {"user_id": ["user_id"], "metric_value": ["total"]},
    "server_metric": {"metric_value": ["value"]},
}
TYPED_COLUMNS = {name: t.simpleString() for name, t in normalise.TYPED_TYPES.items()}
HEADERS = ["received_at", "client_ip", "user_agent", "batch_id", "source"]
ROW_COLUMNS = [*ENVELOPE, "properties_json", *TYPED_COLUMNS]
# What the aggregates and the loss audit read: decoding only these (`decode(fields=...)`) lets Avro skip the
# bulk of each record (URLs, line items, tags) instead of building it and re-encoding it as JSON.
AGGREGATE_FIELDS = frozenset({"event_id", "event_type", "producer_id", "seq", "node_id", "created_at",
                              "received_at", "user_id", "metric_value"})
# events() derives received_at and event_time from these.
_ALWAYS = frozenset({"created_at", "received_at"})


def header(name: str) -> Column:
    """The value of Kafka header `name` as a string (null when absent), from the map `frame` builds once.

    map_from_entries is code-generated, a `filter` lambda is not (3x slower here); a repeated header key
    keeps its last value (the session sets spark.sql.mapKeyDedupPolicy=LAST_WIN).
    """
    return F.col("_headers")[name].cast("string")


def frame(raw: DataFrame) -> DataFrame:
    """Split Kafka's `value` into magic byte, schema id and Avro body; keep the Kafka coordinates and headers."""
    with_map = raw.select("*", F.expr("map_from_entries(headers)").alias("_headers"))
    return with_map.select(
        "topic", "partition", "offset", F.col("timestamp").alias("kafka_timestamp"), "value",
        F.expr("length(value)").alias("length"),
        F.expr("cast(conv(hex(substring(value, 1, 1)), 16, 10) as int)").alias("magic"),
        F.expr("cast(conv(hex(substring(value, 2, 4)), 16, 10) as int)").alias("schema_id"),
        F.expr("substring(value, 6)").alias("body"),
        *[header(h).alias(f"h_{h}") for h in HEADERS],
    )


def _subject_columns(snapshot: SchemaSnapshot) -> dict[str, str]:
    """One decoded column per subject: `d0`, `d1`... (subject names are not valid column names)."""
    return {subject: f"d{i}" for i, subject in enumerate(sorted(snapshot.readers))}


def projected_reader(reader_schema: str, event_type: str, fields: frozenset[str]) -> str:
    """The reader schema cut down to what the flat-row columns `fields` read; Avro skips the rest.

    Skipping a field reads only its lengths, so a record decodes at a fraction of the cost of the full
    reader. Every kept field is kept whole (type, default, doc), so Avro's resolution against older writers
    is unchanged. Falls back to the full schema when cutting would orphan a named type another field uses.
    """
    parsed: Any = json.loads(reader_schema)
    if not isinstance(parsed, dict):  # not a record: nothing to cut (the decoder skips such a subject)
        return reader_schema
    sources = TYPED_FIELDS.get(event_type, {})
    wanted_props = {src for name in fields & TYPED_COLUMNS.keys() for src in sources.get(name, [])}
    kept = []
    for f in parsed.get("fields", []):
        if f["name"] == "properties" and isinstance(f["type"], dict) and f["type"].get("type") == "record":
            if "properties_json" in fields:
                kept.append(f)
            elif wanted_props:
                props = [p for p in f["type"]["fields"] if p["name"] in wanted_props]
                kept.append({**f, "type": {**f["type"], "fields": props}})
        elif f["name"] in fields:
            kept.append(f)
    projected = json.dumps({**parsed, "fields": kept})
    try:
        fastavro.parse_schema(json.loads(projected))
    except (fastavro.schema.SchemaParseException, ValueError):  # UnknownType is a ValueError
        return reader_schema
    return projected


def _decoded_struct(snapshot: SchemaSnapshot, subject: str, fields: frozenset[str]) -> Column:
    """The subject's reader-schema struct (projected to `fields`), decoded with the writer schema the record's
    id names."""
    reader = projected_reader(snapshot.readers[subject].schema, subject.rsplit(".", 1)[-1], fields)
    out: Column | None = None
    for sid, w in sorted(snapshot.writers.items()):
        if w.subject != subject:
            continue
        value = from_avro(F.col("body"), w.schema, {"avroSchema": reader, "mode": "PERMISSIVE"})
        cond = F.col("schema_id") == sid
        out = F.when(cond, value) if out is None else out.when(cond, value)
    if out is None:
        raise ValueError(f"snapshot has a reader but no writer schema for {subject}")
    return out


@dataclass(frozen=True)
class SubjectPlan:
    """How one subject decodes: its column and ids, then either the decode, row and row condition, or the
    reason it is skipped (its records are dead-lettered with it)."""

    subject: str
    column: str
    ids: tuple[int, ...]
    decoded: Column | None = None
    row: Column | None = None
    valid: Column | None = None
    reason: str | None = None


_warned: set[tuple[str, str]] = set()


def plan_subject(framed: DataFrame, snapshot: SchemaSnapshot, subject: str, column: str,
                 fields: frozenset[str]) -> SubjectPlan:
    """Plan `subject`'s decode into `column`; a schema Spark cannot decode or normalise is skipped (logged once).

    The decoded struct's type is Spark's own (the plan is analysed), so the normalisation sees exactly what
    from_avro yields for the reader schema.
    """
    ids = tuple(sorted(sid for sid, w in snapshot.writers.items() if w.subject == subject))
    try:
        decoded = _decoded_struct(snapshot, subject, fields)
        struct = framed.select(decoded.alias(column)).schema[column].dataType
        row, valid = normalise.canonical_row(F.col(column), struct, TYPED_FIELDS.get(subject.rsplit(".", 1)[-1], {}),
                                             fields)
        return SubjectPlan(subject, column, ids, decoded, row, valid)
    except normalise.Unusable as exc:
        reason = str(exc)
    except Exception as exc:  # any schema Spark refuses (AnalysisException, Py4JJavaError...): skip this one only
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        reason = f"Spark cannot decode it: {first_line[:300]}"
    if (subject, reason) not in _warned:
        _warned.add((subject, reason))
        log.warning("skipping event schema %s (ids %s): %s; its records go to the dead letters", subject,
                    list(ids), reason)
    return SubjectPlan(subject, column, ids, reason=f"unusable schema {subject}: {reason}")


def _row_ok(plan: SubjectPlan) -> Column:
    present = F.col(plan.column).isNotNull()
    return present if plan.valid is None else present & plan.valid


def decode(framed: DataFrame, snapshot: SchemaSnapshot, strict: bool,
           fields: frozenset[str] | None = None) -> DataFrame:
    """Add `event` (the flat row, null if undecodable) and `error` (the dead-letter reason, null if decoded).

    `fields`: the ROW_COLUMNS to decode (default all; `created_at` and `received_at` always). A projected
    decode still walks every byte of the record (a truncated or mis-framed record still fails), but skips
    instead of building what it does not keep, so only a full decode proves a record wholly valid: the
    dead-letter output comes from a full one.

    Two projections on purpose: the first decodes each record once into its subject's column, the second
    only reads those columns (Spark does not merge projections that would repeat an expensive expression).
    """
    wanted = frozenset(ROW_COLUMNS) if fields is None else frozenset(fields) | _ALWAYS
    if unknown_fields := wanted - set(ROW_COLUMNS):
        raise ValueError(f"not columns of the event row: {sorted(unknown_fields)}")
    plans = [plan_subject(framed, snapshot, s, c, wanted) for s, c in _subject_columns(snapshot).items()]
    usable = [p for p in plans if p.reason is None]
    known = list(snapshot.writers)
    sid = F.col("schema_id")
    id_known = sid.isin(known) if known else F.lit(False)
    bad_frame = (F.col("value").isNull() | (F.col("length") < 6) | (F.col("magic") != 0))
    unknown = ~bad_frame & ~id_known
    # spark_partition_id() is nondeterministic (and always >= 0): it stops the optimizer from pushing the
    # `error` filters of `events`/`dead_letters` below this projection, which would repeat every from_avro.
    barrier = ~bad_frame & (F.spark_partition_id() >= 0)
    step1 = framed.select("*", *[F.when(barrier, p.decoded).alias(p.column) for p in usable])
    rows = [F.when(_row_ok(p), p.row) for p in usable]
    event = F.coalesce(*rows) if rows else F.lit(None).cast(normalise.row_type(wanted))
    error = F.when(F.lit(False), F.lit(None).cast("string"))
    if strict:  # in `error` because every query reads it (an unused column would be pruned away)
        bad = list(snapshot.bad_ids)
        is_bad = sid.isin(bad) if bad else F.lit(False)
        fail = F.raise_error(F.concat(F.lit(UNKNOWN_ID_MARKER), sid.cast("string")))
        error = error.when(unknown & ~is_bad, fail)
    truncated = F.col("value").isNull() | (F.col("length") < 6)
    error = (error.when(truncated, F.lit("truncated: shorter than the 5-byte header"))
             .when(F.col("magic") != 0, F.lit("bad magic byte (not Confluent framing)"))
             .when(unknown, F.concat(F.lit("unknown schema id "), sid.cast("string"))))
    for p in plans:
        if p.reason is not None:
            error = error.when(sid.isin(list(p.ids)), F.lit(p.reason))
        elif p.valid is not None:
            error = error.when(F.col(p.column).isNotNull() & ~p.valid, F.lit(
                f"envelope timestamp out of range (epoch milliseconds expected) for {p.subject}"))
    error = error.when(event.isNull(), F.concat(F.lit("Avro decode failed with writer schema id "),
                                                sid.cast("string")))
    keep = [c for c in framed.columns if c != "body"]
    return step1.select(*keep, event.alias("event"), error.alias("error"))


def events(decoded: DataFrame) -> DataFrame:
    """The decoded records as flat event rows, with the gateway's headers and an event time.

    `received_at` comes from the record, or on the Avro fast path (null there) from the header.
    `event_time` = least(created_at, received_at): a producer clock running ahead can never push the
    watermark past the gateway's clock.
    """
    ok = decoded.where(F.col("error").isNull())
    received = F.coalesce(F.col("received_at"), F.timestamp_millis(F.expr("try_cast(h_received_at as bigint)")))
    return ok.select(
        "event.*", "topic", "partition", "offset", "kafka_timestamp", "schema_id",
        F.col("h_client_ip").alias("client_ip"), F.col("h_batch_id").alias("batch_id"),
        F.col("h_source").alias("source"), F.col("h_user_agent").alias("header_user_agent"), "h_received_at",
    ).withColumn("received_at", received).drop("h_received_at").withColumn(
        "event_time", F.least(F.col("created_at"), F.col("received_at")))


def dead_letters(decoded: DataFrame) -> DataFrame:
    """The undecodable records with the reason, their coordinates and the raw value in hex."""
    return decoded.where(F.col("error").isNotNull()).select(
        "topic", "partition", "offset", "kafka_timestamp", "schema_id", "error",
        F.hex("value").alias("value_hex"), F.current_timestamp().alias("detected_at"),
        F.to_date("kafka_timestamp").alias("date"))
