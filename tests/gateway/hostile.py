"""Shared by the hostile-client tests (`test_hostile*.py`): raw HTTP on a socket, malformed requests, log capture,
and the attack sizes (small by default, full with `HEADWATER_CHAOS=full`, as `make chaos` runs them).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from typing import Any

from gateway.logs import JsonFormatter
from tests.gateway.helpers import WRITE_KEY, FakeProducer, FakeRegistry, avro_event, avro_record, page_view

FULL = os.environ.get("HEADWATER_CHAOS", "") == "full"
EMPTY_ZSTD_FRAME = bytes.fromhex("28b52ffd2000010000")
MiB = 1024 * 1024


def n(small: int, full: int) -> int:
    """An attack's size: `small` by default, `full` under HEADWATER_CHAOS=full."""
    return full if FULL else small


def records(producers: list[FakeProducer]) -> list[Any]:
    """Every record the (first) fake producer committed."""
    return [r for t in producers[0].committed for r in t]


def avro_event_bytes(registry: FakeRegistry, **overrides: Any) -> bytes:
    """A framed page_view v2 event (fast path), with `overrides` in its envelope."""
    sid = registry.id_of("page_view", 2)
    return avro_event(registry.by_id[sid]["schema"], sid, avro_record(page_view(**overrides)))


class LogCapture(logging.Handler):
    """Every log line of every logger, formatted as the gateway writes them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter(0))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def capture_logs() -> Iterator[LogCapture]:
    """The body of a `captured` fixture: all loggers at DEBUG into a LogCapture, restored afterwards."""
    root = logging.getLogger()
    handler, level = LogCapture(), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def raw_http(url: str, data: bytes, timeout: float = 20.0) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes on a new connection; the server's answer (it closes after an error) as status, headers, body."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
    return int(lines[0].split()[1]), {k.strip().lower(): v.strip() for k, v in fields.items()}, body


def http_request(body: bytes, extra: str = "", auth: str = f"Authorization: Bearer {WRITE_KEY}\r\n") -> bytes:
    """A raw POST /v1/batch with the test write key (or `auth`), `extra` header lines and `body`."""
    return (f"POST /v1/batch HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n{auth}{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


MALFORMED = [
    # bare LF line ends
    f"POST /v1/batch HTTP/1.1\nHost: gw\nAuthorization: Bearer {WRITE_KEY}\nContent-Length: 2\n\n{{}}".encode(),
    # a control character after the key
    http_request(b"{}", auth=f"Authorization: Bearer {WRITE_KEY}\x01\r\n"),
    # white space before the colon
    http_request(b"{}", auth=f"Authorization : Bearer {WRITE_KEY}\r\n"),
    # a header line over aiohttp's limit, holding the key
    http_request(b"{}", auth=f"Authorization: Bearer {WRITE_KEY}{'x' * 9000}\r\n"),
]

