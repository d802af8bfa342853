"""Who may see the console: beyond loopback, HTTP basic credentials from a users file (common/basic_auth.py) on
every path but `/healthz`, failed logins throttled per source address; and the TLS the console serves and trusts."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware

from common.basic_auth import FailureLimiter, Users, parse_authorization
from common.tls import client_context
from console.config import ConsoleConfig

log = logging.getLogger("console.auth")
ROLES = frozenset({"view"})
OPEN_PATHS = frozenset({"/healthz"})
REALM = 'Basic realm="headwater-console", charset="UTF-8"'
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


def auth_middleware(users_file: str) -> Middleware:
    """Every request but OPEN_PATHS needs a user of the file (role `view`)."""
    users = Users(Path(users_file), ROLES)
    limiter = FailureLimiter()

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        creds = parse_authorization(request.headers.get(hdrs.AUTHORIZATION, ""))
        if creds is None:
            return _refuse(401, "authentication required", {"WWW-Authenticate": REALM})
        if users.cached(*creds) is None:
            source = request.remote or ""
            wait = limiter.blocked(source)
            if wait > 0:
                return _refuse(429, "too many failed logins", {"Retry-After": str(max(1, round(wait)))})
            if await asyncio.get_running_loop().run_in_executor(None, users.check, *creds) is None:
                limiter.failed(source)
                log.warning("login failed (user %r from %s)", creds[0][:64], source)
                return _refuse(401, "wrong user or password", {"WWW-Authenticate": REALM})
        return await handler(request)

    return authenticate


def outgoing_tls(cfg: ConsoleConfig) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The contexts the console checks https gateways and the https registry with (CA bundle or system store)."""
    return client_context(cfg.ca_bundle), client_context(cfg.registry_access.ca_file)
