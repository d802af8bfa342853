"""common/avro_frame.py: the frame, and decoding with writer schemas fetched by id (a fake registry for the unit
tests, the real registry for one round trip)."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import fastavro
import pytest

from common.avro_frame import FrameError, WriterSchemas, body_of, frame, header, read_body, schema_id_of
from common.registry_client import RegistryClient, RegistryClientError
from tests.support.fake_registry import FakeRegistry, FakeRegistryClient

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}, {"name": "n", "type": "long"}]}


def body(record: dict[str, Any], schema: Any = SCHEMA) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def fake_registry(schemas: dict[int, Any]) -> FakeRegistryClient:
    """A registry client answering `GET /schemas/ids/<id>` for `schemas` only (its fake counts the calls)."""
    registry = FakeRegistry(catalog=False)
    for sid, schema in schemas.items():
        registry.add(f"s{sid}", 1, sid, json.dumps(schema))
    return FakeRegistryClient(registry)


@pytest.mark.unit
def test_frame_and_schema_id_round_trip() -> None:
    framed = frame(70000, b"body")
    assert framed[:5] == b"\x00\x00\x01\x11\x70" and framed[5:] == b"body"
    assert schema_id_of(framed) == 70000
    assert framed[:5] == header(70000) and body_of(framed) == b"body"


@pytest.mark.unit
@pytest.mark.parametrize("value", [b"", b"\x00\x00\x00", b"\x01\x00\x00\x00\x01body", b"{\"json\": 1}"])
def test_values_that_are_not_framed_raise_frame_error(value: bytes) -> None:
    with pytest.raises(FrameError, match="not Confluent-framed"):
        schema_id_of(value)
    with pytest.raises(FrameError, match="not Confluent-framed"):
        body_of(value)


@pytest.mark.unit
def test_decode_fetches_each_writer_schema_once() -> None:
    registry = fake_registry({7: SCHEMA})
    schemas = WriterSchemas(registry)
    for n in range(3):
        assert schemas.decode(frame(7, body({"a": "x", "n": n}))) == {"a": "x", "n": n}
    assert len(registry.registry.calls) == 1
    assert schemas.raw(7) == SCHEMA


@pytest.mark.unit
def test_unknown_ids_and_unreadable_bodies_raise() -> None:
    schemas = WriterSchemas(fake_registry({7: SCHEMA}))
    with pytest.raises(RegistryClientError) as caught:
        schemas.decode(frame(8, b""))
    assert caught.value.not_found
    with pytest.raises(FrameError, match="does not read"):
        schemas.decode(frame(7, b"\x06ab"))  # a string of 3 bytes with 2 present, then no long
    with pytest.raises(FrameError, match="does not read"):
        read_body(b"", fastavro.parse_schema(SCHEMA))


@pytest.mark.integration
def test_decode_with_the_real_registry(registry_url: str) -> None:
    schema = {**SCHEMA, "name": f"R{uuid.uuid4().hex[:8]}"}
    sid = RegistryClient(registry_url).register(f"test-frame-{uuid.uuid4().hex[:8]}", json.dumps(schema))
    assert WriterSchemas(registry_url).decode(frame(sid, body({"a": "é", "n": -1}, schema))) == {"a": "é", "n": -1}
