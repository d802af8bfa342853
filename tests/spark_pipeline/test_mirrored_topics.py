"""Tests of a pipeline reading mirrored events topics: each event counted once across them, the source kept."""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import avro.schema
import fastavro
import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.spark.generate import Encoder, Event, generate, produce, register_catalog
from registry.compat import check
from spark_pipeline import aggregate, decode, enrich, job, shared
from spark_pipeline.config import PipelineConfig
from tests.spark_pipeline.frames import catalog_snapshot, framed, kafka_frame
from tests.spark_pipeline.truth import EventSet, live_aggregates, new_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

START_MS = 1_790_000_400_000  # a multiple of 5 minutes
BAD = b"\x00\x7f\xff\xff\xfenot avro"  # framed, with an id no registry has


@pytest.mark.unit
def test_the_enriched_record_keeps_its_first_version_readable() -> None:
    v1 = avro.schema.parse(shared.ENRICHED_SCHEMA_V1_JSON)
    assert check("BACKWARD", avro.schema.parse(shared.ENRICHED_SCHEMA_JSON), [(1, v1)]) == []
    assert shared.COLUMNS[-1] == "source_topic" and "source_topic" not in shared.ENRICHED_SCHEMA_V1_JSON


@pytest.mark.spark
def test_enriched_rows_name_their_topic_and_records_of_both_versions_decode(spark: SparkSession) -> None:
    snapshot, ids = catalog_snapshot()
    events = list(generate(6, seed=3))
    raw = kafka_frame(spark, framed(Encoder(ids), events)).withColumnRenamed("topic", "t").selectExpr(
        "*", "if(offset % 2 = 0, 'headwater.events', 'a.headwater.events') AS topic").drop("t")
    rows = shared.enriched_rows(aggregate.deduplicate(decode.events(decode.decode(decode.frame(raw), snapshot,
                                                                                  strict=False))),
                                enrich.read_inventory(spark, None))
    records = shared.enriched_records(rows, schema_id=7)
    # A record the first version wrote (no source_topic), framed as the enriched query frames it.
    old = {c: None for c in shared.COLUMNS[:-1]} | {"event_id": "old-1", "seq": 4, "event_time": 1_790_000_000_000}
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(json.loads(shared.ENRICHED_SCHEMA_V1_JSON)), old)
    old_record = spark.createDataFrame([(b"old-1", b"\x00\x00\x00\x00\x06" + body.getvalue())],
                                       "key binary, value binary")

    decoded = {r["event_id"]: r for r in shared.decode_enriched(records.unionByName(old_record)).collect()}

    expected = {str(e.record["event_id"]): "headwater.events" if i % 2 == 0 else "a.headwater.events"
                for i, e in enumerate(events)}
    assert {k: r["source_topic"] for k, r in decoded.items() if k != "old-1"} == expected
    assert all(decoded[k]["seq"] == e.record["seq"] for k, e in zip(expected, events, strict=True))
    assert (decoded["old-1"]["seq"], decoded["old-1"]["source_topic"]) == (4, None)
    assert decoded["old-1"]["event_time"] == dt.datetime.fromtimestamp(1_790_000_000, dt.UTC).replace(tzinfo=None)


def _payloads(encoder: Encoder, events: list[Event]) -> list[tuple[bytes, bytes, list[tuple[str, str | bytes | None]]]]:
    return [(e.key, encoder.encode(e), e.headers) for e in events]


@pytest.mark.spark
@pytest.mark.integration
def test_events_and_their_mirrored_copies_are_counted_once(spark: SparkSession, bootstrap: str, registry_url: str,
                                                          tmp_path: Path) -> None:
    local, mirrored = new_topic(bootstrap, "test.region.b"), new_topic(bootstrap, "test.region.a")
    later = f"test.region.c.{uuid.uuid4().hex[:10]}"  # a region whose mirror has not created its topic yet
    aggregates_topic = new_topic(bootstrap, "test.aggregates")
    encoder = Encoder(register_catalog(registry_url))
    events = list(generate(150, producers=3, start_ms=START_MS, spacing_ms=1000, seed=41))
    lossy = str(events[0].record["producer_id"])
    lost = [e for e in events if e.record["producer_id"] == lossy and e.record["seq"] in (20, 21)]
    sent = [e for e in events if e not in lost]
    # A third in both topics (region A's events mirrored into B, or a batch A acknowledged whose answer was lost
    # and that B accepted again), a third only here, a third only in the mirrored copy: neither topic alone holds
    # a gapless seq for any producer.
    both, only_local, only_mirrored = sent[0::3], sent[1::3], sent[2::3]
    # One event 20 minutes later moves the watermark past every window of the set, so they are final.
    sentinel = list(generate(1, start_ms=START_MS + 40 * 60_000, seed=42))
    produce(bootstrap, local, _payloads(encoder, both + only_local))
    produce(bootstrap, mirrored, [*_payloads(encoder, both + only_mirrored + sentinel), (b"bad", BAD, [])])
    truth = EventSet(sent + sentinel)
    cfg = PipelineConfig(bootstrap=bootstrap, registry_url=registry_url, events_topic=local,
                         mirrored_topics=(mirrored, later), aggregates_topic=aggregates_topic, output_dir=str(tmp_path),
                         lateness="10 minutes", registry_poll_s=3600, loss_grace="0 seconds")

    job.run(cfg, available_now=True, spark=spark)

    out = job.Outputs(cfg.output_dir)
    stored = spark.read.parquet(out.events).select("event_id", "topic").collect()
    assert sorted(r["event_id"] for r in stored) == sorted(str(e.record["event_id"]) for e in truth.events)
    where = {r["event_id"]: r["topic"] for r in stored}
    assert {where[str(e.record["event_id"])] for e in only_mirrored + sentinel} == {mirrored}
    assert {where[str(e.record["event_id"])] for e in only_local} == {local}
    assert set(where[str(e.record["event_id"])] for e in both) <= {local, mirrored}
    live = live_aggregates(bootstrap, aggregates_topic)
    assert {k: int(r["events"]) for k, r in live.items()} == truth.windows()
    final = spark.read.parquet(out.aggregates_final).selectExpr(
        "granularity", "unix_millis(window_start) AS start", "event_type", "region", "events").collect()
    watermark = truth.max_time_ms - 10 * 60_000
    assert {(r["granularity"], r["start"], r["event_type"], r["region"]): r["events"] for r in final} == \
        truth.windows(max_end_ms=watermark)
    # The loss audit sees both topics: only the two seqs sent to neither are reported.
    gaps = [(r["producer_id"], r["first_seq"], r["last_seq"], r["status"])
            for r in spark.read.parquet(out.loss_audit).collect()]
    assert gaps == [(lossy, 20, 21, "missing")]
    # A mirrored record that does not decode is a dead letter of this region, naming the topic it was read from.
    dead = [(r["topic"], r["error"]) for r in spark.read.parquet(out.deadletter).collect()]
    assert dead == [(mirrored, "unknown schema id 2147483646")]

    # The missing topic appears (MirrorMaker 2 created it): its events are read from its first offset.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert later not in admin.list_topics(timeout=10).topics
    admin.create_topics([NewTopic(later, 2, 1)])[later].result(30)
    arrived = list(generate(4, producers=1, start_ms=START_MS + 39 * 60_000, seed=43))
    produce(bootstrap, later, _payloads(encoder, arrived))
    # Behind the watermark now (the mirror lagged more than the lateness): a copy of a counted event is not counted
    # again, and an event only the mirror brings is late, so not counted either (replay would count it).
    late = list(generate(2, producers=1, start_ms=START_MS, seed=44))
    produce(bootstrap, mirrored, _payloads(encoder, both[:3] + late))
    job.run(cfg, available_now=True, spark=spark)
    stored = spark.read.parquet(out.events).where(f"topic = '{later}'").select("event_id").collect()
    assert sorted(r["event_id"] for r in stored) == sorted(str(e.record["event_id"]) for e in arrived)
    assert spark.read.parquet(out.events).count() == len(truth.events) + len(arrived)
