"""Decodes a JSON batch body (protocol.md section 2) into envelope values; undecodable bodies raise BadRequest.

The batch is decoded in two steps so that a bad event is identifiable: the batch with its events as raw JSON
(each checked against the per-event byte limit), then each event's envelope with its properties kept raw
(they are validated later against the event type's schema, event by event).

Unknown batch-, sdk- and envelope-level fields are ignored (forward compatibility), but the protocol's number
rules hold wherever a number appears: objects are first decoded strictly (no unknown field, the fast path of
every current SDK); one that has unknown fields is decoded leniently and then checked as plain JSON.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, TypeVar

import msgspec

from gateway.config import Limits
from gateway.errors import BadRequest, PayloadTooLarge

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
Uuid = Annotated[str, msgspec.Meta(pattern=UUID_PATTERN)]
Long = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
MAX_TEXT = 1024
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]
EMPTY_OBJECT = msgspec.Raw(b"{}")
INT64 = (-(2**63), 2**63 - 1)
T = TypeVar("T")


class Sdk(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: Text = "unknown"
    version: Text = "unknown"


class WireBatch(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The batch envelope."""

    batch_id: Uuid
    sent_at: Long
    events: list[msgspec.Raw]
    sdk: Sdk = Sdk()


class WireEvent(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
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


class _LenientSdk(Sdk, frozen=True, forbid_unknown_fields=False):
    pass


class _LenientBatch(WireBatch, frozen=True, forbid_unknown_fields=False):
    sdk: _LenientSdk = _LenientSdk()


class _LenientEvent(WireEvent, frozen=True, forbid_unknown_fields=False):
    pass


_strict_batch = msgspec.json.Decoder(WireBatch)
_lenient_batch = msgspec.json.Decoder(_LenientBatch)
_strict_event = msgspec.json.Decoder(WireEvent)
_lenient_event = msgspec.json.Decoder(_LenientEvent)
_plain = msgspec.json.Decoder()


def decode_json_batch(body: bytes, limits: Limits) -> tuple[WireBatch, list[WireEvent]]:
    """The batch and its events' envelopes. 400 for undecodable input, 413 for limits."""
    try:
        body.decode("utf-8")  # msgspec skips raw values without checking their UTF-8
    except UnicodeDecodeError as exc:
        raise BadRequest(f"body is not valid UTF-8 (byte {exc.start})", code="invalid_utf8") from None
    batch = _decode(_strict_batch, _lenient_batch, body, "batch")
    if not batch.events:
        raise BadRequest("events must hold at least one event", code="invalid_envelope")
    if len(batch.events) > limits.max_events:
        raise PayloadTooLarge(f"{len(batch.events)} events exceed the limit of {limits.max_events}",
                              code="too_many_events")
    for index, raw in enumerate(batch.events):
        if len(raw) > limits.max_event_bytes:
            raise PayloadTooLarge(f"event {index} has {len(raw)} bytes, over the limit of {limits.max_event_bytes}",
                                  code="event_too_large")
    events = [_decode(_strict_event, _lenient_event, raw, f"event {i}") for i, raw in enumerate(batch.events)]
    return batch, events


def events_digest(event_ids: list[str]) -> bytes:
    """What identifies a batch's content for the committed-batch cache: its event ids, in order."""
    return hashlib.sha256("\n".join(event_ids).encode()).digest()


def check_numbers(raw: bytes | msgspec.Raw, what: str) -> None:
    """400 when `raw` (any JSON) holds a number no schema can hold: beyond 64 bits, or overflowing a double."""
    try:
        value = _plain.decode(raw)
    except msgspec.ValidationError:
        raise BadRequest(f"{what}: number out of range", code="invalid_number") from None
    except msgspec.DecodeError as exc:
        raise BadRequest(f"{what}: {exc}", code="invalid_json") from None
    except RecursionError:
        raise BadRequest(f"{what}: JSON nested too deeply", code="too_deep") from None
    if has_huge_int(value):
        raise BadRequest(f"{what}: integer beyond 64 bits", code="invalid_number")


def has_huge_int(value: Any) -> bool:
    """True if any integer in a decoded JSON value is beyond 64 bits (iterative: nesting depth costs no stack)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is int and not INT64[0] <= item <= INT64[1]:
            return True
    return False


def _decode(strict: msgspec.json.Decoder[T], lenient: msgspec.json.Decoder[Any], data: bytes | msgspec.Raw,
            what: str) -> T:
    try:
        try:
            return strict.decode(data)
        except msgspec.ValidationError as exc:
            if not str(exc).startswith("Object contains unknown field"):
                raise
        value: T = lenient.decode(data)
        check_numbers(data, what)  # the unknown fields were skipped unchecked
        return value
    except msgspec.ValidationError as exc:
        text = str(exc)
        code = "invalid_number" if "out of range" in text or f"<= {2**63 - 1}" in text else "invalid_envelope"
        raise BadRequest(f"{what}: {text}", code=code) from None
    except msgspec.DecodeError as exc:
        raise BadRequest(f"{what}: {exc}", code="invalid_json") from None
    except RecursionError:
        raise BadRequest(f"{what}: JSON nested too deeply", code="too_deep") from None
