"""Events: the cheap argument checks of `track()` and the JSON envelope of one event (protocol.md section 2)."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any, NamedTuple, Union

from ._exceptions import InvalidEventError
from ._ids import is_uuid, uuid7

_EVENT_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_valid_types: set[str] = set()  # event types seen valid: a set lookup instead of a regex per call
_VALID_TYPES_MAX = 4096
Timestamp = Union[dt.datetime, int, float, None]


class PendingEvent(NamedTuple):
    """An event accepted by `track()`, waiting in the queue; its seq is assigned when it joins a batch."""

    event_type: str
    properties: dict[str, Any]
    partition_key: str | None
    event_id: str | None
    created_at: int


class EnvelopeFields(NamedTuple):
    """The per-client envelope fields shared by every event."""

    producer_id: str
    node_id: str
    context: Mapping[str, str]


def make_event(event_type: str, properties: Mapping[str, Any] | None, partition_key: str | None,
               event_id: str | None, timestamp: Timestamp) -> PendingEvent:
    """Check the arguments of `track()` (cheaply) and capture the event; raise `InvalidEventError` if bad."""
    if event_type not in _valid_types:
        _check_event_type(event_type)
    if properties is None:
        props: dict[str, Any] = {}
    elif isinstance(properties, dict):
        props = properties.copy()
    elif isinstance(properties, Mapping):
        props = dict(properties)
    else:
        raise InvalidEventError(f"properties must be a mapping, got {type(properties).__name__}")
    if partition_key is not None and not isinstance(partition_key, str):
        raise InvalidEventError("partition_key must be a string or None")
    if event_id is not None and not (isinstance(event_id, str) and is_uuid(event_id)):
        raise InvalidEventError(f"event_id must be a UUID string, got {event_id!r}")
    created = time.time_ns() // 1_000_000 if timestamp is None else to_epoch_ms(timestamp)
    return PendingEvent(event_type, props, partition_key, event_id, created)


def _check_event_type(event_type: object) -> None:
    if not isinstance(event_type, str) or _EVENT_TYPE.fullmatch(event_type) is None:
        raise InvalidEventError(f"event_type must match [a-z][a-z0-9_]{{0,63}}, got {event_type!r}")
    if len(_valid_types) < _VALID_TYPES_MAX:
        _valid_types.add(event_type)


def to_epoch_ms(timestamp: Timestamp) -> int:
    """Epoch milliseconds of a datetime (naive means UTC) or of a number of epoch seconds."""
    if isinstance(timestamp, dt.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.timezone.utc)
        return int(timestamp.timestamp() * 1000)
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        if not math.isfinite(timestamp) or timestamp < 0:
            raise InvalidEventError(f"timestamp must be finite and >= 0, got {timestamp!r}")
        return int(timestamp * 1000)
    raise InvalidEventError(f"timestamp must be a datetime or epoch seconds, got {type(timestamp).__name__}")


def envelope(event: PendingEvent, seq: int, shared: EnvelopeFields) -> dict[str, Any]:
    """The JSON envelope of one event (protocol.md section 2), without the batch-level `sent_at`."""
    env: dict[str, Any] = {
        "event_id": event.event_id or uuid7(event.created_at),
        "event_type": event.event_type,
        "producer_id": shared.producer_id,
        "seq": seq,
        "node_id": shared.node_id,
        "created_at": event.created_at,
    }
    if event.partition_key is not None:
        env["partition_key"] = event.partition_key
    if shared.context:
        env["context"] = dict(shared.context)
    env["properties"] = event.properties
    return env


def encode_envelope(env: Mapping[str, Any]) -> bytes:
    """UTF-8 JSON of an envelope; raises ValueError for NaN/Infinity, lone surrogates or unserialisable values."""
    try:
        return json.dumps(env, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, UnicodeEncodeError, RecursionError) as exc:
        raise ValueError(str(exc)) from exc
