"""Unit tests of the pure core: JSON/Avro batch decoding, per-event validation, encoding and dead letters."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from typing import Any

import fastavro
import msgspec
import pytest

from common.avro_frame import body_of, frame, read_body, schema_id_of
from gateway.avro_batch import decode_avro_batch, read_envelope
from gateway.config import Limits
from gateway.errors import BadRequest, GatewayError, PayloadTooLarge
from gateway.ingest import avro_misses, json_misses, plan_avro, plan_json
from gateway.json_batch import decode_json_batch
from gateway.records import RequestMeta
from gateway.schema_cache import SchemaCache
from tests.gateway.helpers import (
    FakeRegistry,
    avro_batch,
    avro_event,
    avro_record,
    batch,
    dumps,
    page_view,
)

pytestmark = pytest.mark.unit
LIMITS = Limits(max_events=5, max_event_bytes=4096)
META = RequestMeta.make(str(uuid.uuid4()), 1_800_000_000_000, "dev", "10.0.0.1", "test/1")


@pytest.fixture(scope="module")
def registry() -> FakeRegistry:
    return FakeRegistry()


@pytest.fixture(scope="module")
def cache(registry: FakeRegistry) -> SchemaCache:
    cache = SchemaCache(registry)
    asyncio.run(cache.refresh())
    assert cache.healthy
    return cache


def _error(body: bytes) -> GatewayError:
    with pytest.raises(GatewayError) as info:
        decode_json_batch(body, LIMITS)
    return info.value


@pytest.mark.parametrize(("body", "status", "code"), [
    (b"not json", 400, "invalid_json"),
    (b'{"batch_id": "x"', 400, "invalid_envelope"),
    (b"\xff\xfe{}", 400, "invalid_utf8"),
    (dumps(batch(page_view()))[:-1] + b"\xff}", 400, "invalid_utf8"),
    (dumps(batch(page_view())).replace(b'"seq": 0', b'"seq": NaN'), 400, "invalid_json"),
    (dumps(batch(page_view())).replace(b'"seq": 0', b'"seq": Infinity'), 400, "invalid_json"),
    (dumps(batch(page_view())).replace(b'"seq": 0', b'"seq": 123456789012345678901234567890'), 400,
     "invalid_number"),
    (b'{"batch_id": "' + str(uuid.uuid4()).encode() + b'", "sent_at": 1, "events": [' + b"[" * 5000 + b"]" * 5000
     + b"]}", 400, "too_deep"),
    (dumps({**batch(page_view()), "events": []}), 400, "invalid_envelope"),
    (dumps(batch({k: v for k, v in page_view().items() if k != "event_id"})), 400, "invalid_envelope"),
    (dumps(batch(page_view(event_id="not-a-uuid"))), 400, "invalid_envelope"),
    (dumps(batch(page_view(seq=-1))), 400, "invalid_envelope"),
    (dumps(batch(*[page_view(i) for i in range(6)])), 413, "too_many_events"),
    (dumps(batch(page_view(context={"pad": "x" * 5000}))), 413, "event_too_large"),
])
def test_undecodable_batches(body: bytes, status: int, code: str) -> None:
    err = _error(body)
    assert (err.status, err.code) == (status, code)


def test_mixed_batch_plan(cache: SchemaCache, registry: FakeRegistry) -> None:
    events = [
        page_view(0, "m"),
        page_view(1, "m", event_type="no_such_type"),
        page_view(2, "m", properties={"url": 5}),
        page_view(3, "m", schema_version=99),
        page_view(4, "m", schema_version=1, partition_key="user-9"),
    ]
    wire_batch, envs = decode_json_batch(dumps(batch(*events)), LIMITS)
    assert json_misses(envs, cache) == {("page_view", 99), ("no_such_type", None)}  # a new type is looked up
    plan = plan_json(wire_batch, envs, cache, META, "dlq")
    assert plan.accepted == 2
    assert [(r.index, r.code) for r in plan.rejected] == [
        (1, "unknown_event_type"), (2, "invalid_properties"), (3, "unknown_schema_version")]
    topics = [r.topic for r in plan.records]
    assert topics == ["headwater.events", "dlq", "dlq", "dlq", "headwater.events"]
    first, last = plan.records[0], plan.records[4]
    assert first.key == b"node-m" and last.key == b"user-9"
    latest_id, v1_id = registry.id_of("page_view", 2), registry.id_of("page_view", 1)
    assert schema_id_of(first.value) == latest_id
    assert schema_id_of(last.value) == v1_id
    schema = fastavro.parse_schema(json.loads(registry.by_id[latest_id]["schema"]))
    decoded: Any = read_body(body_of(first.value), schema)
    assert str(decoded["event_id"]) == events[0]["event_id"]
    assert decoded["received_at"] is not None and decoded["sdk_name"] == "headwater-test"
    assert decoded["properties"]["viewport"]["device_pixel_ratio"] == 1.0  # the Avro default
    headers = dict(first.headers)
    assert headers["event_id"] == events[0]["event_id"].encode()
    assert headers["batch_id"] == META.batch_id.encode() and headers["source"] == b"dev"
    dead = json.loads(plan.records[2].value)
    assert dead["reason"] == "invalid_properties" and dead["index"] == 2
    assert dead["payload"]["properties"] == {"url": 5} and dead["payload_encoding"] == "json"
    assert dead["subject"] == "headwater.events.page_view" and dead["schema_id"] == latest_id


def test_unrepresentable_numbers_in_properties_fail_the_request(cache: SchemaCache) -> None:
    for bad in (b"1e400", b"123456789012345678901234567890"):
        body = dumps(batch(page_view())).replace(b'"width": 1280', b'"width": ' + bad)
        wire_batch, envs = decode_json_batch(body, LIMITS)
        with pytest.raises(BadRequest) as info:
            plan_json(wire_batch, envs, cache, META, "dlq")
        assert info.value.code == "invalid_number"


def test_out_of_range_int_is_a_per_event_rejection(cache: SchemaCache) -> None:
    body = dumps(batch(page_view())).replace(b'"width": 1280', b'"width": 99999999999')
    plan = plan_json(*decode_json_batch(body, LIMITS), cache, META, "dlq")
    assert [r.code for r in plan.rejected] == ["invalid_properties"]


def test_unknown_property_field_is_rejected(cache: SchemaCache) -> None:
    ev = page_view()
    ev["properties"]["surprise"] = 1
    plan = plan_json(*decode_json_batch(dumps(batch(ev)), LIMITS), cache, META, "dlq")
    assert "surprise" in plan.rejected[0].message


def test_avro_plan(cache: SchemaCache, registry: FakeRegistry) -> None:
    sid = registry.id_of("page_view", 2)
    text = registry.by_id[sid]["schema"]
    good = avro_event(text, sid, avro_record(page_view(0, "a")))
    unknown = frame(9999, body_of(good))
    corrupt = good[:-7]
    mismatch = avro_event(text, sid, avro_record(page_view(1, "a", event_type="purchase")))
    body = avro_batch([good, unknown, corrupt, mismatch])
    avro = decode_avro_batch(body, Limits())
    assert avro_misses(avro.events, cache) == {9999}
    plan = plan_avro(avro, cache, META, "dlq")
    assert plan.accepted == 1
    assert plan.records[0].value == good  # forwarded byte for byte
    assert plan.records[0].key == b"node-a"
    assert [(r.index, r.code) for r in plan.rejected] == [
        (1, "unknown_schema_id"), (2, "invalid_avro"), (3, "event_type_mismatch")]
    dead = json.loads(plan.records[1].value)
    assert base64.b64decode(dead["payload"]) == unknown and dead["payload_encoding"] == "avro"


def test_avro_batch_errors(registry: FakeRegistry) -> None:
    sid = registry.id_of("page_view", 2)
    good = avro_event(registry.by_id[sid]["schema"], sid, avro_record(page_view()))
    with pytest.raises(BadRequest):
        decode_avro_batch(b"\x01\x02garbage", Limits())
    with pytest.raises(BadRequest) as info:
        decode_avro_batch(avro_batch([b"\x01" + good[1:]]), Limits())
    assert info.value.code == "invalid_framing"
    with pytest.raises(PayloadTooLarge):
        decode_avro_batch(avro_batch([good] * 41), Limits())
    with pytest.raises(BadRequest):
        decode_avro_batch(avro_batch([good])[:-3], Limits())
    env = read_envelope(body_of(good))
    assert env.event_type == "page_view" and env.seq == 0


def test_msgspec_raw_is_kept_exactly(cache: SchemaCache) -> None:
    ev = page_view()
    raw = msgspec.json.encode(batch(ev))
    wire_batch, _ = decode_json_batch(raw, LIMITS)
    assert json.loads(bytes(wire_batch.events[0])) == ev


def test_avro_envelope_is_read_to_sent_at_and_checked_like_json(registry: FakeRegistry) -> None:
    from gateway.avro_batch import envelope_problem

    sid = registry.id_of("page_view", 2)
    text = registry.by_id[sid]["schema"]
    event = page_view(7, "n")
    env = read_envelope(body_of(avro_event(text, sid, avro_record(event, sent_at=99))))
    assert (env.seq, env.node_id, env.created_at, env.sent_at) == (7, "node-n", event["created_at"], 99)
    assert envelope_problem(env) is None
    for bad in ({"event_id": "x"}, {"seq": -1}, {"created_at": -1}, {"node_id": "n" * 1025}):
        env = read_envelope(body_of(avro_event(text, sid, avro_record(page_view(**bad)))))
        assert envelope_problem(env) is not None, bad
    with pytest.raises(BadRequest) as info:
        decode_avro_batch(avro_batch([avro_event(text, sid, avro_record(page_view(seq=-3)))]), Limits())
    assert info.value.code == "invalid_envelope" and "event 0" in info.value.message


def test_unknown_fields_are_ignored_but_their_numbers_checked() -> None:
    doc = batch(page_view())
    doc["future"] = {"nested": [1, 2.5, "x"]}
    doc["events"][0]["later"] = -12
    doc["sdk"]["build"] = 3
    batch_, events = decode_json_batch(dumps(doc), LIMITS)
    assert len(events) == 1 and batch_.sdk.name == "headwater-test"
    for where in (doc, doc["events"][0], doc["sdk"]):
        where["huge"] = 2**70
        assert _error(dumps(doc)).code == "invalid_number"
        del where["huge"]
