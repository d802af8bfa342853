"""A dead-letter record read back from Kafka, the selection an operator filters by, and the payload decoded."""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass
from typing import Any

import msgspec

from common.avro_frame import FrameError, body_of, read_body, schema_id_of
from gateway.avro_batch import Envelope, read_envelope
from gateway.records import DeadLetter, Headers

_decoder = msgspec.json.Decoder(DeadLetter)


class _RawPayload(msgspec.Struct):
    """The payload exactly as the gateway wrote it (replay revalidates the bytes that were sent)."""

    payload: msgspec.Raw


_raw_decoder = msgspec.json.Decoder(_RawPayload)


class BadRecord(ValueError):
    """A record of the dead-letter topic that is not a dead letter the gateway wrote."""


@dataclass(frozen=True)
class Letter:
    """One dead letter: where it is in the topic, its JSON value, its headers and its raw payload bytes."""

    partition: int
    offset: int
    key: bytes
    value: DeadLetter
    headers: Headers
    raw_payload: bytes  # the JSON event object as sent, or the framed Avro event

    @property
    def position(self) -> str:
        return f"{self.partition}:{self.offset}"

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value.decode(errors="replace")
        return None

    @functools.cached_property
    def envelope(self) -> Envelope | None:
        """An Avro payload's envelope fields (the gateway leaves them out when it could not read the schema id)."""
        if self.value.payload_encoding != "avro":
            return None
        try:
            return read_envelope(body_of(self.raw_payload))
        except (IndexError, ValueError, UnicodeDecodeError):
            return None

    @property
    def event_type(self) -> str | None:
        return self.value.event_type or (self.envelope.event_type if self.envelope else None)

    @property
    def event_id(self) -> str | None:
        return self.value.event_id or (self.envelope.event_id if self.envelope else None)

    @property
    def producer_id(self) -> str | None:
        return self.header("producer_id") or (self.envelope.producer_id if self.envelope else None)

    @property
    def version_label(self) -> str:
        v = self.value
        if v.version is not None:
            return str(v.version)
        if v.schema_id is not None:
            return f"id {v.schema_id}"
        return "-"


def parse(partition: int, offset: int, key: bytes | None, value: bytes | None,
          headers: list[tuple[str, str | bytes | None]] | dict[str, str | bytes | None] | None) -> Letter:
    """A Kafka record of the dead-letter topic as a Letter; BadRecord when it is not one."""
    if value is None:
        raise BadRecord(f"{partition}:{offset}: empty value")
    try:
        dl = _decoder.decode(value)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise BadRecord(f"{partition}:{offset}: not a dead letter ({exc})") from None
    if dl.payload_encoding == "json":
        raw = bytes(_raw_decoder.decode(value).payload)
    elif dl.payload_encoding == "avro" and isinstance(dl.payload, str):
        try:
            raw = base64.b64decode(dl.payload, validate=True)
        except ValueError:
            raise BadRecord(f"{partition}:{offset}: Avro payload is not base64") from None
    else:
        raise BadRecord(f"{partition}:{offset}: unknown payload_encoding {dl.payload_encoding!r}")
    items = headers.items() if isinstance(headers, dict) else headers or []
    hdrs = [(k, v.encode() if isinstance(v, str) else v or b"") for k, v in items]
    return Letter(partition, offset, key or b"", dl, hdrs, raw)


@dataclass(frozen=True)
class Selection:
    """Which dead letters an operation takes; None matches anything. Times are epoch ms (received_at)."""

    reason: str | None = None
    event_type: str | None = None
    version: int | None = None
    source: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def matches(self, letter: Letter) -> bool:
        v = letter.value
        return ((self.reason is None or v.reason == self.reason)
                and (self.event_type is None or letter.event_type == self.event_type)
                and (self.version is None or v.version == self.version)
                and (self.source is None or v.source == self.source)
                and (self.since_ms is None or v.received_at >= self.since_ms)
                and (self.until_ms is None or v.received_at < self.until_ms))


def decoded_payload(letter: Letter, reader: Any = None) -> Any:
    """The payload as a value: the JSON event object, or the Avro event read with `reader` (a parsed schema)
    when given, else its envelope fields only."""
    if letter.value.payload_encoding == "json":
        return letter.value.payload
    framed = letter.raw_payload
    try:
        schema_id: int | None = schema_id_of(framed)
    except FrameError:
        schema_id = None
    if reader is not None:
        return {"schema_id": schema_id, "event": read_body(body_of(framed), reader)}
    env = letter.envelope
    if env is None:
        return {"schema_id": schema_id, "unreadable": "no event envelope", "base64": letter.value.payload}
    return {"schema_id": schema_id, "envelope": env._asdict(), "base64": letter.value.payload}
