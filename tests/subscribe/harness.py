"""Test helpers: a real `python -m subscribe` process on a free port (bench.subscribe.server's, shared with the
benchmark), a blocking SSE client over a real socket (http.client, so the test controls reads, drops and
timeouts), and events sent through the real gateway."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bench.subscribe.server import Keys, Server, start_server

__all__ = ["Keys", "Message", "Server", "Stream", "follow", "post_page_views", "start_server"]


@dataclass
class Message:
    event: str
    id: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


class Stream:
    """One SSE connection read line by line; `last_id` as a browser would keep it."""

    def __init__(self, url: str, stream: str, key: str | None, query: Mapping[str, str] | None = None, *,
                 last_id: str | None = None, timeout_s: float = 30, rcvbuf: int | None = None) -> None:
        parsed = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=timeout_s)
        if rcvbuf is not None:
            self.conn.connect()
            self.conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        headers = {"Accept": "text/event-stream"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        qs = ("?" + urllib.parse.urlencode(query)) if query else ""
        self.conn.request("GET", f"/v1/streams/{stream}{qs}", headers=headers)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.last_id = last_id
        self.retry_ms: int | None = None

    def error(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.resp.read())
        return body

    def messages(self) -> Iterator[Message]:
        """Dispatched messages until the server ends the stream (id-only messages move last_id only)."""
        event, event_id = "message", None
        data: list[str] = []
        while True:
            raw = self.resp.readline()
            if not raw:
                return
            line = raw.decode().rstrip("\n")
            if line == "":
                if event_id is not None:
                    self.last_id = event_id
                if data:
                    yield Message(event, event_id, "\n".join(data))
                event, data, event_id = "message", [], None
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "id":
                event_id = value
            elif name == "event":
                event = value
            elif name == "retry":
                self.retry_ms = int(value)

    def close(self) -> None:
        self.resp.close()  # the response holds the socket too: both, or the connection stays open
        self.conn.close()


def follow(url: str, stream: str, key: str, query: Mapping[str, str] | None, *, want: int,
           got: list[dict[str, Any]], cutoffs: list[dict[str, Any]] | None = None) -> None:
    """Read records into `got` until there are `want`, reconnecting from the last id whenever the server ends
    the stream (a cut-off), as a resuming client does."""
    last_id: str | None = None
    while len(got) < want:
        s = Stream(url, stream, key, query, last_id=last_id)
        assert s.status == 200, s.error()
        try:
            for msg in s.messages():
                if msg.event == "cutoff":
                    if cutoffs is not None:
                        cutoffs.append(msg.json())
                    continue
                got.append(msg.json())
                if len(got) >= want:
                    return
        finally:
            last_id = s.last_id
            s.close()


def post_page_views(gateway_url: str, write_key: str, count: int, marker: str, *, per_batch: int = 20,
                    load_time_ms: Callable[[int], float] | None = None) -> list[str]:
    """`count` page views through the gateway, `marker` as their title (and `load_time_ms(seq)` as their load
    time, when given); their event ids, in send order."""
    producer, ids = str(uuid.uuid4()), []
    for start in range(0, count, per_batch):
        events = []
        for seq in range(start, min(count, start + per_batch)):
            event_id = str(uuid.uuid4())
            ids.append(event_id)
            events.append({"event_id": event_id, "event_type": "page_view", "producer_id": producer, "seq": seq,
                           "node_id": f"node-{seq % 7}", "created_at": int(time.time() * 1000),
                           "properties": {"url": "https://example.com/", "path": f"/p{seq}", "title": marker,
                                          "user_agent": "ua", "session_id": "s", "viewport": {"width": 1,
                                                                                             "height": 1},
                                          "locale": "en",
                                          **({"load_time_ms": load_time_ms(seq)} if load_time_ms else {})}})
        body = json.dumps({"batch_id": str(uuid.uuid4()), "sent_at": int(time.time() * 1000),
                           "sdk": {"name": "subscribe-test", "version": "1"}, "events": events}).encode()
        req = urllib.request.Request(gateway_url + "/v1/batch", data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {write_key}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 200, resp.read()
    return ids
