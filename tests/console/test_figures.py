"""Unit tests of the console's pure parts: metrics parsing, rates and quantiles, checkpoint offsets, loss audit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from console.app import Console
from console.config import ConfigError, ConsoleConfig
from console.kafka_view import MAX_REASONS, KafkaFigures, KafkaView, newest_windows
from console.pipeline_files import (
    checkpoint_offsets,
    lag,
    last_batch_at,
    net_loss,
    pipeline_health,
    read_loss_audit,
)
from console.prom import parse, quantile, rate
from console.sampler import Sampler

pytestmark = pytest.mark.unit

EXPOSITION = """
# TYPE headwater_gateway_events_total counter
headwater_gateway_events_total{outcome="accepted",format="json"} 900.0
headwater_gateway_events_total{outcome="accepted",format="avro"} 100.0
headwater_gateway_events_total{outcome="rejected",format="json"} 10.0
# TYPE headwater_gateway_rejections_total counter
headwater_gateway_rejections_total{code="unknown_schema_version"} 10.0
# TYPE headwater_gateway_requests_total counter
headwater_gateway_requests_total{path="/v1/batch",status="200",code="ok"} 50.0
headwater_gateway_requests_total{path="/v1/batch",status="503",code="overloaded"} 4.0
headwater_gateway_requests_total{path="/metrics",status="200",code="ok"} 7.0
# TYPE headwater_gateway_request_seconds histogram
headwater_gateway_request_seconds_bucket{le="0.01"} 10.0
headwater_gateway_request_seconds_bucket{le="0.1"} 40.0
headwater_gateway_request_seconds_bucket{le="+Inf"} 54.0
headwater_gateway_request_seconds_count 54.0
headwater_gateway_request_seconds_sum 2.0
# TYPE headwater_gateway_inflight_events gauge
headwater_gateway_inflight_events 12.0
"""


def test_exposition_sums_over_gateways() -> None:
    one = parse(EXPOSITION)
    assert (one.accepted, one.rejected_by_code, one.inflight_events) == (1000.0, {"unknown_schema_version": 10.0}, 12)
    assert one.answers_by_code == {"ok": 50.0, "overloaded": 4.0}  # /metrics requests are not batches
    two = parse(EXPOSITION, parse(EXPOSITION))
    assert (two.accepted, two.up, two.latency_buckets[0.1]) == (2000.0, 2, 80.0)


def test_rates_survive_a_counter_reset() -> None:
    assert rate(150, 100, 10) == 5.0
    assert rate(30, 100, 10) == 3.0  # the process restarted: count from zero
    assert rate(1, 0, 0) == 0.0


def test_quantile_interpolates_within_the_bucket_of_the_increase() -> None:
    old = {0.01: 0.0, 0.1: 0.0, float("inf"): 0.0}
    new = {0.01: 50.0, 0.1: 100.0, float("inf"): 100.0}
    assert quantile(0.5, new, old) == pytest.approx(0.01)
    assert quantile(0.75, new, old) == pytest.approx(0.055)
    assert quantile(0.99, {0.01: 0.0, float("inf"): 10.0}, {}) == 0.01  # beyond the last bound: the bound
    assert quantile(0.5, new, new) is None  # no request in between


def test_sampler_turns_counters_into_per_second_series() -> None:
    sampler = Sampler()
    kafka = KafkaFigures(deadletters_total=5)
    first = parse(EXPOSITION)
    sampler.add(100.0, first, kafka, None)
    second = parse(EXPOSITION.replace("900.0", "1100.0").replace("le=\"0.1\"} 40.0", "le=\"0.1\"} 140.0")
                   .replace("le=\"+Inf\"} 54.0", "le=\"+Inf\"} 154.0"))
    point = sampler.add(102.0, second, KafkaFigures(deadletters_total=9), 7)
    assert point["accepted"] == 100.0 and point["deadletters"] == 2.0 and point["lag"] == 7
    assert point["rejected"] == {"unknown_schema_version": 0.0}
    assert 10 < point["latency_ms"]["p50"] <= 100
    snap = sampler.snapshot(kafka, net_loss([]), {"kafka": "ok"})
    assert snap["samples"] == 2 and len(snap["series"]) == 2


def test_checkpoint_offsets_come_from_the_newest_offset_log_entry(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints" / "aggregates_live" / "offsets"
    folder.mkdir(parents=True)
    assert checkpoint_offsets(tmp_path, "headwater.events") is None
    for batch, offsets in ((1, {"0": 5, "1": 7}), (2, {"0": 9, "1": 11})):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1}
        (folder / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps({'headwater.events': offsets})}\n")
    (folder / ".2.crc").write_text("x")
    committed = checkpoint_offsets(tmp_path, "headwater.events")
    assert committed == {0: 9, 1: 11}
    assert lag({0: 10, 1: 20}, committed) == 10
    assert lag({0: 10}, None) is None
    assert checkpoint_offsets(tmp_path, "headwater.events", committed=True) is None  # no commit log yet
    (folder.parent / "commits").mkdir()
    (folder.parent / "commits" / "1").write_text("v1\n{}\n")
    assert checkpoint_offsets(tmp_path, "headwater.events", committed=True) == {0: 5, 1: 7}


def test_net_loss_lists_open_gaps_first() -> None:
    rows = [
        {"producer_id": "a", "first_seq": 4, "last_seq": 6, "missing": 3, "status": "missing"},
        {"producer_id": "a", "first_seq": 4, "last_seq": 6, "missing": 3, "status": "arrived_late"},
        {"producer_id": "b", "first_seq": 10, "last_seq": 19, "missing": 10, "status": "missing"},
    ]
    audit = net_loss(rows)
    assert audit.still_missing == 10 and audit.rows == 3
    assert [(p["producer_id"], p["still_missing"], p["gaps"]) for p in audit.producers] == [
        ("b", 10, [[10, 19]]), ("a", 0, [[4, 6]])]


def test_newest_window_per_type_and_region() -> None:
    aggs = {("1m", 60_000, "page_view", "eu"): {"events": 3}, ("1m", 120_000, "page_view", "eu"): {"events": 5},
            ("1m", 120_000, "purchase", "us"): {"events": 1}, ("10s", 130_000, "page_view", "eu"): {"events": 9}}
    newest = newest_windows(aggs, "1m")
    assert newest["window_start"] == 120_000
    assert [(r["event_type"], r["events"]) for r in newest["rows"]] == [("page_view", 5), ("purchase", 1)]
    assert newest_windows({}, "1m")["rows"] == []


def test_config_reads_the_stack_names_and_rejects_bad_urls() -> None:
    cfg = ConsoleConfig.from_env({"GATEWAY_URL": "http://127.0.0.1:9/", "KAFKA_BOOTSTRAP": "k:1",
                                  "HEADWATER_CONSOLE_PORT": "8099"})
    assert (cfg.gateways, cfg.bootstrap, cfg.port, cfg.host) == (("http://127.0.0.1:9",), "k:1", 8099, "127.0.0.1")
    with pytest.raises(ConfigError, match="HEADWATER_CONSOLE_GATEWAYS"):
        ConsoleConfig.from_env({"HEADWATER_CONSOLE_GATEWAYS": "gw:8080"})
    with pytest.raises(ConfigError, match="HEADWATER_CONSOLE_PORT"):
        ConsoleConfig.from_env({"HEADWATER_CONSOLE_PORT": "0"})


def test_a_healthy_pipeline_without_gaps_has_no_audit_file_and_that_is_no_error(tmp_path: Path) -> None:
    """The loss audit writes Parquet only for gaps: its folder holding only Spark's metadata log is the healthy
    case, once shown as `loss audit unreadable: ArrowInvalid`."""
    metadata = tmp_path / "loss_audit" / "_spark_metadata"
    metadata.mkdir(parents=True)
    (metadata / "0").write_text("v1\n")
    audit = read_loss_audit(tmp_path)
    assert (audit.error, audit.still_missing, audit.rows) == (None, 0, 0)


def test_the_pipeline_is_green_only_while_its_live_query_commits_batches(tmp_path: Path) -> None:
    assert pipeline_health(None, None, None) == "no checkpoint yet"
    assert pipeline_health({0: 5}, 0, 3.0) == "ok"
    assert pipeline_health({0: 5}, 120, 10.0) == "ok"  # behind, but moving
    assert pipeline_health({0: 5}, 0, 600.0).startswith("idle: last batch 600 s ago")
    assert pipeline_health({0: 5}, 120, 600.0).startswith("stopped or stalled: 120 records unread")
    commits = tmp_path / "checkpoints" / "aggregates_live" / "commits"
    commits.mkdir(parents=True)
    (commits / "7").write_text("v1\n")
    os.utime(commits / "7", (1_000_000, 1_000_000))
    assert last_batch_at(tmp_path) == 1_000_000


def test_dead_letter_reasons_are_bounded_in_number_and_length_on_metrics() -> None:
    """One record whose reason is 900 KB (anyone who reaches the broker can write one) made every scrape of
    /metrics 900 KB; a thousand distinct reasons made a thousand series."""
    view = KafkaView(ConsoleConfig.from_env({}))
    try:
        for value in [json.dumps({"reason": "x" * 900_000}).encode(), b"\xff not json",
                      *(json.dumps({"reason": f"code_{i}"}).encode() for i in range(1000)),
                      json.dumps({"reason": "invalid_event"}).encode()]:
            view._take(view.topics[1], value)
        console = Console(ConsoleConfig.from_env({}), view)
        console.figures = view.figures
        console._export(None)
        exported = generate_latest(console.exported.registry).decode()
    finally:
        view.close()
    series = [line for line in exported.splitlines() if line.startswith("headwater_deadletter_records{")]
    assert len(series) <= MAX_REASONS and len(exported) < 10_000
    assert max(len(line) for line in series) < 120
    assert 'reason="other"' in exported and 'reason="unreadable"' in exported
    assert view.figures.deadletters_total == 1003
    assert sum(view.figures.deadletters_by_reason.values()) == 1003
