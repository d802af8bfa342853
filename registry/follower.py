"""A follower registry's writes, forwarded to the primary registry over HTTP and answered with the primary's answer.

A follower (REGISTRY_PRIMARY_URL set) serves reads from its own replay of the primary's topic as mirrored into
its region, and never writes to Kafka. Each write request (registration, deletions, compatibility settings) is sent
once to the primary, with the caller's Authorization, Content-Type and Accept headers unchanged, over one pooled
aiohttp session whose every request is bounded by REGISTRY_FORWARD_TIMEOUT_S; an https primary's certificate is
verified (REGISTRY_PRIMARY_CA or the system store). What the primary answers (status, body, WWW-Authenticate,
Retry-After) is what the caller gets. When the primary cannot be reached the answer is 503 with error code 50301
(PrimaryUnavailable); a write arriving already forwarded means the primary URL names a follower: 503, 50302.

Only a stale pooled connection closed under the request is retried, and only for the idempotent writes
(registration and PUT of a level); a deletion is never sent twice. Headers are never logged.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import hdrs

from common.tls import client_context
from registry.config import FollowerConfig
from registry.errors import PrimaryUnavailable

log = logging.getLogger(__name__)
FORWARDED_BY = "X-Headwater-Forwarded-By"  # marks a forwarded write; a follower refuses one (a forwarding loop)
PASSED_HEADERS = (hdrs.AUTHORIZATION, hdrs.CONTENT_TYPE, hdrs.ACCEPT)
ANSWER_HEADERS = (hdrs.WWW_AUTHENTICATE, hdrs.RETRY_AFTER)
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # the registry's own request cap: no registry answer to a write is larger
POOL_SIZE = 16  # connections to the primary at most; further writes wait for one (within their timeout)
JSON_TYPES = ("application/json", "application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json")


@dataclass(frozen=True)
class Answer:
    """The primary's answer to a forwarded write."""

    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


class Forwarder:
    """The follower's pooled HTTP client to its primary; open it with `start()` inside the event loop."""

    def __init__(self, cfg: FollowerConfig) -> None:
        self.cfg = cfg
        self.primary_url = cfg.primary_url.rstrip("/")  # request paths start with "/"
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        ssl_context = client_context(self.cfg.primary_ca) if self.cfg.primary_url.startswith("https://") else None
        connector = aiohttp.TCPConnector(limit=POOL_SIZE, ssl=ssl_context if ssl_context is not None else True)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True,
                                              headers={hdrs.USER_AGENT: "headwater-registry-follower"})

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def forward(self, method: str, path_qs: str, body: bytes, headers: Mapping[str, str], *,
                      idempotent: bool) -> Answer:
        """Send one write to the primary and return its answer; PrimaryUnavailable when there is none."""
        assert self._session is not None, "start() first"
        sent = {str(name): headers[name] for name in PASSED_HEADERS if name in headers}
        sent[FORWARDED_BY] = "follower"
        started = time.monotonic()
        deadline = started + self.cfg.forward_timeout_s
        retries = 1 if idempotent else 0
        while True:
            try:
                answer = await self._send(method, path_qs, body, sent, max(0.01, deadline - time.monotonic()))
            except aiohttp.ServerDisconnectedError as exc:
                if retries and time.monotonic() < deadline:
                    retries -= 1
                    # Closed without an answer (a stale pooled connection, a primary restarting): sending an
                    # idempotent write again is safe even if the primary had carried it out.
                    continue
                raise self._unavailable(f"it closed the connection: {exc}") from None
            except TimeoutError:
                raise self._unavailable(f"no answer within {self.cfg.forward_timeout_s:g} s") from None
            except aiohttp.ClientConnectorCertificateError as exc:
                raise self._unavailable(f"its certificate was not accepted: {exc.certificate_error}") from None
            except aiohttp.ClientError as exc:
                raise self._unavailable(f"{type(exc).__name__}: {exc}") from None
            log.info("forwarded to the primary", extra={"method": method, "path": path_qs, "status": answer.status,
                                                        "ms": round((time.monotonic() - started) * 1000, 1)})
            return answer

    async def _send(self, method: str, path_qs: str, body: bytes, headers: dict[str, str],
                    timeout_s: float) -> Answer:
        assert self._session is not None
        async with self._session.request(method, self.primary_url + path_qs, data=body or None,
                                         headers=headers, allow_redirects=False,
                                         timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            data = await resp.content.read(MAX_ANSWER_BYTES + 1)
            if len(data) > MAX_ANSWER_BYTES:
                raise self._unavailable(f"it answered HTTP {resp.status} with more than {MAX_ANSWER_BYTES} bytes")
            if resp.content_type not in JSON_TYPES:
                raise self._unavailable(f"it answered HTTP {resp.status} with {resp.content_type!r}, not a registry "
                                        "answer (is REGISTRY_PRIMARY_URL the registry itself?)")
            kept = {str(name): resp.headers[name] for name in ANSWER_HEADERS if name in resp.headers}
            return Answer(resp.status, data, resp.headers.get(hdrs.CONTENT_TYPE, resp.content_type), kept)

    def _unavailable(self, reason: str) -> PrimaryUnavailable:
        log.warning("the primary registry cannot be reached: write refused",
                    extra={"primary": self.primary_url, "reason": reason})
        return PrimaryUnavailable(
            f"the primary registry at {self.primary_url} cannot be reached ({reason}); this registry is a "
            "read-only follower: registering schemas and changing or deleting them needs the primary region. "
            "Reads are still answered here.")
