"""The pipeline metrics' reading of progress reports, as pyspark 4 hands them over (StreamingQueryProgress)."""

from __future__ import annotations

import urllib.request
import uuid
from typing import Any

import pytest
from pyspark.sql.streaming.listener import StreamingQueryProgress

from spark_pipeline.metrics import LATENCY_METRICS, PipelineMetrics, Sampler, figures
from spark_pipeline.rules.progress import as_dict, health
from tests.support.ports import free_port

pytestmark = pytest.mark.unit


class Watermarks:
    """High watermarks of one topic, as the Kafka consumer behind the real one would answer."""

    def __init__(self, highs: dict[int, int]) -> None:
        self.highs = highs

    def high(self, topic: str, partition: int) -> int | None:
        return self.highs.get(partition) if topic == "enriched" else None


def report(observed: dict[str, Any]) -> StreamingQueryProgress:
    """A real-time query's report with observed metrics and a Kafka source ending at offsets 40 and 50."""
    return StreamingQueryProgress.fromJson({
        "id": str(uuid.uuid4()), "runId": str(uuid.uuid4()), "name": "rules.realtime",
        "timestamp": "2026-11-26T09:00:00.000Z", "batchId": 7, "batchDuration": 5000,
        "durationMs": {"triggerExecution": 2000}, "eventTime": {}, "numInputRows": 90,
        "inputRowsPerSecond": 18.0, "processedRowsPerSecond": 45.0,
        "stateOperators": [{"operatorName": "stateStoreSave", "numRowsTotal": 12, "numRowsUpdated": 3,
                            "numRowsRemoved": 0, "allUpdatesTimeMs": 1, "allRemovalsTimeMs": 0,
                            "commitTimeMs": 1, "memoryUsedBytes": 10, "numRowsDroppedByWatermark": 0,
                            "numShufflePartitions": 2, "numStateStoreInstances": 2, "customMetrics": {}}],
        "sources": [{"description": "KafkaV2[Subscribe[enriched]]", "startOffset": {"enriched": {"0": 0, "1": 0}},
                     "endOffset": {"enriched": {"0": 40, "1": 50}}, "latestOffset": None, "numInputRows": 90,
                     "inputRowsPerSecond": 18.0, "processedRowsPerSecond": 45.0, "metrics": {}}],
        "sink": {"description": "kafka", "numOutputRows": 4, "metrics": {}},
        "observedMetrics": {LATENCY_METRICS: observed},
    })


def test_pyspark_4_reports_read_as_plain_json_values() -> None:
    progress = report({"latency_ms": [120, 480], "latency_max_ms": 700, "rows": 90, "count:route_a": 30})
    assert isinstance(progress, dict)  # pyspark 4: a dict whose observed metrics are Rows (no .get)
    assert as_dict(progress)["observedMetrics"] == {LATENCY_METRICS: {
        "latency_ms": [120, 480], "latency_max_ms": 700, "rows": 90, "count:route_a": 30}}
    assert as_dict(None) == {} and as_dict({"batchId": 1}) == {"batchId": 1}


def test_figures_of_a_report_latency_matched_rows_lag_and_state() -> None:
    progress = report({"latency_ms": [120, 480], "latency_max_ms": 700, "rows": 90, "count:route_a": 30})
    got = figures(progress, Watermarks({0: 43, 1: 50}))
    assert got is not None
    assert (got.rows_per_s, got.lag, got.state_rows, got.batch_ms) == (45.0, 3, 12, 2000.0)
    assert got.latency_ms == (120.0, 480.0, 700.0)
    assert got.matched_per_s == {"route_a": 15.0}  # 30 rows in a 2 s batch


def test_a_batch_without_rows_has_no_latency_and_an_unknown_topic_no_lag() -> None:
    got = figures(report({"latency_ms": None, "latency_max_ms": None, "rows": 0}), Watermarks({}))
    assert got is not None and got.latency_ms is None and got.lag is None
    assert figures(None, Watermarks({})) is None


def test_a_rules_health_from_a_pyspark_4_report() -> None:
    h = health(report({"rows": 0}), Watermarks({0: 40, 1: 52}))
    assert (h.batch_id, h.input_rows, h.rows_per_s, h.lag, h.state_rows) == (7, 90, 45.0, 2, 12)
    assert h.last_batch_at == 1795683600000


def test_a_stopped_sampler_releases_its_port_for_the_next_run() -> None:
    """`job.run` again in the same process (the rule runtime's restart test does) serves its own figures: the
    first run's endpoint must not keep the port (it answered with the stopped run's figures)."""
    port = free_port()
    for restarts in (1, 2):
        sampler = Sampler(PipelineMetrics(), lambda m: None, interval_s=60).start(port)
        try:
            sampler.metrics.set_query("enriched", True, None, restarts)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
                body = resp.read().decode()
            assert f'headwater_query_restarts{{query="enriched"}} {float(restarts)}' in body
        finally:
            sampler.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
