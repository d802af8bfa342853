"""Test helpers: a registry snapshot from the schema catalog, and Kafka-shaped DataFrames of framed events."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from bench.spark.generate import Encoder, Event
from schemas.catalog import load_catalog
from spark_pipeline.snapshot import SchemaSnapshot, WriterSchema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KAFKA_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
                "timestampType int, headers array<struct<key:string,value:binary>>")


def catalog_snapshot(first_id: int = 101) -> tuple[SchemaSnapshot, dict[tuple[str, int], int]]:
    """Every catalog version as if registered with ids first_id, first_id+1, ... (v1 before v2)."""
    writers: dict[int, WriterSchema] = {}
    readers: dict[str, WriterSchema] = {}
    ids: dict[tuple[str, int], int] = {}
    next_id = first_id
    for name, et in sorted(load_catalog().event_types.items()):
        for v in range(1, et.latest_version + 1):
            w = WriterSchema(next_id, et.subject, v, et.schema_text(v))
            writers[next_id], readers[et.subject], ids[(name, v)] = w, w, next_id
            next_id += 1
    return SchemaSnapshot(writers, readers), ids


def kafka_frame(spark: SparkSession, values: list[tuple[bytes | None, list[tuple[str, bytes]]]]) -> DataFrame:
    """A DataFrame shaped like the Kafka source's, one row per (value, headers)."""
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = [(b"k", v, "t", 0, i, now, 0, [{"key": k, "value": hv} for k, hv in h]) for i, (v, h) in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def framed(encoder: Encoder, events: list[Event]) -> list[tuple[bytes | None, list[tuple[str, bytes]]]]:
    return [(encoder.encode(e), [(k, v) for k, v in e.headers if isinstance(v, bytes)]) for e in events]
