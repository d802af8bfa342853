"""Prometheus metrics of one gateway process (aggregated across worker processes in multiprocess mode)."""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _mp

_LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_SIZES = (1, 2, 5, 10, 20, 40, 100, 200, 500, 1000, 2000, 5000)
_BYTES = (256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)

REQUESTS = Counter("headwater_gateway_requests_total", "HTTP requests by outcome", ["path", "status", "code"])
EVENTS = Counter("headwater_gateway_events_total", "events by outcome (accepted, rejected)", ["outcome", "format"])
REJECTIONS = Counter("headwater_gateway_rejections_total", "rejected events by code", ["code"])
BYTES_IN = Counter("headwater_gateway_bytes_received_total", "request body bytes", ["stage"])
BATCH_EVENTS = Histogram("headwater_gateway_batch_events", "events per batch", buckets=_SIZES)
BODY_BYTES = Histogram("headwater_gateway_body_bytes", "decompressed body bytes per batch", buckets=_BYTES)
STAGE_SECONDS = Histogram("headwater_gateway_stage_seconds", "time per request stage", ["stage"], buckets=_LATENCY)
REQUEST_SECONDS = Histogram("headwater_gateway_request_seconds", "whole /v1/batch request", buckets=_LATENCY)
COMMIT_SECONDS = Histogram("headwater_gateway_commit_seconds", "one Kafka transaction (produce + commit)",
                           ["outcome"], buckets=_LATENCY)
COMMIT_BATCHES = Histogram("headwater_gateway_commit_batches", "batches per transaction", buckets=_SIZES)
COMMIT_RECORDS = Histogram("headwater_gateway_commit_records", "records per transaction", buckets=_SIZES)
INFLIGHT_EVENTS = Gauge("headwater_gateway_inflight_events", "events being processed", multiprocess_mode="livesum")
INFLIGHT_BYTES = Gauge("headwater_gateway_inflight_bytes", "body bytes being processed", multiprocess_mode="livesum")
PRODUCER_QUEUE = Gauge("headwater_gateway_producer_queue", "batches waiting + records in the producer queue",
                       multiprocess_mode="livesum")
DEDUP_HITS = Counter("headwater_gateway_replayed_batches_total", "retries answered from the committed-batch cache")


class CommitMetrics:
    """The group committer's observer."""

    def transaction(self, seconds: float, batches: int, records: int, ok: bool) -> None:
        COMMIT_SECONDS.labels("committed" if ok else "aborted").observe(seconds)
        COMMIT_BATCHES.observe(batches)
        COMMIT_RECORDS.observe(records)


def render() -> tuple[bytes, str]:
    """The exposition text: every worker's values when PROMETHEUS_MULTIPROC_DIR is set, else this process's."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        _mp.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
