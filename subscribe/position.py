"""Positions in a stream: the SSE `id` of every message, and where a new subscription starts (`from=`).

A position is the next offset to read of every partition of the stream's topic: everything before it was sent
(or skipped as not the subscriber's). Its text form, the SSE `id`, is `<topic tag>-<o0>.<o1>...`: the tag (8 hex
digits of the topic name's CRC-32) catches an id replayed against another topic; offsets are in partition order.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from subscribe.errors import BadRequest

Cursor = tuple[int, ...]
Start = Literal["earliest", "latest"] | int  # int: epoch milliseconds
MAX_PARTITIONS = 512
MAX_ID_CHARS = MAX_PARTITIONS * 20 + 9
MAX_OFFSET = 2**63 - 1
_ID = re.compile(rb"[0-9a-f]{8}-[0-9]{1,19}(\.[0-9]{1,19})*")


def topic_tag(topic: str) -> bytes:
    return b"%08x" % zlib.crc32(topic.encode())


def encode(tag: bytes, cursor: Sequence[int]) -> bytes:
    """The SSE id of `cursor` (bytes: it goes straight into frames)."""
    return tag + b"-" + b".".join(b"%d" % o for o in cursor)


def decode(tag: bytes, text: str | bytes, partitions: int) -> Cursor:
    """The cursor an id names, padded with 0 for partitions added since (read from their start); BadRequest
    (invalid_last_event_id) for anything else, including an id of another topic or with more partitions."""
    raw = text.encode() if isinstance(text, str) else text
    raw = raw.strip()
    if len(raw) > MAX_ID_CHARS or not _ID.fullmatch(raw):
        raise BadRequest("Last-Event-ID is not a position this server sent", code="invalid_last_event_id")
    got_tag, _, rest = raw.partition(b"-")
    if got_tag != tag:
        raise BadRequest("Last-Event-ID is a position in another stream's topic", code="invalid_last_event_id")
    offsets = [int(o) for o in rest.split(b".")]
    if len(offsets) > partitions or any(o > MAX_OFFSET for o in offsets):
        raise BadRequest(f"Last-Event-ID names {len(offsets)} partitions; the topic has {partitions}",
                         code="invalid_last_event_id")
    return tuple(offsets) + (0,) * (partitions - len(offsets))


def decode_shared(raw: bytes) -> Cursor:
    """The cursor of an id this server made (no checks: the ring's own frames)."""
    return tuple(int(o) for o in raw.partition(b"-")[2].split(b"."))


def covers(a: Sequence[int], b: Sequence[int]) -> bool:
    """a >= b in every partition."""
    return all(x >= y for x, y in zip(a, b, strict=True))


def parse_from(raw: str | None, now_ms: int) -> Start:
    """`earliest`, `latest` (the default), epoch milliseconds, or an ISO 8601 time with an offset or `Z`."""
    if raw is None or raw in {"", "latest"}:
        return "latest"
    if raw == "earliest":
        return "earliest"
    if raw.isdigit() and len(raw) <= 16:
        ms = int(raw)
    else:
        try:
            when = datetime.fromisoformat(raw[:64])
        except ValueError:
            raise BadRequest("from must be earliest, latest, epoch milliseconds or an ISO 8601 time",
                             code="invalid_from") from None
        if when.tzinfo is None:
            raise BadRequest("from: an ISO 8601 time needs its UTC offset (or Z)", code="invalid_from")
        ms = int(when.timestamp() * 1000)
    if ms < 0 or ms > now_ms + 86_400_000:
        raise BadRequest("from: the time is before 1970 or more than a day ahead", code="invalid_from")
    return ms
