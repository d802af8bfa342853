"""Unit tests of record decoding: Avro by writer schema, dead letters as JSON, and records that cannot be decoded
are sent with their raw bytes and an error instead of being skipped."""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass, field
from typing import Any

import fastavro
import pytest

from common.avro_frame import frame
from subscribe.decode import RecordDecoder, SchemaNotFound, WriterSchema, event_type_of

pytestmark = pytest.mark.unit
SCHEMA = {"type": "record", "name": "page_view", "namespace": "headwater.events",
          "fields": [{"name": "path", "type": "string"},
                     {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                     {"name": "blob", "type": "bytes"}]}
PARSED = fastavro.parse_schema(SCHEMA)


class Schemas:
    def get(self, schema_id: int) -> WriterSchema:
        if schema_id != 7:
            raise SchemaNotFound(f"schema id {schema_id} is not in the registry")
        return WriterSchema(7, PARSED, "headwater.events.page_view", 2, event_type_of(SCHEMA))


@dataclass
class Msg:
    raw: bytes
    hdrs: list[tuple[str, bytes]] = field(default_factory=list)

    def partition(self) -> int:
        return 1

    def offset(self) -> int:
        return 42

    def timestamp(self) -> tuple[int, int]:
        return (1, 1764000000000)

    def key(self) -> bytes:
        return b"node-1"

    def value(self) -> bytes:
        return self.raw

    def headers(self) -> Any:
        return self.hdrs


def avro(doc: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, PARSED, doc)
    return frame(7, buf.getvalue())


def events_decoder() -> RecordDecoder:
    return RecordDecoder("headwater.events", Schemas(), avro=True,
                         stream_of=lambda t: f"event.{t}" if t else "event")


def test_avro_record_as_json_with_schema_and_allowed_headers() -> None:
    d = events_decoder().decode(Msg(avro({"path": "/a", "at": 1764000000000, "blob": b"\x00\xff"}),
                                    [("event_id", b"e1"), ("client_ip", b"10.0.0.1"), ("user_agent", b"ua")]))
    doc = json.loads(d.body)
    assert d.event_type == "page_view" and (d.partition, d.offset) == (1, 42)
    assert doc["stream"] == "event.page_view" and doc["key"] == "node-1" and doc["timestamp"] == 1764000000000
    assert doc["schema"] == {"id": 7, "subject": "headwater.events.page_view", "version": 2}
    assert doc["headers"] == {"event_id": "e1"}  # no client address, no user agent
    assert doc["value"]["path"] == "/a" and doc["value"]["at"].startswith("2025-11-24T")
    assert base64.b64decode(doc["value"]["blob"]) == b"\x00\xff"
    assert b"\n" not in d.body


@pytest.mark.parametrize(("raw", "code"), [(frame(8, b"\x02a"), "unknown_schema"), (b"{json", "undecodable"),
                                           (frame(7, b"\x02"), "undecodable"), (b"", "undecodable")])
def test_undecodable_records_are_sent_with_their_bytes(raw: bytes, code: str) -> None:
    d = events_decoder().decode(Msg(raw))
    doc = json.loads(d.body)
    assert doc["value"] is None and doc["error"]["code"] == code and base64.b64decode(doc["raw"]) == raw
    assert d.event_type is None and doc["stream"] == "event"


def test_dead_letters_are_json() -> None:
    dec = RecordDecoder("headwater.deadletter", Schemas(), avro=False, stream_of=lambda t: "deadletter")
    doc = json.loads(dec.decode(Msg(b'{"reason": "invalid_properties", "index": 3}')).body)
    assert doc["value"] == {"reason": "invalid_properties", "index": 3} and doc["schema"] is None
    bad = json.loads(dec.decode(Msg(b"\xff not json")).body)
    assert bad["error"]["code"] == "undecodable" and bad["value"] is None
