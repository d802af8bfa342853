"""The Avro fast path: schemas from a (fake) registry, Confluent-framed events, local rejection of bad events."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
import zstandard

import headwater
from headwater import MemoryTransport, Request, Response

from .helpers import settles_with_loss

pytestmark = pytest.mark.unit
BATCH = fastavro.parse_schema(json.loads((Path(__file__).parents[2] / "sdk-specs" / "batch.avsc").read_text()))
TS = {"type": "long", "logicalType": "timestamp-millis"}
PAGE_VIEW = {
    "type": "record", "name": "page_view", "namespace": "headwater.events",
    "fields": [
        {"name": "event_id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "event_type", "type": "string"}, {"name": "producer_id", "type": "string"},
        {"name": "seq", "type": "long"}, {"name": "node_id", "type": "string"}, {"name": "created_at", "type": TS},
        {"name": "sent_at", "type": TS}, {"name": "received_at", "type": ["null", TS], "default": None},
        {"name": "sdk_name", "type": "string"}, {"name": "sdk_version", "type": "string"},
        {"name": "context", "type": {"type": "map", "values": "string"}},
        {"name": "properties", "type": {"type": "record", "name": "page_view_properties",
                                        "fields": [{"name": "url", "type": "string"}]}},
    ],
}


class FakeGateway:
    def __init__(self) -> None:
        self.registry_calls = 0
        self.events: list[dict[str, Any]] = []
        self.schema_ids: list[int] = []

    def __call__(self, request: Request) -> Response:
        if request.method == "GET":
            self.registry_calls += 1
            if request.url.endswith("/subjects/headwater.events.page_view/versions/latest"):
                doc = {"subject": "headwater.events.page_view", "version": 2, "id": 7, "schema": json.dumps(PAGE_VIEW)}
                return Response(200, {}, json.dumps(doc).encode())
            return Response(404, {}, b'{"error_code":40401,"message":"Subject not found"}')
        assert request.headers["Content-Type"] == "application/vnd.headwater.batch+avro"
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(request.body)
        batch: Any = fastavro.schemaless_reader(io.BytesIO(raw), BATCH)
        parsed = fastavro.parse_schema(PAGE_VIEW)
        for framed in batch["events"]:
            assert framed[0] == 0
            self.schema_ids.append(int.from_bytes(framed[1:5], "big"))
            event: Any = fastavro.schemaless_reader(io.BytesIO(framed[5:]), parsed)
            self.events.append(event)
        return Response(200, {}, json.dumps({"accepted": len(batch["events"]), "rejected": []}).encode())


def test_avro_events_are_framed_with_the_registry_id_and_bad_ones_rejected_locally() -> None:
    fake = FakeGateway()
    errors: list[Exception] = []
    with headwater.Client("http://gw", "k", registry_url="http://reg", wire_format="avro", linger_s=0.01,
                          transport=MemoryTransport(fake), on_error=errors.append, context={"app": "shop"}) as c:
        for i in range(5):
            c.track("page_view", {"url": f"/{i}"})
        c.track("page_view", {"url": 5})  # wrong type for the schema
        c.track("unknown_type", {})
        assert settles_with_loss(c)  # flush() says events were lost
        m = c.metrics()
    assert [e["properties"]["url"] for e in fake.events] == [f"/{i}" for i in range(5)]
    assert set(fake.schema_ids) == {7}
    first = fake.events[0]
    assert first["seq"] == 0 and first["received_at"] is None and first["context"] == {"app": "shop"}
    assert first["sdk_name"] == "headwater-python"
    assert m.acknowledged == 5 and m.rejected == 2
    assert sorted(e.code for e in errors if isinstance(e, headwater.EventRejectedError)) == [
        "schema_mismatch", "unknown_event_type"]
    assert fake.registry_calls == 2  # cached per type


def test_registry_down_is_retried() -> None:
    fake = FakeGateway()
    calls = {"n": 0}

    def flaky(request: Request) -> Response:
        if request.method == "GET" and calls["n"] < 2:
            calls["n"] += 1
            raise headwater.TransportError("registry down")
        return fake(request)

    with headwater.Client("http://gw", "k", registry_url="http://reg", wire_format="avro", linger_s=0.01,
                          retry_base_s=0.005, transport=MemoryTransport(flaky)) as c:
        c.track("page_view", {"url": "/"})
        assert c.flush(10)
        assert c.metrics().retries == 2
    assert len(fake.events) == 1
