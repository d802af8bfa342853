"""Per-process admission: in-flight caps (events, bytes), per-source event rates, and the bounded cache of
recently committed batch answers (with the digest of the events they answered).
"""

from __future__ import annotations

import collections
import math
import time
from typing import Any

from gateway.errors import Overloaded, RateLimited
from gateway.metrics import INFLIGHT_BYTES, INFLIGHT_EVENTS


class InFlight:
    """Counts work admitted but not answered yet; admission beyond a cap raises Overloaded (503)."""

    def __init__(self, max_events: int, max_bytes: int, retry_after_s: int) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.retry_after_s = retry_after_s
        self.events = 0
        self.bytes = 0

    def admit_bytes(self, size: int) -> None:
        if self.bytes + size > self.max_bytes:
            raise Overloaded(f"{self.bytes} bytes in flight; try again later", retry_after=self.retry_after_s)
        self.bytes += size
        INFLIGHT_BYTES.inc(size)

    def release_bytes(self, size: int) -> None:
        self.bytes -= size
        INFLIGHT_BYTES.dec(size)

    def admit_events(self, count: int) -> None:
        if self.events + count > self.max_events:
            raise Overloaded(f"{self.events} events in flight; try again later", retry_after=self.retry_after_s)
        self.events += count
        INFLIGHT_EVENTS.inc(count)

    def release_events(self, count: int) -> None:
        self.events -= count
        INFLIGHT_EVENTS.dec(count)


class Reservation:
    """The bytes one request holds in an InFlight budget, added as they arrive and released once."""

    def __init__(self, inflight: InFlight) -> None:
        self.inflight = inflight
        self.size = 0

    def add(self, size: int) -> None:
        self.inflight.admit_bytes(size)
        self.size += size

    def release(self) -> None:
        self.inflight.release_bytes(self.size)
        self.size = 0


Answer = tuple[int, dict[str, Any], bytes]  # status, body, digest of the events answered


class CommittedBatches:
    """LRU of (source, batch_id) -> (status, body, events digest) of committed batches, answering retries
    without new writes; the digest tells a retry (same events) from a reused batch_id (other events)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: collections.OrderedDict[tuple[str, str], Answer] = collections.OrderedDict()

    def get(self, source: str, batch_id: str) -> Answer | None:
        item = self._items.get((source, batch_id))
        if item is not None:
            self._items.move_to_end((source, batch_id))
        return item

    def put(self, source: str, batch_id: str, status: int, body: dict[str, Any], digest: bytes) -> None:
        if self.size <= 0:
            return
        self._items[(source, batch_id)] = (status, body, digest)
        self._items.move_to_end((source, batch_id))
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    async def written(self) -> None:
        """Nothing to wait for in one process (gateway.batch_cache shares answers between workers)."""


class SourceRates:
    """A token bucket of `rate` events/s (burst: `burst_s` seconds of it) per write-key source; 0 = unlimited.

    A batch larger than the whole bucket is admitted once the bucket is full, leaving it in debt (negative):
    refusing it would answer 429 to every retry of a legal batch forever (a livelock), while the debt keeps
    the long-run rate at `rate`.
    """

    def __init__(self, rate: float, burst_s: float = 2.0) -> None:
        self.rate = rate
        self.capacity = rate * burst_s
        self._buckets: dict[str, tuple[float, float]] = {}

    def admit(self, source: str, events: int, now: float | None = None) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.get(source, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        needed = min(events, self.capacity)
        if needed > tokens:
            self._buckets[source] = (tokens, now)
            wait = math.ceil((needed - tokens) / self.rate)
            raise RateLimited(f"source {source!r} is over {self.rate:g} events/s", retry_after=max(1, wait))
        self._buckets[source] = (tokens - events, now)
