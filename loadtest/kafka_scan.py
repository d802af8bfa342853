"""Reads the events topic from a point in time with read_committed and yields each record's identity.

The value is Confluent-framed Avro (magic 0, 4-byte schema id, body); the writer schema is fetched from the
registry by id (common/avro_frame.py: any Confluent-compatible registry works); the identity fields are read
from the body's first bytes when the writer schema starts with the envelope's fields, else the body is decoded
with fastavro. Only records whose `producer_id` header is one of `producers` are decoded; the topic is read
to the end it had when the scan began (common/kafka_read.py).
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import Any

from common import avro_frame
from common.kafka_read import KafkaReadError, read_to_end
from common.kafka_security import KafkaSecurity
from common.registry_access import RegistryAccess
from common.registry_client import RegistryClient, RegistryClientError


class ScanError(RuntimeError):
    """The topic could not be read to its end, or a record could not be decoded; the message says which."""


@dataclass(frozen=True, slots=True)
class Found:
    """One record of the run as stored in Kafka."""

    producer_id: str
    seq: int
    event_id: str
    header_event_id: str
    value_bytes: int


# The envelope's first fields (schemas/envelope.avsc): when a writer schema starts with exactly these, the
# identity is read straight from the first bytes instead of decoding the whole 1-3 KB record.
PREFIX = (("event_id", "string"), ("event_type", "string"), ("producer_id", "string"), ("seq", "long"))


class WriterSchemas:
    """Writer schemas by registry id, fetched once each, and whether each starts with the envelope PREFIX."""

    def __init__(self, registry_url: str, access: RegistryAccess | None = None) -> None:
        self._schemas = avro_frame.WriterSchemas(RegistryClient.of(registry_url, access or RegistryAccess()))
        self._prefixed: dict[int, bool] = {}

    def get(self, schema_id: int) -> tuple[Any, bool]:
        if schema_id not in self._prefixed:
            try:
                self._prefixed[schema_id] = _has_prefix(self._schemas.raw(schema_id))
            except (avro_frame.FrameError, RegistryClientError) as exc:
                raise ScanError(f"writer schema {schema_id}: {exc}") from None
        return self._schemas.parsed(schema_id), self._prefixed[schema_id]


def _has_prefix(schema: Any) -> bool:
    fields = schema.get("fields", []) if isinstance(schema, dict) else []
    if len(fields) < len(PREFIX):
        return False
    for field, (name, kind) in zip(fields, PREFIX, strict=False):
        declared = field.get("type")
        base = declared.get("type") if isinstance(declared, dict) else declared
        if field.get("name") != name or base != kind:
            return False
    return True


def _long(buf: bytes, pos: int) -> tuple[int, int]:
    """An Avro long (zig-zag varint) at `pos`: (value, next position)."""
    shift = acc = 0
    while True:
        byte = buf[pos]
        pos += 1
        acc |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (acc >> 1) ^ -(acc & 1), pos
        shift += 7


def read_prefix(body: bytes) -> tuple[str, str, int]:
    """(event_id, producer_id, seq) from the start of an Avro body written with a PREFIX schema."""
    pos, texts = 0, []
    for _ in range(3):
        size, pos = _long(body, pos)
        texts.append(body[pos:pos + size].decode())
        pos += size
    seq, _ = _long(body, pos)
    return texts[0], texts[2], seq


def identity(value: bytes, schemas: WriterSchemas) -> tuple[str, str, int]:
    """(event_id, producer_id, seq) of a Confluent-framed event value."""
    try:
        parsed, prefixed = schemas.get(avro_frame.schema_id_of(value))
        if prefixed:
            return read_prefix(value[avro_frame.HEADER_BYTES:])
        record = avro_frame.read_body(value[avro_frame.HEADER_BYTES:], parsed)
    except avro_frame.FrameError as exc:
        raise ScanError(str(exc)) from None
    if not isinstance(record, dict):
        raise ScanError("an event value decoded to something other than a record")
    return str(record["event_id"]), str(record["producer_id"]), int(record["seq"])


def _header(headers: Any, name: str) -> str:
    for key, value in headers or ():
        if key == name:
            return value.decode() if isinstance(value, bytes) else str(value or "")
    return ""


def scan(bootstrap: str, topic: str, registry_url: str, *, since_ms: int, producers: Container[str],
         timeout_s: float = 300.0, security: KafkaSecurity | None = None,
         access: RegistryAccess | None = None) -> Iterator[Found]:
    """Every committed record of `producers` written at or after `since_ms`, up to the topic's current end."""
    schemas = WriterSchemas(registry_url, access)
    try:
        # An audit reads through transactions open at its start (a gateway killed mid-transaction holds the last
        # stable offset until the broker aborts it; what was committed behind it must be counted, not missed).
        for msg in read_to_end(bootstrap, topic, since_ms=since_ms, timeout_s=timeout_s, security=security,
                               through_open_transactions=True):
            headers = msg.headers()
            pid = _header(headers, "producer_id")
            if pid not in producers:
                continue
            value = msg.value() or b""
            event_id, producer, seq = identity(value, schemas)
            yield Found(producer, seq, event_id, _header(headers, "event_id"), len(value))
    except KafkaReadError as exc:
        raise ScanError(str(exc)) from None
