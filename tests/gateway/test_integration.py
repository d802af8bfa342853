"""The running gateway of the test stack against the real broker and registry."""

from __future__ import annotations

import gzip
import json
import os
import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from stack.topics import DEADLETTER_TOPIC, EVENTS_TOPIC
from tests.gateway.helpers import (
    avro_batch,
    avro_event,
    avro_record,
    batch,
    dumps,
    http_post,
    json_headers,
    page_view,
    zstd,
)
from tests.support.kafka import consume_all, end_offsets

pytestmark = pytest.mark.integration


def _mine(records: list[Any], marker: str) -> list[Any]:
    return [r for r in records if r.value() is not None and marker.encode() in r.value()]


def test_valid_batch_lands_in_kafka_decodable_by_avro_deserializer(
        gateway_url: str, write_key: str, bootstrap: str, registry_url: str) -> None:
    marker = uuid.uuid4().hex
    events = [page_view(i, marker) for i in range(3)]
    doc = batch(*events)
    status, body, _ = http_post(gateway_url + "/v1/batch", zstd(dumps(doc)), json_headers(write_key))
    assert status == 200, body
    assert body == {"batch_id": doc["batch_id"], "accepted": 3, "rejected": []}
    records = _mine(consume_all(bootstrap, EVENTS_TOPIC, "read_committed", 3), marker)
    assert len(records) == 3
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    decoded = [deserializer(r.value(), SerializationContext(EVENTS_TOPIC, MessageField.VALUE)) for r in records]
    assert sorted(str(d["event_id"]) for d in decoded) == sorted(e["event_id"] for e in events)
    assert all(d["properties"]["url"].endswith(marker) and d["received_at"] for d in decoded)
    for record in records:
        hdrs = dict(record.headers())
        assert hdrs["batch_id"] == doc["batch_id"].encode()
        assert hdrs["source"] == b"dev" and hdrs["received_at"].isdigit()
        assert record.key() == f"node-{marker}".encode()


def test_mixed_batch_splits_between_events_and_dead_letters(
        gateway_url: str, write_key: str, bootstrap: str) -> None:
    marker = uuid.uuid4().hex
    events = [page_view(0, marker), page_view(1, marker, event_type="nope"),
              page_view(2, marker, properties={"url": 1}), page_view(3, marker)]
    status, body, _ = http_post(gateway_url + "/v1/batch", zstd(dumps(batch(*events))), json_headers(write_key))
    assert status == 200 and body["accepted"] == 2
    assert [(r["index"], r["code"]) for r in body["rejected"]] == [(1, "unknown_event_type"),
                                                                 (2, "invalid_properties")]
    assert len(_mine(consume_all(bootstrap, EVENTS_TOPIC, "read_committed", 2), marker)) == 2
    dead = [json.loads(r.value()) for r in _mine(consume_all(bootstrap, DEADLETTER_TOPIC, "read_committed", 2),
                                                  marker)]
    assert sorted(d["index"] for d in dead) == [1, 2]
    assert {d["reason"] for d in dead} == {"unknown_event_type", "invalid_properties"}
    assert all(d["payload"]["event_id"] == events[d["index"]]["event_id"] for d in dead)


def test_avro_fast_path_forwards_the_bytes(
        gateway_url: str, write_key: str, bootstrap: str, registry_url: str) -> None:
    client = SchemaRegistryClient({"url": registry_url})
    latest = client.get_latest_version("headwater.events.page_view")
    marker = uuid.uuid4().hex
    text, sid = str(latest.schema.schema_str), int(latest.schema_id or 0)
    framed = [avro_event(text, sid, avro_record(page_view(i, marker)))
              for i in range(2)]
    status, body, _ = http_post(gateway_url + "/v1/batch", zstd(avro_batch(framed)),
                                json_headers(write_key, ctype="application/vnd.headwater.batch+avro"))
    assert status == 200 and body["accepted"] == 2, body
    values = sorted(r.value() for r in _mine(consume_all(bootstrap, EVENTS_TOPIC, "read_committed", 2), marker))
    assert values == sorted(framed)


def _bad_inputs(key: str, registry_url: str) -> list[tuple[str, bytes, dict[str, str], int, str]]:
    good = dumps(batch(page_view()))
    bomb = b"\0" * 20_000_000
    latest = SchemaRegistryClient({"url": registry_url}).get_latest_version("headwater.events.page_view")
    unknown_id = avro_event(str(latest.schema.schema_str), 999_999, avro_record(page_view()))
    avro_type = "application/vnd.headwater.batch+avro"
    return [
        ("truncated zstd", zstd(good)[:-6], json_headers(key), 400, "invalid_compression"),
        ("zstd bomb", zstd(bomb), json_headers(key), 413, "ratio_too_large"),
        ("gzip bomb", gzip.compress(bomb), json_headers(key, "gzip"), 413, "body_too_large"),
        ("wrong content type", zstd(good), json_headers(key, ctype="text/csv"), 415, "unsupported_media_type"),
        ("invalid utf-8", zstd(good.replace(b"Home", b"Ho\xffe")), json_headers(key), 400, "invalid_utf8"),
        ("NaN", zstd(good.replace(b'"seq": 0', b'"seq": NaN')), json_headers(key), 400, "invalid_json"),
        ("huge number", zstd(good.replace(b'"height": 720', b'"height": 1' + b"0" * 30)), json_headers(key), 400,
         "invalid_number"),
        ("deep nesting", zstd(good.replace(b'"locale": "en"', b'"locale": ' + b"[" * 3000 + b"]" * 3000)),
         json_headers(key), 400, "too_deep"),
        ("missing fields", zstd(dumps(batch({"event_type": "page_view"}))), json_headers(key), 400,
         "invalid_envelope"),
        ("unknown event type", zstd(dumps(batch(page_view(event_type="ghost")))), json_headers(key), 422, ""),
        ("unknown schema id", zstd(avro_batch([unknown_id])), json_headers(key, ctype=avro_type), 422, ""),
        ("oversized event", zstd(dumps(batch(page_view(context={"x": os.urandom(35_000).hex()})))),
         json_headers(key), 413, "event_too_large"),
        ("too many events", zstd(dumps(batch(*[page_view(i) for i in range(41)]))), json_headers(key), 413,
         "too_many_events"),
        ("missing auth", zstd(good), json_headers(None), 401, "missing_write_key"),
        ("bad auth", zstd(good), json_headers("hw_not-a-key"), 401, "invalid_write_key"),
    ]


def test_bad_inputs_get_their_4xx_and_write_no_event(
        gateway_url: str, write_key: str, bootstrap: str, registry_url: str) -> None:
    before = end_offsets(bootstrap, EVENTS_TOPIC)
    dlq_before = sum(end_offsets(bootstrap, DEADLETTER_TOPIC).values())
    for name, body, hdrs, status, code in _bad_inputs(write_key, registry_url):
        got_status, got, _ = http_post(gateway_url + "/v1/batch", body, hdrs)
        assert got_status == status, (name, got)
        if code:
            assert got["code"] == code, (name, got)
        else:
            assert got["accepted"] == 0 and len(got["rejected"]) == 1, (name, got)
    assert end_offsets(bootstrap, EVENTS_TOPIC) == before
    # Only the two 422s wrote (their dead letters, each in a committed transaction: record + commit marker).
    assert sum(end_offsets(bootstrap, DEADLETTER_TOPIC).values()) - dlq_before == 4


def test_readyz_and_metrics(gateway_url: str) -> None:
    import urllib.request

    with urllib.request.urlopen(gateway_url + "/readyz", timeout=10) as resp:
        assert json.loads(resp.read())["status"] == "ready"
    with urllib.request.urlopen(gateway_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert "headwater_gateway_requests_total" in text and "headwater_gateway_commit_seconds" in text
