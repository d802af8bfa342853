"""Who may call what: cross-site requests and non-JSON bodies refused, HTTP basic credentials checked against the
users file, and each route's required role (read < write < admin) enforced before any handler runs.

| request | role needed |
| --- | --- |
| `GET /`, `GET /ready` | none |
| other `GET`s, `POST /subjects/{s}` (lookup), `POST /compatibility/...` | `read`, or none when reads are open |
| `POST /subjects/{s}/versions` (register) | `write` |
| `PUT /config/{s}` of a subject with no version yet (its level, set before its first registration) | `write` |
| other `PUT`s and `DELETE`s (config, deletions) | `admin` |
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware

from common.basic_auth import FailureLimiter, Users, parse_authorization
from registry.errors import RegistryError

log = logging.getLogger(__name__)
ROLES = ("read", "write", "admin")
RANK = {role: i for i, role in enumerate(ROLES)}
BODY_TYPES = frozenset({"application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                        "application/json"})
OPEN_PATHS = frozenset({"/", "/ready"})
USER: web.RequestKey[str] = web.RequestKey("registry_user", str)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Unauthenticated(RegistryError):
    status, code = 401, 401

    @property
    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": 'Basic realm="headwater-registry", charset="UTF-8"'}


class Forbidden(RegistryError):
    status, code = 403, 40301


class CrossSiteRefused(RegistryError):
    status, code = 403, 40302


class UnsupportedMediaType(RegistryError):
    status, code = 415, 415


class TooManyFailures(RegistryError):
    status, code = 429, 42901

    def __init__(self, wait_s: float) -> None:
        super().__init__(f"too many failed logins from this address; retry in {wait_s:.0f} s")
        self.wait_s = wait_s

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, round(self.wait_s)))}


@dataclass(frozen=True)
class AccessPolicy:
    """The registry's access settings (registry/config.py reads them)."""

    users_file: str = ""              # empty: no authentication (allowed on loopback only)
    reads_open: bool = True
    allowed_origins: frozenset[str] = frozenset()  # browser origins allowed to write (none by default)


def required_role(method: str, path: str, canonical: str, reads_open: bool) -> str | None:
    """The role a request needs, or None when anyone may make it."""
    if method == hdrs.METH_OPTIONS:
        return None  # no route answers it (405), and no answer carries CORS headers: browsers refuse preflights
    if method in (hdrs.METH_GET, hdrs.METH_HEAD):
        return None if reads_open or path in OPEN_PATHS else "read"
    if method == hdrs.METH_POST:
        if canonical == "/subjects/{subject}/versions":
            return "write"
        return None if reads_open else "read"  # lookup and compatibility checks only read
    return "admin"


def cross_site(request: web.Request, allowed: frozenset[str]) -> str | None:
    """Why a state-changing request looks like it comes from another site's page, or None."""
    origin = request.headers.get(hdrs.ORIGIN)
    if origin is not None and origin not in allowed:
        return f"Origin {origin[:100]!r} is not allowed"
    if origin is None and request.headers.get("Sec-Fetch-Site", "") in ("cross-site", "same-site"):
        return "cross-site request"
    return None


def lowered_for_new_subject(method: str, canonical: str, needed: str | None, subject: str,
                            has_versions: Callable[[str], bool]) -> str | None:
    """A writer may set the level of a subject it is about to create; changing an existing one's stays admin's."""
    if (needed == "admin" and method == hdrs.METH_PUT and canonical == "/config/{subject}"
            and not has_versions(subject)):
        return "write"
    return needed


def make_access_middleware(policy: AccessPolicy, has_versions: Callable[[str], bool] = lambda _s: True) -> Middleware:
    users = Users(Path(policy.users_file), frozenset(ROLES)) if policy.users_file else None
    limiter = FailureLimiter()

    async def authenticate(request: web.Request) -> str | None:
        """The role of the request's credentials; None without credentials; raises on wrong ones."""
        assert users is not None
        header = request.headers.get(hdrs.AUTHORIZATION)
        if header is None:
            return None
        creds = parse_authorization(header)
        source = request.remote or ""
        if creds is None:
            raise Unauthenticated("Authorization header is not HTTP basic user:password")
        role = users.cached(*creds)
        if role is None:
            wait = limiter.blocked(source)
            if wait > 0:
                raise TooManyFailures(wait)
            # The slow hash runs off the event loop: other clients are not held up by one login.
            role = await asyncio.get_running_loop().run_in_executor(None, users.check, *creds)
            if role is None:
                limiter.failed(source)
                log.warning("login failed", extra={"user": creds[0][:64], "remote": source})
                raise Unauthenticated("Unauthorized: wrong user or password")
        request[USER] = creds[0]
        return role

    @web.middleware
    async def access(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in (hdrs.METH_GET, hdrs.METH_HEAD, hdrs.METH_OPTIONS):
            why = cross_site(request, policy.allowed_origins)
            if why is not None:
                raise CrossSiteRefused(f"{why}: the registry does not take writes from web pages")
        if request.method in (hdrs.METH_POST, hdrs.METH_PUT) and request.content_type not in BODY_TYPES:
            raise UnsupportedMediaType(f"Content-Type {request.content_type[:100]!r} is not accepted: send "
                                       "application/vnd.schemaregistry.v1+json or application/json")
        if users is None:
            return await handler(request)
        resource = request.match_info.route.resource
        canonical = resource.canonical if resource else ""
        needed = required_role(request.method, request.path, canonical, policy.reads_open)
        needed = lowered_for_new_subject(request.method, canonical, needed, request.match_info.get("subject", ""),
                                         has_versions)
        role = await authenticate(request) if needed is not None or hdrs.AUTHORIZATION in request.headers else None
        if needed is not None and role is None:
            raise Unauthenticated("Unauthorized: this request needs credentials (HTTP basic)")
        if needed is not None and role is not None and RANK[role] < RANK[needed]:
            raise Forbidden(f"User {request[USER]!r} is denied this operation: it needs the {needed} role")
        return await handler(request)

    return access
