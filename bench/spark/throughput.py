"""Decode and aggregate throughput on the local session, JVM from_avro against fastavro in mapInArrow."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import fastavro
import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql import DataFrame, SparkSession

from common.avro_frame import HEADER_BYTES, read_body, schema_id_of
from spark_pipeline import aggregate, decode, enrich, extract
from spark_pipeline.config import PipelineConfig
from spark_pipeline.snapshot import SchemaSnapshot

FASTAVRO_SCHEMA = "event_id string, event_type string, seq long, created_at timestamp"


def _best_rate(n: int, action: Callable[[], object], runs: int = 2) -> float:
    """Events per second of the fastest of `runs` executions (the first warms the JVM's code paths)."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return n / best


def _noop(df: DataFrame) -> Callable[[], object]:
    return lambda: df.write.format("noop").mode("overwrite").save()


def fastavro_decoder(snapshot: SchemaSnapshot) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The alternative measured side by side: fastavro per record inside mapInArrow (envelope fields only)."""
    parsed = {sid: (fastavro.parse_schema(json.loads(w.schema)),
                    fastavro.parse_schema(json.loads(snapshot.readers[w.subject].schema)))
              for sid, w in snapshot.writers.items()}

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            out: dict[str, list[Any]] = {"event_id": [], "event_type": [], "seq": [], "created_at": []}
            for value in batch.column("value").to_pylist():
                writer, reader = parsed[schema_id_of(value)]
                rec: dict[str, Any] = read_body(value[HEADER_BYTES:], writer, reader)
                out["event_id"].append(str(rec["event_id"]))  # logicalType uuid decodes to uuid.UUID
                out["event_type"].append(rec["event_type"])
                out["seq"].append(rec["seq"])
                out["created_at"].append(rec["created_at"])
            yield pa.RecordBatch.from_pydict(out, schema=pa.schema([
                ("event_id", pa.string()), ("event_type", pa.string()), ("seq", pa.int64()),
                ("created_at", pa.timestamp("us", tz="UTC"))]))

    return run


def measure(spark: SparkSession, cfg: PipelineConfig, snapshot: SchemaSnapshot, n: int) -> dict[str, float]:
    """Events/s: reading Kafka; then, from the records cached in memory (so the decode cost is not hidden
    behind the broker), JVM decode, decode + dedup + every window spec, and fastavro in mapInArrow."""
    kafka = extract.kafka_batch(spark, cfg)
    read_rate = _best_rate(n, _noop(kafka))
    raw = kafka.persist()
    raw.count()
    inventory = enrich.read_inventory(spark, cfg.nodes_file).cache()
    events = decode.events(decode.decode(decode.frame(raw), snapshot, strict=False))
    aggregated = aggregate.windowed_aggregates(enrich.with_inventory(aggregate.deduplicate(events), inventory))
    projected = decode.events(decode.decode(decode.frame(raw), snapshot, strict=False,
                                            fields=decode.AGGREGATE_FIELDS))
    projected_aggregated = aggregate.windowed_aggregates(
        enrich.with_inventory(aggregate.deduplicate(projected), inventory))
    fast = raw.select("value").mapInArrow(fastavro_decoder(snapshot), FASTAVRO_SCHEMA)
    try:
        return {
            "kafka_read_eps": read_rate,
            "jvm_decode_eps": _best_rate(n, _noop(events)),
            # What the aggregates need: every column but properties_json (the properties re-encoded as JSON,
            # which only the events output stores); Spark prunes it from those plans.
            "jvm_decode_without_json_eps": _best_rate(n, _noop(events.drop("properties_json"))),
            "jvm_decode_dedup_aggregate_eps": _best_rate(n, _noop(aggregated)),
            # What the aggregates and the loss audit decode: Avro skips the fields no column reads.
            "jvm_decode_aggregate_fields_eps": _best_rate(n, _noop(projected)),
            "jvm_decode_aggregate_fields_dedup_aggregate_eps": _best_rate(n, _noop(projected_aggregated)),
            "fastavro_mapinarrow_decode_eps": _best_rate(n, _noop(fast)),
        }
    finally:
        raw.unpersist()
