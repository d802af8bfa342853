"""Bounds on schema-registry lookups caused by clients: a bounded negative cache and a per-source lookup budget."""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Hashable

from gateway.errors import RateLimited


class NegativeCache:
    """Keys the registry recently answered 404 for, each for `ttl_s`; at most `size` keys (oldest dropped)."""

    def __init__(self, size: int, ttl_s: float) -> None:
        self.size = size
        self.ttl_s = ttl_s
        self._expiry: collections.OrderedDict[Hashable, float] = collections.OrderedDict()

    def __contains__(self, key: Hashable) -> bool:
        expiry = self._expiry.get(key)
        if expiry is None:
            return False
        if expiry > time.monotonic():
            return True
        del self._expiry[key]
        return False

    def __len__(self) -> int:
        return len(self._expiry)

    def add(self, key: Hashable) -> None:
        self._expiry[key] = time.monotonic() + self.ttl_s
        self._expiry.move_to_end(key)
        while len(self._expiry) > self.size:
            self._expiry.popitem(last=False)

    def discard(self, key: Hashable) -> None:
        self._expiry.pop(key, None)


class LookupBudget:
    """A token bucket per write-key source: `rate` registry lookups/s, bursts of `burst`; beyond it, 429.

    At most `max_sources` buckets are kept (least recently used dropped), so the table is bounded too.
    """

    def __init__(self, rate: float, burst: float, retry_after_s: int, max_sources: int = 10_000) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self.retry_after_s = retry_after_s
        self.max_sources = max_sources
        self._buckets: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()

    def charge(self, source: str, lookups: int, now: float | None = None) -> None:
        """Take `lookups` tokens from `source`'s bucket or raise RateLimited (nothing taken)."""
        if lookups <= 0 or self.rate <= 0:
            return
        lookups = min(lookups, int(self.burst))  # a batch needing more than a burst is admitted when it is full
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.get(source, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if lookups > tokens:
            self._put(source, tokens, now)
            wait = math.ceil((lookups - tokens) / self.rate)
            raise RateLimited(f"too many schema lookups from source {source!r} ({lookups} unknown schemas in this "
                              f"batch; the limit is {self.rate:g}/s)", code="schema_lookups_limited",
                              retry_after=max(self.retry_after_s, wait))
        self._put(source, tokens - lookups, now)

    def _put(self, source: str, tokens: float, now: float) -> None:
        self._buckets[source] = (tokens, now)
        self._buckets.move_to_end(source)
        while len(self._buckets) > self.max_sources:
            self._buckets.popitem(last=False)
