"""Connection recycling: close a keep-alive connection after a jittered age or request count, and resolve the
client's address (X-Forwarded-For is believed only when the peer is a configured trusted proxy).
"""

from __future__ import annotations

import random
import time
import weakref
from dataclasses import dataclass

from aiohttp import web


@dataclass
class _Conn:
    born: float
    max_age_s: float
    max_requests: int
    requests: int = 0


class ConnectionRecycler:
    """Marks the response that ends a connection's life with `Connection: close`."""

    def __init__(self, max_age_s: float, max_requests: int, jitter: float, rng: random.Random | None = None) -> None:
        self.max_age_s = max_age_s
        self.max_requests = max_requests
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._conns: weakref.WeakKeyDictionary[object, _Conn] = weakref.WeakKeyDictionary()

    def _spread(self, value: float) -> float:
        # Jitter spreads reconnections of clients that connected together (e.g. after a deploy).
        return value * (1.0 - self.jitter * self._rng.random())

    def should_close(self, transport: object | None, now: float | None = None) -> bool:
        """Count one request on `transport`; True when this response must close the connection."""
        if transport is None:
            return True
        now = time.monotonic() if now is None else now
        conn = self._conns.get(transport)
        if conn is None:
            conn = _Conn(now, self._spread(self.max_age_s), max(1, round(self._spread(self.max_requests))))
            self._conns[transport] = conn
        conn.requests += 1
        return conn.requests >= conn.max_requests or now - conn.born >= conn.max_age_s


def client_ip(request: web.BaseRequest, trusted: frozenset[str]) -> str:
    """The peer address, or the nearest untrusted hop of X-Forwarded-For when the peer is a trusted proxy."""
    peer = request.remote or ""
    if peer not in trusted:
        return peer
    # Every X-Forwarded-For line, in order: a proxy may add its own line (HAProxy's `option forwardfor` does) after
    # one the client forged, and the first line alone would be the client's word (RFC 9110 5.3: lines = one list).
    forwarded = ",".join(request.headers.getall("X-Forwarded-For", []))
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    for hop in reversed(hops):
        if hop not in trusted:
            return hop
    return hops[0] if hops else peer
