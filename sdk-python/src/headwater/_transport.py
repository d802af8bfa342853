"""The transport seam: a small Protocol, the urllib3 keep-alive transport, and an in-memory fake for tests.

urllib3 is the HTTP client: it is what `requests` is built on (so nearly every Python service already has
it), it has no other dependencies, it is thread-safe, and its connection pool keeps HTTP/1.1 connections
alive and reconnects transparently when the gateway answers `Connection: close`. The transport also
replaces its pool after `connection_max_age_s` (with +-10 % jitter) so a load balancer can rebalance.

Proxies: the `proxy` option (an `http://` proxy URL) is used for every request; without it, `HTTPS_PROXY`,
`HTTP_PROXY` and `NO_PROXY` (as curl and requests read them) decide per host.

TLS: `https://` endpoints are verified (certificate chain and host name) against the system's trust store, or
against the CA certificates of `ca_bundle` (a PEM file) when given; there is no switch to turn it off.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any, Callable, Protocol

import urllib3

from ._exceptions import TransportError


@dataclasses.dataclass(frozen=True)
class Request:
    """One HTTP request: method, absolute URL, headers and body."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes = b""


@dataclasses.dataclass(frozen=True)
class Response:
    """One HTTP response: status, headers (names in lower case) and body."""

    status: int
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""


class Transport(Protocol):
    """Sends one request and returns the response; raises `TransportError` for connection errors/timeouts."""

    def send(self, request: Request, timeout: float) -> Response:
        """Send `request`, waiting at most `timeout` seconds."""

    def close(self) -> None:
        """Close every connection."""


class Urllib3Transport:
    """HTTP/1.1 keep-alive through urllib3 (direct, or through a proxy), recycled after an age with jitter.

    `maxsize` connections per host are kept (one per concurrent sender); `proxy` forces a proxy, else
    `trust_env` reads `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` from the environment; `ca_bundle` (a PEM file)
    replaces the system's trust store for `https://`.
    """

    def __init__(self, max_age_s: float = 300.0, maxsize: int = 16, proxy: str | None = None,
                 trust_env: bool = True, ca_bundle: str | None = None) -> None:
        self._max_age_s = max_age_s
        self._maxsize = maxsize
        self._proxy = proxy
        self._tls: dict[str, Any] = {"cert_reqs": "CERT_REQUIRED"}
        if ca_bundle is not None:
            self._tls["ca_certs"] = ca_bundle
        self._env_proxies = urllib.request.getproxies_environment() if trust_env and proxy is None else {}
        self._lock = threading.Lock()
        self._pools: dict[str | None, urllib3.PoolManager] = {}
        self._expires = 0.0

    def proxy_for(self, url: str) -> str | None:
        """The proxy URL requests to `url` go through, or None for a direct connection."""
        if self._proxy is not None:
            return self._proxy
        parts = urllib.parse.urlsplit(url)
        proxy = self._env_proxies.get(parts.scheme)
        bypass: bool = urllib.request.proxy_bypass_environment(parts.netloc, self._env_proxies)  # type: ignore[attr-defined]
        if proxy is None or bypass:
            return None
        return proxy

    def _pool(self, url: str) -> urllib3.PoolManager:
        proxy = self.proxy_for(url)
        with self._lock:
            now = time.monotonic()
            if now >= self._expires:
                old, self._pools = self._pools, {}
                for pool in old.values():
                    pool.clear()
                self._expires = now + self._max_age_s * random.uniform(0.9, 1.1)
            found = self._pools.get(proxy)
            if found is None:
                kwargs: dict[str, Any] = {"num_pools": 4, "maxsize": self._maxsize, "block": False, "retries": False,
                                          **self._tls}
                found = urllib3.ProxyManager(proxy, **kwargs) if proxy else urllib3.PoolManager(**kwargs)
                self._pools[proxy] = found
            return found

    def send(self, request: Request, timeout: float) -> Response:
        """Send `request`; urllib3 errors become `TransportError` (`refused` when no connection was made)."""
        pool = self._pool(request.url)
        try:
            resp = pool.request(request.method, request.url, body=request.body or None,
                                headers=dict(request.headers), timeout=urllib3.Timeout(total=timeout),
                                redirect=False, preload_content=True)
        except urllib3.exceptions.HTTPError as exc:
            refused = isinstance(exc, urllib3.exceptions.NewConnectionError)
            raise TransportError(f"{request.method} {request.url}: {exc}", refused=refused) from exc
        headers = {k.lower(): v for k, v in resp.headers.items()}
        return Response(resp.status, headers, resp.data or b"")

    def close(self) -> None:
        """Close every pooled connection."""
        with self._lock:
            for pool in self._pools.values():
                pool.clear()
            self._pools = {}


Handler = Callable[[Request], Response]


class MemoryTransport:
    """An in-memory transport for tests: records every request and answers with `handler`.

    The default handler accepts every batch (200 with every event accepted) and answers 404 to anything
    else, such as a registry lookup.
    """

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler: Handler = handler or accept_all
        self.requests: list[Request] = []
        self.closed = False
        self._lock = threading.Lock()

    def send(self, request: Request, timeout: float) -> Response:
        """Record `request` and return the handler's response (or raise what it raises)."""
        with self._lock:
            self.requests.append(request)
        return self.handler(request)

    def close(self) -> None:
        """Mark the transport closed."""
        self.closed = True


def accept_all(request: Request) -> Response:
    """Answer a batch with 200 and every event accepted; anything else with 404."""
    if request.method == "POST" and request.url.endswith("/v1/batch"):
        return Response(200, {"content-type": "application/json"}, b'{"accepted":0,"rejected":[]}')
    return Response(404, {}, b'{"code":"not_found","message":"not found"}')
