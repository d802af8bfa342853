"""Events: the argument checks of `track()` and the JSON envelope of one event (protocol.md section 2)."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any, Union

from ._exceptions import InvalidEventError
from ._ids import is_uuid, uuid7
from ._properties import sendable_properties

_EVENT_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_valid_types: set[str] = set()  # event types seen valid: a set lookup instead of a regex per call
_VALID_TYPES_MAX = 4096
Timestamp = Union[dt.datetime, int, float, None]
MAX_EPOCH_S = 253_402_300_800  # 10000-01-01T00:00:00Z


class EnvelopeEncoder:
    """Encodes accepted events as JSON envelopes (protocol.md section 2), all but the `seq`, on the caller's thread.

    An event becomes `(head, tail)`: `head` ends with `"seq":` and the batcher writes the seq between the two,
    so the event is encoded (and checked) once, in `track()`, and its seq is chosen when the queue accepts it.
    """

    def __init__(self, producer_id: str, node_id: str, context: Mapping[str, str]) -> None:
        self._producer = _json(producer_id)
        self._node = _json(node_id)
        self._context = (',"context":' + _json(dict(context))) if context else ""

    def encode(self, event_type: str, properties: Mapping[str, Any] | None, partition_key: str | None,
               event_id: str | None, timestamp: Timestamp) -> tuple[bytes, bytes]:
        """Check the arguments of `track()` and encode the event; raise `InvalidEventError` naming what is bad."""
        if event_type not in _valid_types:
            _check_event_type(event_type)
        props = sendable_properties(properties)
        if partition_key is not None and not isinstance(partition_key, str):
            raise InvalidEventError("partition_key must be a string or None", "invalid_partition_key", "partition_key")
        if event_id is not None and not (isinstance(event_id, str) and is_uuid(event_id)):
            raise InvalidEventError(f"event_id must be a UUID string, got {event_id!r}", "invalid_event_id",
                                    "event_id")
        created = time.time_ns() // 1_000_000 if timestamp is None else to_epoch_ms(timestamp)
        head = (f'{{"event_id":"{event_id or uuid7(created)}","event_type":"{event_type}",'
                f'"producer_id":{self._producer},"seq":')
        tail = f',"node_id":{self._node},"created_at":{created}'
        if partition_key is not None:
            tail += ',"partition_key":' + _json(partition_key)
        tail += self._context + ',"properties":' + _json(props) + "}"
        try:
            return head.encode(), tail.encode()
        except UnicodeEncodeError:
            raise InvalidEventError(*_bad_text(props, partition_key)) from None


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)  # stateless: shared


def _json(value: Any) -> str:
    return _ENCODER.encode(value)


def _bad_text(props: Any, partition_key: str | None, path: str = "properties") -> tuple[str, str, str | None]:
    """(message, code, field) for a string holding a lone surrogate (not valid Unicode, not sendable as UTF-8)."""
    found = _find_surrogate(props, path)
    code = "invalid_property_value"
    if found is None and partition_key is not None:
        found, code = "partition_key", "invalid_partition_key"
    return f"{found or 'a string'}: holds a lone surrogate (not valid Unicode, cannot be sent as UTF-8)", code, found


def _find_surrogate(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return path
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _find_surrogate(key, f"{path} (a key)") or _find_surrogate(item, f"{path}.{key}")
            if found:
                return found
    if isinstance(value, (list, tuple)):  # tuples: properties sent without a copy keep them
        for i, item in enumerate(value):
            found = _find_surrogate(item, f"{path}[{i}]")
            if found:
                return found
    return None


def _check_event_type(event_type: object) -> None:
    if not isinstance(event_type, str) or _EVENT_TYPE.fullmatch(event_type) is None:
        raise InvalidEventError(f"event_type must match [a-z][a-z0-9_]{{0,63}}, got {event_type!r}",
                                "invalid_event_type", "event_type")
    if len(_valid_types) < _VALID_TYPES_MAX:
        _valid_types.add(event_type)


def to_epoch_ms(timestamp: Timestamp) -> int:
    """Epoch milliseconds of a datetime (naive means UTC) or of a number of epoch seconds."""
    if isinstance(timestamp, dt.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.timezone.utc)
        return int(timestamp.timestamp() * 1000)
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        if not math.isfinite(timestamp) or not 0 <= timestamp < MAX_EPOCH_S:
            raise InvalidEventError(f"timestamp must be epoch seconds in [0, {MAX_EPOCH_S}), got {timestamp!r}",
                                    "invalid_timestamp", "timestamp")
        return int(timestamp * 1000)
    raise InvalidEventError(f"timestamp must be a datetime or epoch seconds, got {type(timestamp).__name__}",
                            "invalid_timestamp", "timestamp")
