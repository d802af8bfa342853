"""Decodes a JSON batch body (protocol.md section 2) into envelope values; undecodable bodies raise BadRequest.

The batch is decoded in two steps so that a bad event is identifiable: the batch with its events as raw JSON
(each checked against the per-event byte limit), then each event's envelope with its properties kept raw
(they are validated later against the event type's schema, event by event).
"""

from __future__ import annotations

from typing import Annotated, TypeVar

import msgspec

from gateway.config import Limits
from gateway.errors import BadRequest, PayloadTooLarge

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
Uuid = Annotated[str, msgspec.Meta(pattern=UUID_PATTERN)]
Long = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
Text = Annotated[str, msgspec.Meta(max_length=1024)]
EMPTY_OBJECT = msgspec.Raw(b"{}")
T = TypeVar("T")


class Sdk(msgspec.Struct, frozen=True):
    name: Text = "unknown"
    version: Text = "unknown"


class WireBatch(msgspec.Struct, frozen=True):
    """The batch envelope; unknown top-level fields are ignored (forward compatibility)."""

    batch_id: Uuid
    sent_at: Long
    events: list[msgspec.Raw]
    sdk: Sdk = Sdk()


class WireEvent(msgspec.Struct, frozen=True):
    """One event's envelope; `properties` stays raw until its schema is known."""

    event_id: Uuid
    event_type: Text
    producer_id: Uuid
    seq: Long
    node_id: Text
    created_at: Long
    schema_version: Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)] | None = None
    partition_key: Text | None = None
    context: dict[Text, str] = {}
    properties: msgspec.Raw = EMPTY_OBJECT


_batch_decoder = msgspec.json.Decoder(WireBatch)
_event_decoder = msgspec.json.Decoder(WireEvent)


def decode_json_batch(body: bytes, limits: Limits) -> tuple[WireBatch, list[WireEvent]]:
    """The batch and its events' envelopes. 400 for undecodable input, 413 for limits."""
    try:
        body.decode("utf-8")  # msgspec skips raw values without checking their UTF-8
    except UnicodeDecodeError as exc:
        raise BadRequest(f"body is not valid UTF-8 (byte {exc.start})", code="invalid_utf8") from None
    batch = _decode(_batch_decoder, body, "batch")
    if not batch.events:
        raise BadRequest("events must hold at least one event", code="invalid_envelope")
    if len(batch.events) > limits.max_events:
        raise PayloadTooLarge(f"{len(batch.events)} events exceed the limit of {limits.max_events}",
                              code="too_many_events")
    for index, raw in enumerate(batch.events):
        if len(raw) > limits.max_event_bytes:
            raise PayloadTooLarge(f"event {index} has {len(raw)} bytes, over the limit of {limits.max_event_bytes}",
                                  code="event_too_large")
    events = [_decode(_event_decoder, raw, f"event {i}") for i, raw in enumerate(batch.events)]
    return batch, events


def _decode(decoder: msgspec.json.Decoder[T], data: bytes | msgspec.Raw, what: str) -> T:
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        text = str(exc)
        code = "invalid_number" if "out of range" in text or f"<= {2**63 - 1}" in text else "invalid_envelope"
        raise BadRequest(f"{what}: {exc}", code=code) from None
    except msgspec.DecodeError as exc:
        raise BadRequest(f"{what}: {exc}", code="invalid_json") from None
    except RecursionError:
        raise BadRequest(f"{what}: JSON nested too deeply", code="too_deep") from None
