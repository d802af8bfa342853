"""Spark tests of the pure transforms on small DataFrames: decode, enrich, dedup, windows and the loss audit."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench.spark.generate import Encoder, generate
from spark_pipeline import aggregate, decode, enrich
from tests.spark_pipeline.frames import catalog_snapshot, framed, kafka_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_decode_resolves_both_versions_of_every_type_to_the_latest(spark: SparkSession) -> None:
    snapshot, ids = catalog_snapshot()
    events = list(generate(12))
    raw = kafka_frame(spark, [*framed(Encoder(ids), events), (b"\x01junk!", []), (b"\x00\x00\x00\x03\xe7xx", []),
                              (b"\x00\x00", []), (None, [])])
    decoded = decode.decode(decode.frame(raw), snapshot, strict=False)
    rows = {r["event_id"]: r for r in decode.events(decoded).collect()}
    assert set(rows) == {e.record["event_id"] for e in events}
    for e in events:
        row, rec = rows[e.record["event_id"]], e.record
        assert (row["event_type"], row["seq"], row["node_id"]) == (e.event_type, rec["seq"], rec["node_id"])
        assert row["schema_id"] == ids[(e.event_type, e.version)]
        assert row["created_at"] == dt.datetime.fromtimestamp(rec["created_at"] / 1000, dt.UTC).replace(tzinfo=None)
        # received_at: from the record, or from the header on the fast path (null in the record)
        assert row["received_at"] is not None
        if e.event_type == "page_view":
            # load_time_ms is new in v2: a v1 writer resolves to the reader's default (null)
            expected = rec["properties"]["load_time_ms"] if e.version == 2 else None
            assert row["metric_value"] == expected
            assert row["user_id"] == (rec["properties"]["user_id"] or rec["properties"]["session_id"])
        elif e.event_type == "purchase":
            assert row["metric_value"] == rec["properties"]["total"]
        else:
            assert row["metric_value"] == rec["properties"]["value"] and row["user_id"] is None
    errors = sorted(r["error"] for r in decode.dead_letters(decoded).collect())
    assert errors == ["bad magic byte (not Confluent framing)", "truncated: shorter than the 5-byte header",
                      "truncated: shorter than the 5-byte header", "unknown schema id 999"]


def test_decoding_only_the_aggregate_fields_gives_the_same_values(spark: SparkSession) -> None:
    snapshot, ids = catalog_snapshot()
    raw = kafka_frame(spark, [*framed(Encoder(ids), list(generate(24))), (b"\x00\x00\x00\x03\xe7xx", [])])
    full = decode.events(decode.decode(decode.frame(raw), snapshot, strict=False))
    projected = decode.events(decode.decode(decode.frame(raw), snapshot, strict=False,
                                            fields=decode.AGGREGATE_FIELDS))
    assert set(projected.columns) >= decode.AGGREGATE_FIELDS
    assert not {"properties_json", "context", "user_agent", "sdk_name"} & set(projected.columns)
    columns = sorted(set(projected.columns) - {"kafka_timestamp"})
    assert sorted(map(tuple, projected.select(columns).collect())) == sorted(map(tuple, full.select(columns).collect()))
    with pytest.raises(ValueError, match="not columns of the event row"):
        decode.decode(decode.frame(raw), snapshot, strict=False, fields=frozenset({"nope"}))


def test_strict_decoding_fails_the_batch_on_an_unknown_schema_id(spark: SparkSession) -> None:
    snapshot, _ = catalog_snapshot()
    raw = kafka_frame(spark, [(b"\x00\x00\x00\x03\xe7xx", [])])
    with pytest.raises(Exception, match=f"{decode.UNKNOWN_ID_MARKER}999"):
        decode.events(decode.decode(decode.frame(raw), snapshot, strict=True)).collect()


def test_enrich_adds_user_agent_country_inventory_and_latency(spark: SparkSession) -> None:
    snapshot, ids = catalog_snapshot()
    events = list(generate(6, nodes=300))  # node-0001..; the inventory lists node-0001..node-0200
    decoded = decode.decode(decode.frame(kafka_frame(spark, framed(Encoder(ids), events))), snapshot, strict=False)
    inventory = enrich.read_inventory(spark, None)
    rows = {r["event_id"]: r for r in enrich.enrich(decode.events(decoded), inventory).collect()}
    first = rows[events[0].record["event_id"]]  # page_view, Chrome on Windows, client 8.8.8.8
    assert (first["ua"]["browser"], first["ua"]["os"]) == ("Chrome", "Windows")
    assert first["country"] == "US"
    assert first["region"] == "us-east" and first["datacenter"] and first["service"]
    assert first["ingest_latency_ms"] == 20 and first["processing_latency_ms"] is not None
    assert rows[events[4].record["event_id"]]["country"] is None  # 10.0.0.7: private


def test_windows_dedup_and_minute_counts_in_batch(spark: SparkSession) -> None:
    snapshot, ids = catalog_snapshot()
    events = list(generate(30, spacing_ms=1000, start_ms=1_790_000_000_000))  # 30 s, starting on a 10 s edge
    payloads = framed(Encoder(ids), events)
    decoded = decode.decode(decode.frame(kafka_frame(spark, payloads + payloads[:5])), snapshot, strict=False)
    deduped = aggregate.deduplicate(decode.events(decoded))
    assert deduped.count() == 30
    inventory = enrich.read_inventory(spark, None)
    aggs = aggregate.windowed_aggregates(enrich.with_inventory(deduped, inventory)).collect()
    by_granularity: dict[str, int] = {}
    for r in aggs:
        by_granularity[r["granularity"]] = by_granularity.get(r["granularity"], 0) + r["events"]
    assert by_granularity == {"10s": 30, "1m": 30, "5m/1m": 150}  # each event is in 5 sliding windows
    counts = {(r["event_type"], r["count"]) for r in aggregate.counts_per_minute(deduped).collect()}
    assert sum(c for _, c in counts) == 30


def test_distinct_users_never_exceed_the_events_of_a_window(spark: SparkSession) -> None:
    # HyperLogLog estimates 24 distinct values among user-0 .. user-22 (its hashing is deterministic).
    start = dt.datetime(2026, 11, 23, 12, 0, 0, tzinfo=dt.UTC)
    rows = [(start, "page_view", "eu-west", f"user-{i}", 1.0) for i in range(23)]
    df = spark.createDataFrame(rows, "event_time timestamp, event_type string, region string, user_id string, "
                                     "metric_value double")
    assert df.selectExpr("approx_count_distinct(user_id)").collect()[0][0] == 24  # what the bound corrects
    aggs = aggregate.windowed_aggregates(df).collect()
    assert {(r["events"], r["distinct_users"]) for r in aggs} == {(23, 23)}


def test_loss_audit_reports_seq_gaps_per_producer(spark: SparkSession) -> None:
    rows = [("a", s) for s in [0, 1, 2, 5, 6, 9]] + [("b", s) for s in [0, 1, 2]] + [("c", 3)]
    seqs = spark.createDataFrame(rows, "producer_id string, seq long")
    audit = {r["producer_id"]: r for r in aggregate.loss_audit(seqs).collect()}
    assert audit["a"]["missing"] == 4 and [tuple(g) for g in audit["a"]["gaps"]] == [(3, 4), (7, 8)]
    assert audit["b"]["missing"] == 0 and audit["b"]["gaps"] == []
    assert audit["c"]["missing"] == 3 and [tuple(g) for g in audit["c"]["gaps"]] == [(0, 2)]


def test_an_inventory_given_as_a_hadoop_uri_is_read_by_spark(spark: SparkSession, tmp_path: Path) -> None:
    csv_file = tmp_path / "nodes.csv"
    csv_file.write_text("node_id,region,datacenter,service\nn-1,eu,eu-1a,web\nn-1,eu,eu-1a,web\nn-2,us,us-1b,api\n")
    rows = enrich.read_inventory(spark, f"file://{csv_file}").orderBy("node_id").collect()
    assert [tuple(r) for r in rows] == [("n-1", "eu", "eu-1a", "web"), ("n-2", "us", "us-1b", "api")]


def test_a_local_inventory_is_one_partition_with_the_first_row_of_each_node(spark: SparkSession,
                                                                              tmp_path: Path) -> None:
    # Spread over the default parallelism (32 slots) it took a 32-task job as each query started, and real-time
    # mode's admission counted all 32 as held: a real-time query starting beside it was refused.
    csv_file = tmp_path / "nodes.csv"
    csv_file.write_text("node_id,region,datacenter,service\nn-1,eu,eu-1a,web\nn-2,us,us-1b,api\nn-1,ap,ap-1,x\n")
    frame = enrich.read_inventory(spark, str(csv_file))
    assert frame.rdd.getNumPartitions() == 1
    assert [tuple(r) for r in frame.orderBy("node_id").collect()] == [("n-1", "eu", "eu-1a", "web"),
                                                                      ("n-2", "us", "us-1b", "api")]
