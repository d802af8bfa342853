"""Decodes an Avro batch body (protocol.md section 3, `batch.avsc`), reads the envelope prefix of each
framed event without decoding the rest of it, and applies the JSON path's envelope rules to both.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, NamedTuple

import fastavro

from gateway.avro_fast import first_problem, native_envelopes
from gateway.config import Limits
from gateway.errors import BadRequest, PayloadTooLarge
from gateway.json_batch import MAX_TEXT

# Package data: a copy of sdk-specs/batch.avsc (tests/packaging/test_gateway_package.py keeps them equal).
BATCH_SCHEMA = fastavro.parse_schema(json.loads(resources.files("gateway").joinpath("batch.avsc").read_text()))
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class Envelope(NamedTuple):
    """The fields every event schema starts with, in this order (`schemas/envelope.avsc`)."""

    event_id: str
    event_type: str
    producer_id: str
    seq: int
    node_id: str
    created_at: int
    sent_at: int


@dataclass(frozen=True, slots=True)
class AvroBatch:
    batch_id: str
    sent_at: int
    sdk_name: str
    sdk_version: str
    events: list[bytes]
    envelopes: list[Envelope | None]  # None: the event's bytes are unreadable (rejected later, invalid_avro)


def decode_avro_batch(body: bytes, limits: Limits) -> AvroBatch:
    buf = io.BytesIO(body)
    try:
        doc: Any = fastavro.schemaless_reader(buf, BATCH_SCHEMA)
    except Exception as exc:
        raise BadRequest(f"body is not an Avro batch: {exc!r}", code="invalid_avro_batch") from None
    if buf.tell() != len(body):
        raise BadRequest("trailing bytes after the Avro batch", code="invalid_avro_batch")
    if not _UUID.match(doc["batch_id"]):
        raise BadRequest("batch_id is not a UUID", code="invalid_envelope")
    if doc["sent_at"] < 0 or max(len(doc["sdk_name"]), len(doc["sdk_version"])) > MAX_TEXT:
        raise BadRequest(f"sent_at must be >= 0 and sdk_name, sdk_version at most {MAX_TEXT} characters",
                         code="invalid_envelope")
    events: list[bytes] = doc["events"]
    if not events:
        raise BadRequest("events must hold at least one event", code="invalid_envelope")
    if len(events) > limits.max_events:
        raise PayloadTooLarge(f"{len(events)} events exceed the limit of {limits.max_events}", code="too_many_events")
    for index, event in enumerate(events):
        if len(event) > limits.max_event_bytes:
            raise PayloadTooLarge(f"event {index} has {len(event)} bytes, over the limit of {limits.max_event_bytes}",
                                  code="event_too_large")
        if len(event) < 5 or event[0] != 0:
            raise BadRequest(f"event {index} is not in Confluent framing (magic byte 0 + 4-byte schema id)",
                             code="invalid_framing")
    envelopes = _envelopes(events)
    return AvroBatch(doc["batch_id"], doc["sent_at"], doc["sdk_name"], doc["sdk_version"], events, envelopes)


def _envelopes(events: list[bytes]) -> list[Envelope | None]:
    """Each event's envelope (None: unreadable), read in one compiled pass when the extension is built; 400
    `invalid_envelope` for the first that breaks the JSON path's rules."""
    read = native_envelopes(events, Envelope)
    if read is None:
        return [_checked_envelope(index, event) for index, event in enumerate(events)]
    found = first_problem(read, MAX_TEXT)
    if found is not None:  # worded by the Python rule, which the compiled one mirrors
        problem = envelope_problem(read[found[0]])
        raise BadRequest(f"event {found[0]}: {problem}", code="invalid_envelope")
    return read


def _checked_envelope(index: int, framed: bytes) -> Envelope | None:
    """The event's envelope, None if unreadable; 400 `invalid_envelope` if it breaks the JSON path's rules."""
    try:
        env = read_envelope(framed[5:])  # per event: inline, not avro_frame.body_of (frame checked at decode)
    except (IndexError, ValueError):
        return None
    problem = envelope_problem(env)
    if problem is not None:
        raise BadRequest(f"event {index}: {problem}", code="invalid_envelope")
    return env


def envelope_problem(env: Envelope) -> str | None:
    """What makes this envelope invalid under protocol.md section 2 (as the JSON path decodes it), if anything."""
    if not _UUID.match(env.event_id) or not _UUID.match(env.producer_id):
        return "event_id and producer_id must be UUIDs"
    if min(env.seq, env.created_at, env.sent_at) < 0:
        return "seq, created_at and sent_at must be >= 0"
    if len(env.node_id) > MAX_TEXT or len(env.event_type) > MAX_TEXT:
        return f"event_type and node_id are at most {MAX_TEXT} characters"
    return None


def _long(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:  # one byte: most lengths and small numbers
        return (byte >> 1) ^ -(byte & 1), pos + 1
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _string(data: bytes, pos: int) -> tuple[str, int]:
    size, pos = _long(data, pos)
    if size < 0 or pos + size > len(data):
        raise ValueError("string length out of bounds")
    return data[pos:pos + size].decode(), pos + size


def read_envelope(body: bytes) -> Envelope:
    """The envelope fields of an Avro event body, up to `sent_at` (IndexError/ValueError if corrupt)."""
    event_id, pos = _string(body, 0)
    event_type, pos = _string(body, pos)
    producer_id, pos = _string(body, pos)
    seq, pos = _long(body, pos)
    node_id, pos = _string(body, pos)
    created_at, pos = _long(body, pos)
    sent_at, pos = _long(body, pos)
    return Envelope(event_id, event_type, producer_id, seq, node_id, created_at, sent_at)
