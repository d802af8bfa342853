"""Spark + Kafka test of the streaming loss audit: exactly the real gap is reported, then its late arrival."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench.spark.generate import generate
from spark_pipeline import job
from spark_pipeline.__main__ import main
from spark_pipeline.config import PipelineConfig
from tests.spark_pipeline.truth import new_topic, produce_events

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.integration]

START_MS = 1_790_000_700_000
Row = tuple[str, int, int, int, str]


def audit_rows(spark: SparkSession, out: str) -> list[Row]:
    df = spark.read.parquet(job.Outputs(out).loss_audit)
    assert df.where("date IS NULL OR date != to_date(detected_at) OR detected_at IS NULL").count() == 0
    return sorted((r["producer_id"], r["first_seq"], r["last_seq"], r["missing"], r["status"]) for r in df.collect())


def test_streaming_loss_audit_reports_the_real_gap_and_its_late_arrival(
        spark: SparkSession, bootstrap: str, registry_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    topic, aggregates_topic = new_topic(bootstrap, "test.lossaudit"), new_topic(bootstrap, "test.aggregates")
    events = list(generate(60, producers=3, start_ms=START_MS, seed=31))  # seq 0..19 for each of 3 producers
    lossy, duplicated, clean = dict.fromkeys(str(e.record["producer_id"]) for e in events)
    lost = [e for e in events if e.record["producer_id"] == lossy and 4 <= e.record["seq"] <= 6]
    kept = [e for e in events if e not in lost]
    produce_events(bootstrap, registry_url, topic, kept)
    # A retried batch: the duplicated producer's first 8 events again, in a later transaction.
    produce_events(bootstrap, registry_url, topic, [e for e in kept if e.record["producer_id"] == duplicated][:8])
    cfg = PipelineConfig(bootstrap=bootstrap, registry_url=registry_url, events_topic=topic,
                         aggregates_topic=aggregates_topic, output_dir=str(tmp_path / "out"), lateness="10 minutes",
                         registry_poll_s=3600, loss_grace="0 seconds")

    job.run(cfg, available_now=True, spark=spark)

    assert audit_rows(spark, cfg.output_dir) == [(lossy, 4, 6, 3, "missing")]  # nothing for the other two

    # The lost events turn up after all: the restarted query (state from its checkpoint) says so.
    produce_events(bootstrap, registry_url, topic, lost)
    job.run(cfg, available_now=True, spark=spark)

    assert audit_rows(spark, cfg.output_dir) == [(lossy, 4, 6, 3, "arrived_late"), (lossy, 4, 6, 3, "missing")]
    assert clean not in {r[0] for r in audit_rows(spark, cfg.output_dir)}

    # The output root as a Hadoop URI, as on a cluster (hdfs://...): found, read and audited all the same.
    assert main(["--env-file", str(tmp_path / "none.env"), "audit", "--output", f"file://{cfg.output_dir}"]) == 0
    printed = capsys.readouterr().out
    assert "batch loss audit" in printed and "streaming loss audit" in printed and lossy in printed
