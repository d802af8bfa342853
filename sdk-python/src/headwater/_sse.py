"""A Server-Sent Events parser (the WHATWG "event stream" format): bytes in, messages out, no I/O.

Lines end in LF, CR or CRLF; `data` lines join with LF; an `id` sets the last event id even when the message
carries no data (the subscription server moves a client's position that way); comments (`:`) are skipped. A line
longer than `max_line` raises ValueError (a server must not make the client buffer without bound).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SseMessage:
    event: str
    data: str
    id: str | None


class SseParser:
    def __init__(self, max_line: int = 16 * 1024 * 1024) -> None:
        self.max_line = max_line
        self.last_id: str | None = None
        self.retry_ms: int | None = None
        self._buf = b""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._cr = False

    def feed(self, chunk: bytes) -> list[SseMessage]:
        """The messages completed by `chunk`."""
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        self._cr = False
        buf = self._buf + chunk
        out: list[SseMessage] = []
        start = 0
        while True:
            cr, lf = buf.find(b"\r", start), buf.find(b"\n", start)
            ends = [i for i in (cr, lf) if i >= 0]
            if not ends:
                break
            end = min(ends)
            line = buf[start:end]
            if buf[end:end + 1] == b"\r":
                if end + 1 == len(buf):
                    self._cr = True
                    start = end + 1
                elif buf[end + 1:end + 2] == b"\n":
                    start = end + 2
                else:
                    start = end + 1
            else:
                start = end + 1
            msg = self._line(line.decode("utf-8", errors="replace"))
            if msg is not None:
                out.append(msg)
        self._buf = buf[start:]
        if len(self._buf) > self.max_line:
            raise ValueError(f"an event-stream line is longer than {self.max_line} bytes")
        return out

    def _line(self, line: str) -> SseMessage | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseMessage | None:
        if self._id is not None:
            self.last_id = self._id
        msg = SseMessage(self._event or "message", "\n".join(self._data), self.last_id) if self._data else None
        self._event, self._data, self._id = "", [], None
        return msg
