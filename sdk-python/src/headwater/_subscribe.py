"""Live subscriptions: `subscribe(endpoint, read_key, stream)` iterates a stream's records as the subscription
server pushes them, and after any disconnect resumes exactly after the last record received.

```python
import headwater

with headwater.subscribe("http://subscribe:8082", "hwr_...", "rule.slow_pages_alert") as sub:
    for record in sub:
        print(record.value)          # the decoded row or event; record.id is its position
```

The server's position comes with every record (`record.id`, also `sub.last_event_id`); keep it to resume in
another process (`last_event_id=`). Reconnects (a dropped connection, the server restarting, a cut-off after
falling behind, 429/5xx) wait with jittered backoff, never less than the server's `retry` or `Retry-After`;
any other refusal (a bad key, a stream outside the key's scope, a bad filter) raises `SubscriptionError`.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import urllib3

from ._exceptions import HeadwaterError
from ._retry import backoff
from ._sse import SseParser

log = logging.getLogger("headwater")
RETRIED = frozenset({408, 429, 500, 502, 503, 504})


class SubscriptionError(HeadwaterError):
    """The server refused the subscription (not retried): `status`, the stable `code`, `message`."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class StreamRecord:
    """One record of a stream. `id` is the position after it (resume with `last_event_id=id`)."""

    id: str
    stream: str
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: Any
    schema: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, str] | None = None  # set when the server could not decode the record (value is None)


class Subscription:
    """An iterator of `StreamRecord`s that reconnects by itself; `close()` (or leaving `with`) ends it."""

    def __init__(self, endpoint: str, read_key: str, stream: str, *, start: str = "latest",
                 filter: Mapping[str, Any] | None = None, last_event_id: str | None = None,
                 read_timeout_s: float = 60.0, max_backoff_s: float = 30.0,
                 pool: urllib3.PoolManager | None = None) -> None:
        query = {"from": start}
        if filter:
            query["filter"] = json.dumps(dict(filter), separators=(",", ":"))
        self.url = (endpoint.rstrip("/") + "/v1/streams/" + urllib.parse.quote(stream, safe="") + "?"
                    + urllib.parse.urlencode(query))
        self.last_event_id = last_event_id
        self.gaps: list[dict[str, Any]] = []  # records deleted by retention before a resume could read them
        self.cutoffs = 0
        self.reconnects = 0
        self._key = read_key
        self._read_timeout = read_timeout_s
        self._max_backoff = max_backoff_s
        self._pool = pool or urllib3.PoolManager(maxsize=1, retries=False)
        self._closed = threading.Event()
        self._resp: Any | None = None

    def __iter__(self) -> Iterator[StreamRecord]:
        return self._records()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the iteration (from any thread): the open connection is closed."""
        self._closed.set()
        resp = self._resp
        if resp is not None:
            resp.release_conn()

    def _records(self) -> Iterator[StreamRecord]:
        failures = 0
        while not self._closed.is_set():
            parser = SseParser()
            delay: float | None = None
            try:
                for record in self._connect(parser):
                    failures = 0
                    yield record
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._closed.is_set():
                    return
                log.info("headwater subscription to %s: %s; reconnecting", self.url.split("?")[0], exc)
            except _Retry as retry:
                delay = retry.after
            failures += 1
            self.reconnects += 1
            base = (parser.retry_ms or 1000) / 1000
            if self._closed.wait(backoff(failures, base, self._max_backoff, delay)):
                return

    def _connect(self, parser: SseParser) -> Iterator[StreamRecord]:
        headers = {"Authorization": f"Bearer {self._key}", "Accept": "text/event-stream"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        resp = self._pool.request("GET", self.url, headers=headers, preload_content=False, redirect=False,
                                  timeout=urllib3.Timeout(connect=10.0, read=self._read_timeout))
        self._resp = resp
        try:
            if resp.status != 200:
                self._refused(resp)
            for chunk in resp.stream(65536):
                for msg in parser.feed(chunk):
                    if msg.id is not None:
                        self.last_event_id = msg.id  # the position after this message, not after the chunk
                    record = self._message(msg.event, msg.data)
                    if record is not None:
                        yield record
                if parser.last_id is not None:  # every message of the chunk was taken: id-only ones count too
                    self.last_event_id = parser.last_id
        finally:
            self._resp = None
            resp.release_conn()

    def _message(self, event: str, data: str) -> StreamRecord | None:
        doc = json.loads(data)
        if event == "message":
            return StreamRecord(self.last_event_id or "", doc["stream"], doc["partition"], doc["offset"],
                                doc["timestamp"], doc.get("key"), doc.get("value"), doc.get("schema"),
                                doc.get("headers") or {}, doc.get("error"))
        if event == "cutoff":
            self.cutoffs += 1
            log.info("headwater subscription cut off (%s); resuming from %s", doc.get("code"), doc.get("position"))
        elif event == "gap":
            self.gaps.append(doc)
            log.warning("headwater subscription: records deleted by retention were skipped: %s", doc)
        return None

    def _refused(self, resp: Any) -> None:
        try:
            body = json.loads(resp.read(65536) or b"{}")
        except ValueError:
            body = {}
        code, message = str(body.get("code", "http_error")), str(body.get("message", ""))
        if resp.status in RETRIED:
            after = resp.headers.get("Retry-After")
            raise _Retry(float(after) if after and after.isdigit() else None)
        raise SubscriptionError(resp.status, code, message)


class _Retry(Exception):
    def __init__(self, after: float | None) -> None:
        super().__init__(after)
        self.after = after


def subscribe(endpoint: str, read_key: str, stream: str, *, start: str = "latest",
              filter: Mapping[str, Any] | None = None, last_event_id: str | None = None,
              read_timeout_s: float = 60.0, max_backoff_s: float = 30.0) -> Subscription:
    """Subscribe to `stream` (`event.<type>`, `rule.<name>`, `deadletter`, `aggregates`) with a read key.

    `start`: `latest` (default), `earliest`, epoch milliseconds or an ISO 8601 time, for the first connection
    only (every reconnect resumes from the last position); `filter`: `{field path: value or [values]}`, equality
    only (docs/subscriptions.md); `last_event_id`: resume from a position kept earlier. `read_timeout_s`:
    reconnect when nothing (not even a heartbeat) arrives for this long.
    """
    return Subscription(endpoint, read_key, stream, start=start, filter=filter, last_event_id=last_event_id,
                        read_timeout_s=read_timeout_s, max_backoff_s=max_backoff_s)
