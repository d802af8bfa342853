"""Spark + Kafka tests of the whole job: streaming and replay equal a plain-Python ground truth, late data."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench.spark.generate import generate
from common.registry_client import RegistryClient
from spark_pipeline import job
from spark_pipeline.config import PipelineConfig
from spark_pipeline.snapshot import SchemaSnapshot, take_snapshot
from tests.spark_pipeline.truth import Key, live_aggregates, new_topic, produce_event_set, produce_events

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.integration]

START_MS = 1_790_000_100_000  # a multiple of 5 minutes
LATENESS_MS = 10 * 60_000


def pipeline_config(bootstrap: str, registry_url: str, topic: str, aggregates_topic: str, out: Path) -> PipelineConfig:
    return PipelineConfig(bootstrap=bootstrap, registry_url=registry_url, events_topic=topic,
                          aggregates_topic=aggregates_topic, output_dir=str(out), lateness="10 minutes",
                          registry_poll_s=3600)


def final_windows(spark: SparkSession, out: str) -> dict[Key, int]:
    rows = spark.read.parquet(job.Outputs(out).aggregates_final).selectExpr(
        "granularity", "unix_millis(window_start) AS start", "event_type", "region", "events").collect()
    return {(r["granularity"], r["start"], r["event_type"], r["region"]): r["events"] for r in rows}


def test_stream_replay_and_late_events_match_the_ground_truth(spark: SparkSession, bootstrap: str,
                                                              registry_url: str, tmp_path: Path) -> None:
    topic, aggregates_topic = new_topic(bootstrap, "test.pipeline"), new_topic(bootstrap, "test.aggregates")
    truth = produce_event_set(bootstrap, registry_url, topic, count=900, start_ms=START_MS, drop=(10, 11, 12))
    # One event 20 minutes later moves the watermark past every window of the set, so they are final.
    sentinel = list(generate(1, start_ms=truth.max_time_ms + 20 * 60_000, seed=5))
    produce_events(bootstrap, registry_url, topic, sentinel)
    truth.events += sentinel
    cfg = pipeline_config(bootstrap, registry_url, topic, aggregates_topic, tmp_path / "out")

    job.run(cfg, available_now=True, spark=spark)

    watermark = truth.max_time_ms - LATENESS_MS
    final = final_windows(spark, cfg.output_dir)
    assert final == truth.windows(max_end_ms=watermark)  # exact: duplicates removed, nothing missed
    live = live_aggregates(bootstrap, aggregates_topic)
    assert {k: int(r["events"]) for k, r in live.items()} == truth.windows()
    assert all(r["distinct_users"] == 0 for k, r in live.items() if k[2] == "server_metric")  # no user ids
    assert all(r["distinct_users"] > 0 for k, r in live.items() if k[2] == "purchase")
    outputs = job.Outputs(cfg.output_dir)
    events = spark.read.parquet(outputs.events)
    assert events.count() == events.select("event_id").distinct().count() == len(truth.events)
    dead = [r["error"] for r in spark.read.parquet(outputs.deadletter).collect()]
    assert dead == ["unknown schema id 2147483647"]

    # Late data: an hour behind the watermark -> not in the streaming outputs, counted by replay.
    late = list(generate(3, start_ms=START_MS - 3_600_000, seed=11))
    produce_events(bootstrap, registry_url, topic, late)
    job.run(cfg, available_now=True, spark=spark)
    assert final_windows(spark, cfg.output_dir) == final
    assert spark.read.parquet(outputs.events).count() == len(truth.events)

    counts = job.replay(cfg, str(tmp_path / "replay"), spark=spark)
    truth.events += late
    minutes = spark.read.parquet(str(tmp_path / "replay" / "counts_1m")).selectExpr(
        "unix_millis(window_start) AS start", "event_type", "count").collect()
    assert {(r["start"], r["event_type"]): r["count"] for r in minutes} == truth.minute_counts()
    assert counts["events"] == len(truth.events) and counts["deadletter"] == 1
    audit = {r["producer_id"]: r for r in spark.read.parquet(str(tmp_path / "replay" / "loss_audit")).collect()}
    lossy = next(iter(truth.dropped_seqs))
    assert audit[lossy]["missing"] == 3 and [tuple(g) for g in audit[lossy]["gaps"]] == [(10, 12)]
    assert sum(r["missing"] for r in audit.values()) == 3


def test_a_version_registered_after_the_snapshot_is_picked_up_without_restart(
        spark: SparkSession, bootstrap: str, registry_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic, aggregates_topic = new_topic(bootstrap, "test.newversion"), new_topic(bootstrap, "test.aggregates")
    events = list(generate(6, start_ms=START_MS, seed=21))
    produce_events(bootstrap, registry_url, topic, events)
    hidden = take_snapshot(RegistryClient(registry_url), "headwater.events.").readers[
        "headwater.events.purchase"].schema_id
    calls: list[int] = []

    def first_without_the_new_version(client: RegistryClient, prefix: str,
                                      bad_ids: frozenset[int] = frozenset()) -> SchemaSnapshot:
        snap = take_snapshot(client, prefix, bad_ids)
        calls.append(1)
        if len(calls) > 1:
            return snap
        # As if purchase v2 had been registered just after the job took its first snapshot.
        writers = {i: w for i, w in snap.writers.items() if i != hidden}
        readers = {s: (max((w for w in writers.values() if w.subject == s), key=lambda w: w.version))
                   for s in snap.readers}
        return SchemaSnapshot(writers, readers, snap.bad_ids)

    monkeypatch.setattr(job, "take_snapshot", first_without_the_new_version)
    cfg = pipeline_config(bootstrap, registry_url, topic, aggregates_topic, tmp_path / "out")
    job.run(cfg, available_now=True, spark=spark)

    assert len(calls) >= 2  # the failed batch made the job take a new snapshot
    ids = {r["event_id"] for r in spark.read.parquet(job.Outputs(cfg.output_dir).events).collect()}
    assert ids == {e.record["event_id"] for e in events}
