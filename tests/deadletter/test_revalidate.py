"""Unit tests of dead-letter parsing, selection, summaries and revalidation with the gateway's own code."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from typing import Any

import fastavro
import pytest

from common.avro_frame import body_of, frame, read_body
from deadletter.gateway_code import new_cache
from deadletter.records import BadRecord, Letter, Selection, decoded_payload, parse
from deadletter.revalidate import REPLAY_HEADER, RUN_HEADER, StillInvalid, revalidate
from deadletter.summary import parse_time, summarise, summary_table
from gateway.records import KafkaRecord, Rejection, RequestMeta, SchemaRef, dead_letter
from schemas.catalog import load_catalog
from tests.deadletter.fakes import FakeRegistry, page_view, page_view_v3

pytestmark = pytest.mark.unit
DL_TOPIC = "headwater.deadletter"
SUBJECT = "headwater.events.page_view"


def meta(received_at: int = 1_790_000_000_000, source: str = "dev") -> RequestMeta:
    return RequestMeta.make("7d3c4f7e-9f5b-4a57-8a0e-0c4d1c9b2a11", received_at, source, "10.0.0.1",
                            "headwater-python/0.1.0 (CPython 3.11)")


def json_letter(event: dict[str, Any], code: str = "unknown_schema_version", offset: int = 7,
                received_at: int = 1_790_000_000_000) -> Letter:
    rec = dead_letter(DL_TOPIC, meta(received_at), Rejection(3, code, "no such version"), json.dumps(event).encode(),
                      is_json=True, schema=SchemaRef(SUBJECT, event.get("schema_version"), None),
                      key=event["node_id"], event_id=event["event_id"], event_type=event["event_type"],
                      producer_id=event["producer_id"])
    return parse(1, offset, rec.key, rec.value, list(rec.headers))


def avro_letter(framed: bytes, schema_id: int, event: dict[str, Any]) -> Letter:
    rec = dead_letter(DL_TOPIC, meta(), Rejection(0, "unknown_schema_id", "unknown id"), framed, is_json=False,
                      schema=SchemaRef(None, None, schema_id), key=event["node_id"], event_id=event["event_id"],
                      event_type=event["event_type"], producer_id=event["producer_id"])
    return parse(0, 2, rec.key, rec.value, list(rec.headers))


def cache_of(registry: FakeRegistry) -> Any:
    cache = new_cache(registry)
    asyncio.run(cache.refresh())
    return cache


def add_version(registry: FakeRegistry, version: int, schema_id: int) -> str:
    """A page_view version with one more optional property field, served under `schema_id`."""
    text = page_view_v3(load_catalog().event_types["page_view"].schema_text(2))
    registry.add(SUBJECT, version, schema_id, text)
    return text


def test_a_json_dead_letter_keeps_its_payload_bytes_and_headers() -> None:
    event = page_view(5, "dl", schema_version=3)
    letter = json_letter(event)
    assert json.loads(letter.raw_payload) == event
    assert letter.producer_id == event["producer_id"] and letter.header("reason") == "unknown_schema_version"
    assert letter.position == "1:7" and letter.version_label == "3"
    assert decoded_payload(letter) == event


def test_records_that_are_not_dead_letters_are_named() -> None:
    with pytest.raises(BadRecord, match="0:1: not a dead letter"):
        parse(0, 1, None, b'{"x": 1}', None)
    with pytest.raises(BadRecord, match="empty value"):
        parse(0, 2, None, None, None)


def test_selection_filters_by_every_field() -> None:
    letter = json_letter(page_view(1, "sel", schema_version=3), received_at=2_000)
    assert Selection().matches(letter)
    assert Selection(reason="unknown_schema_version", event_type="page_view", version=3, source="dev",
                     since_ms=2_000, until_ms=2_001).matches(letter)
    for miss in (Selection(reason="invalid_properties"), Selection(event_type="purchase"), Selection(version=2),
                 Selection(source="other"), Selection(since_ms=2_001), Selection(until_ms=2_000)):
        assert not miss.matches(letter)


def test_summary_groups_by_reason_type_version_and_source() -> None:
    letters = [json_letter(page_view(i, "s", schema_version=3), received_at=1_000 + i) for i in range(3)]
    letters.append(json_letter(page_view(0, "s", schema_version=9), code="unknown_schema_version"))
    groups = summarise(letters)
    three = groups[("unknown_schema_version", "page_view", "3", "dev")]
    assert (three.count, three.first_ms, three.last_ms, len(three.producers)) == (3, 1_000, 1_002, 3)
    assert groups[("unknown_schema_version", "page_view", "9", "dev")].count == 1
    assert "unknown_schema_version" in summary_table(groups).splitlines()[2]


def test_parse_time_accepts_iso_and_epoch_ms() -> None:
    assert parse_time("1790000000000") == 1_790_000_000_000
    assert parse_time("2026-09-21T14:13:20Z") == parse_time("2026-09-21T14:13:20") == 1_790_000_000_000
    with pytest.raises(ValueError, match="neither"):
        parse_time("yesterday")


def test_json_replay_is_still_invalid_until_the_version_exists_then_matches_the_gateway_record() -> None:
    registry = FakeRegistry()
    event = page_view(4, "re", schema_version=3)
    letter = json_letter(event)
    outcome = revalidate(letter, cache_of(registry), DL_TOPIC, "fix1")
    assert isinstance(outcome, StillInvalid) and outcome.code == "unknown_schema_version"

    add_version(registry, 3, 99)
    record = revalidate(letter, cache_of(registry), DL_TOPIC, "fix1")
    assert isinstance(record, KafkaRecord)
    assert record.topic == "headwater.events" and record.key == event["node_id"].encode()
    assert record.value[:5] == frame(99, b"")
    headers = dict(record.headers)
    assert headers["event_id"] == event["event_id"].encode()
    assert headers["producer_id"] == event["producer_id"].encode()
    assert headers["received_at"] == b"1790000000000" and headers["source"] == b"dev"
    assert headers[REPLAY_HEADER] == b"headwater.deadletter:1:7" and headers[RUN_HEADER] == b"fix1"
    assert "reason" not in headers
    schema = fastavro.parse_schema(json.loads(registry.by_id[99]["schema"]))
    decoded: dict[str, Any] = read_body(body_of(record.value), schema)
    received_ms = int(decoded["received_at"].timestamp() * 1000)  # a timestamp-millis logical type
    assert (str(decoded["event_id"]), decoded["seq"], received_ms) == (event["event_id"], 4, 1_790_000_000_000)
    assert decoded["sdk_name"] == "headwater-python" and decoded["properties"]["referrer_v3"] is None


def test_json_payload_that_no_longer_decodes_gets_the_gateways_code() -> None:
    event = page_view(1, "bad", schema_version=3)
    letter = json_letter(event)
    broken = Letter(letter.partition, letter.offset, letter.key, letter.value, letter.headers, b'{"event_id": 1}')
    outcome = revalidate(broken, cache_of(FakeRegistry()), DL_TOPIC, "r")
    assert isinstance(outcome, StillInvalid) and outcome.code == "invalid_envelope"


def test_avro_replay_forwards_the_framed_bytes_once_the_schema_id_is_known() -> None:
    registry = FakeRegistry()
    text = page_view_v3(load_catalog().event_types["page_view"].schema_text(2))  # not registered yet
    event = page_view(9, "avro")
    record: dict[str, Any] = {**event, "sent_at": 1, "received_at": 2, "sdk_name": "s", "sdk_version": "v"}
    record["properties"] = {**record["properties"], "referrer_v3": "r"}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(text)), record)
    framed = frame(77, buf.getvalue())
    letter = avro_letter(framed, 77, event)
    assert decoded_payload(letter)["envelope"]["seq"] == 9
    assert letter.value.payload == base64.b64encode(framed).decode()
    outcome = revalidate(letter, cache_of(registry), DL_TOPIC, "r")
    assert isinstance(outcome, StillInvalid) and outcome.code == "unknown_schema_id"

    add_version(registry, 3, 77)
    replayed = revalidate(letter, cache_of(registry), DL_TOPIC, "r")
    assert isinstance(replayed, KafkaRecord) and replayed.value == framed and replayed.key == b"node-avro"

    corrupt = avro_letter(framed[:12], 77, event)
    outcome = revalidate(corrupt, cache_of(registry), DL_TOPIC, "r")
    assert isinstance(outcome, StillInvalid) and outcome.code == "invalid_avro"
    short = avro_letter(b"\x00\x01", 77, event)
    outcome = revalidate(short, cache_of(registry), DL_TOPIC, "r")
    assert isinstance(outcome, StillInvalid) and outcome.code == "invalid_framing"

