"""Server-Sent Events framing (the WHATWG HTML "event stream" format): the bytes of every message this server sends.

A record is `id: <position>` + `data: <one line of JSON>`. The other messages: `retry` and the start position
first (so a client that reconnects before any record resumes where it started, not at the then latest), id-only
heartbeats (they move a browser's `lastEventId` past records a filter skipped, and keep proxies from closing an
idle connection), comment heartbeats, and the named events `cutoff` and `gap`.
"""

from __future__ import annotations

import json
from typing import Any

HEARTBEAT = b": keep-alive\n\n"
ID_PREFIX = b"id: "
DATA_PREFIX = b"\ndata: "


def record(event_id: bytes, body: bytes) -> bytes:
    """One record message; `body` is single-line JSON (msgspec and json.dumps never emit a raw newline)."""
    return ID_PREFIX + event_id + DATA_PREFIX + body + b"\n\n"


def body_of(frame: bytes, id_len: int) -> bytes:
    """The JSON of a record frame whose id is `id_len` bytes long."""
    return frame[len(ID_PREFIX) + id_len + len(DATA_PREFIX):-2]


def position(event_id: bytes) -> bytes:
    """An id-only message: sets the client's last event id, dispatches nothing."""
    return ID_PREFIX + event_id + b"\n\n"


def preamble(retry_ms: int, event_id: bytes) -> bytes:
    return b"retry: %d\n" % retry_ms + position(event_id)


def named(event: str, event_id: bytes | None, data: dict[str, Any]) -> bytes:
    """A named control message (`cutoff`, `gap`), with the position it leaves the client at."""
    head = b"event: " + event.encode() + b"\n"
    if event_id is not None:
        head += ID_PREFIX + event_id + b"\n"
    return head + b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"
