"""Kafka records as the JSON a subscriber receives: Confluent-framed Avro decoded with the registry, or JSON.

The JSON of one record (`data:` of its SSE message):

    {"stream": "event.page_view", "topic": "headwater.events", "partition": 2, "offset": 1234,
     "timestamp": 1764100000000, "key": "node-0001",
     "schema": {"id": 7, "subject": "headwater.events.page_view", "version": 2},
     "headers": {"event_id": "..."}, "value": {...}}

Avro values follow fastavro's reading, encoded by msgspec: timestamps as RFC 3339 strings, bytes as base64,
decimals as strings. A record that cannot be decoded (unknown schema id, bad framing, corrupt body) is still
sent, with `"value": null`, `"raw"` (base64 of its bytes) and `"error": {"code", "message"}`: nothing is skipped
silently. Only a few headers are passed on (HEADERS); the client address and user agent the gateway records
are not.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from common.avro_frame import HEADER_BYTES, FrameError, read_body, schema_id_of
from subscribe.filters import Fields, fields_of

HEADERS = frozenset({"event_id", "producer_id", "batch_id", "received_at", "reason"})
EVENTS_NAMESPACE = "headwater.events."


@dataclass(frozen=True)
class WriterSchema:
    """A registered schema: parsed for fastavro, with where it is registered and the event type it describes."""

    schema_id: int
    parsed: Any
    subject: str | None
    version: int | None
    event_type: str | None  # record `headwater.events.<type>`: an event schema


class SchemaNotFound(LookupError):
    """The registry does not know this id (the record is sent undecodable)."""


class SchemaSource(Protocol):
    """Writer schemas by id. Raises SchemaNotFound; any other exception means "try again later"."""

    def get(self, schema_id: int) -> WriterSchema: ...


@dataclass(frozen=True)
class Decoded:
    """One record ready for subscribers: position, the event type it is of (events topics), the fields filters
    read (`filters.fields_of` of its value), JSON body."""

    partition: int
    offset: int
    event_type: str | None
    fields: Fields
    body: bytes


class RecordLike(Protocol):
    """What a confluent_kafka.Message offers (tests pass their own)."""

    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> Any: ...


def _default(obj: Any) -> Any:
    return str(obj)


_encoder = msgspec.json.Encoder(enc_hook=_default)
_json = msgspec.json.Decoder()


class RecordDecoder:
    """Decodes one topic's records. `stream_of(event_type)` names the stream a record belongs to."""

    def __init__(self, topic: str, schemas: SchemaSource, *, avro: bool,
                 stream_of: Callable[[str | None], str]) -> None:
        self.topic = topic
        self.schemas = schemas
        self.avro = avro
        self.stream_of = stream_of

    def decode(self, msg: RecordLike) -> Decoded:
        """Raises only when the registry cannot be reached (the caller retries)."""
        raw = msg.value() or b""
        schema: WriterSchema | None = None
        value: Any = None
        error: dict[str, str] | None = None
        if self.avro:
            try:
                schema, value = self._avro(raw)
            except SchemaNotFound as exc:
                error = {"code": "unknown_schema", "message": str(exc)}
            except FrameError as exc:
                error = {"code": "undecodable", "message": str(exc)[:200]}
        else:
            try:
                value = _json.decode(raw)
            except msgspec.DecodeError as exc:
                error = {"code": "undecodable", "message": str(exc)[:200]}
        event_type = schema.event_type if schema is not None else None
        doc: dict[str, Any] = {
            "stream": self.stream_of(event_type), "topic": self.topic,
            "partition": msg.partition(), "offset": msg.offset(), "timestamp": msg.timestamp()[1],
            "key": _text(msg.key()),
            "schema": None if schema is None else {"id": schema.schema_id, "subject": schema.subject,
                                                   "version": schema.version},
            "headers": {k: _text(v) for k, v in msg.headers() or [] if k in HEADERS and isinstance(v, bytes)},
            "value": value,
        }
        if error is not None:
            doc["raw"] = base64.b64encode(raw).decode()
            doc["error"] = error
        return Decoded(msg.partition() or 0, msg.offset() or 0, event_type, fields_of(value), _encoder.encode(doc))

    def _avro(self, raw: bytes) -> tuple[WriterSchema, Any]:
        schema = self.schemas.get(schema_id_of(raw))
        return schema, read_body(raw[HEADER_BYTES:], schema.parsed)


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="replace")


def event_type_of(schema: Any) -> str | None:
    """The event type a writer schema describes (record `headwater.events.<type>`), else None."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    name = str(schema.get("name", ""))
    namespace = schema.get("namespace")
    full = name if "." in name or not namespace else f"{namespace}.{name}"
    return full[len(EVENTS_NAMESPACE):] if full.startswith(EVENTS_NAMESPACE) else None
