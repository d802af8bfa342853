"""Connection recycling: close a keep-alive connection after a jittered age or request count, and resolve the
client's address (X-Forwarded-For is believed only on a connection from an authenticated proxy: one that showed a
trusted TLS client certificate, or came through the proxy's unix socket).
"""

from __future__ import annotations

import random
import time
import weakref
from dataclasses import dataclass

from aiohttp import web

from common.tls import peer_names


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

    def should_close(self, connection: object | None, now: float | None = None) -> bool:
        """Count one request on `connection` (its protocol object: uvloop's TLS transports cannot be weakly
        referenced; the gateway's handler class can); True when this response must close the connection."""
        if connection is None:
            return True
        now = time.monotonic() if now is None else now
        conn = self._conns.get(connection)
        if conn is None:
            conn = _Conn(now, self._spread(self.max_age_s), max(1, round(self._spread(self.max_requests))))
            self._conns[connection] = conn
        conn.requests += 1
        return conn.requests >= conn.max_requests or now - conn.born >= conn.max_age_s


def client_ip(request: web.BaseRequest, trusted: frozenset[str]) -> str:
    """The peer address, or the last X-Forwarded-For hop when the connection is an authenticated proxy's.

    `trusted`: the certificate names of trusted proxies. Only the last hop is believed: the authenticated proxy
    appended it (HAProxy's `option forwardfor` adds its own line after any the client sent; RFC 9110 5.3: the
    lines are one list); the hops before it are the client's word.
    """
    peer = request.remote or ""
    if peer:  # TCP: trusted only with a verified client certificate of a trusted name
        if not trusted or not trusted & peer_names(_extra(request, "peercert")):
            return peer
    elif not isinstance(_extra(request, "sockname"), str):  # not our unix socket either
        return peer
    forwarded = ",".join(request.headers.getall("X-Forwarded-For", []))
    hops = [h.strip() for h in forwarded.split(",") if h.strip()]
    return hops[-1] if hops else peer


def _extra(request: web.BaseRequest, name: str) -> object:
    transport = request.transport
    return None if transport is None else transport.get_extra_info(name)
