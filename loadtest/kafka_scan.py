"""Reads the events topic from a point in time with read_committed and yields each record's identity.

The value is Confluent-framed Avro (magic 0, 4-byte schema id, body); the writer schema is fetched from the
registry by id with confluent-kafka's own SchemaRegistryClient (so any Confluent-compatible registry works);
the identity fields are read from the body's first bytes when the writer schema starts with the envelope's
fields, else the body is decoded with fastavro. Only records whose `producer_id` header is one of `producers`
are decoded.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import Any

import fastavro
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from common.kafka_security import KafkaSecurity
from common.registry_access import RegistryAccess


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
        self._client = SchemaRegistryClient({"url": registry_url, **(access or RegistryAccess()).confluent()})
        self._parsed: dict[int, tuple[Any, bool]] = {}

    def get(self, schema_id: int) -> tuple[Any, bool]:
        if schema_id not in self._parsed:
            text = self._client.get_schema(schema_id).schema_str
            if text is None:
                raise ScanError(f"the registry has no schema text for id {schema_id}")
            schema = json.loads(text)
            self._parsed[schema_id] = (fastavro.parse_schema(schema), _has_prefix(schema))
        return self._parsed[schema_id]


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
    if len(value) < 5 or value[0] != 0:
        raise ScanError(f"value is not Confluent-framed (first byte {value[:1]!r})")
    parsed, prefixed = schemas.get(int.from_bytes(value[1:5], "big"))
    if prefixed:
        return read_prefix(value[5:])
    record = fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None)
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
    consumer = Consumer({
        "bootstrap.servers": bootstrap, **(security or KafkaSecurity()).librdkafka(),
        "group.id": f"headwater-reconcile-{uuid.uuid4()}",
        "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            raise ScanError(f"topic {topic} not found on {bootstrap}")
        wanted = [TopicPartition(topic, p, since_ms) for p in sorted(meta.partitions)]
        starts = consumer.offsets_for_times(wanted, timeout=10)
        assign = [tp for tp in starts if tp.offset >= 0]  # -1: nothing written since then
        if not assign:
            return
        consumer.assign(assign)
        pending = {tp.partition for tp in assign}
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise ScanError(f"partitions {sorted(pending)} of {topic} not read to their end in {timeout_s:g}s")
            for msg in consumer.consume(num_messages=2000, timeout=1.0):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition() or 0)
                        continue
                    raise ScanError(f"reading {topic}: {err}")
                pending.add(msg.partition() or 0)  # more arrived after an EOF: read on
                headers = msg.headers()
                pid = _header(headers, "producer_id")
                if pid not in producers:
                    continue
                value = msg.value() or b""
                event_id, producer, seq = identity(value, schemas)
                yield Found(producer, seq, event_id, _header(headers, "event_id"), len(value))
    finally:
        consumer.close()
