"""The console's live panel: `/api/live/{stream}` relays one stream of the subscription server to the page.

The page's `EventSource` connects here, to the console's own origin (its Content-Security-Policy allows nothing
else), and never holds a key: the console adds its read key (HEADWATER_CONSOLE_READ_KEY, else the stack's
HEADWATER_READ_KEY) upstream. The browser's `Last-Event-ID` and `from=` are passed on, so the page resumes like any
subscriber; at most MAX_RELAYS streams are relayed at once (the console is a loopback tool for a few people).

When the stream cannot be relayed (no such rule yet, the server down, no key configured) the page still gets an
event stream: one `unavailable` message with the reason and `retry: 10000`, so that the browser tries again every
10 s and the panel starts by itself once the rule is applied (an error status would stop `EventSource` for good).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from console.config import ConsoleConfig

STREAM = re.compile(r"(event|rule)\.[a-z][a-z0-9_]{0,62}|deadletter|aggregates")
MAX_RELAYS = 8
RETRY_MS = 10_000
SESSION = web.AppKey("live_session", aiohttp.ClientSession)
ACTIVE = web.AppKey("live_active", dict[str, int])
CFG = web.AppKey("live_cfg", ConsoleConfig)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message}, status=status)


def _unavailable(code: str, message: str) -> web.Response:
    data = json.dumps({"code": code, "message": message}, separators=(",", ":"))
    return web.Response(body=f"retry: {RETRY_MS}\nevent: unavailable\ndata: {data}\n\n".encode(),
                        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store"})


async def relay(request: web.Request) -> web.StreamResponse:
    cfg = request.app[CFG]
    stream = request.match_info["stream"]
    if not cfg.subscribe_url or not cfg.read_key:
        return _unavailable("live_unavailable", "no subscription server configured (SUBSCRIBE_URL and a read key)")
    if not STREAM.fullmatch(stream):
        return _error(400, "invalid_stream", "not event.<type>, rule.<name>, deadletter or aggregates")
    active = request.app[ACTIVE]
    if active["n"] >= MAX_RELAYS:
        return _unavailable("too_many_relays", f"the console relays at most {MAX_RELAYS} streams at once")
    headers = {"Authorization": f"Bearer {cfg.read_key}", "Accept": "text/event-stream"}
    if request.headers.get("Last-Event-ID"):
        headers["Last-Event-ID"] = request.headers["Last-Event-ID"][:8192]
    params = {k: v for k, v in request.query.items() if k in ("from", "filter")}
    active["n"] += 1
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store"})
    try:
        async with request.app[SESSION].get(f"{cfg.subscribe_url}/v1/streams/{stream}", headers=headers,
                                            params=params) as up:
            if up.status != 200:
                try:
                    answer = json.loads(await up.read())
                    code, message = str(answer["code"]), str(answer["message"])
                except (ValueError, KeyError, TypeError):
                    code, message = "http_error", f"HTTP {up.status}"
                return _unavailable(code, message)
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
    except (aiohttp.ClientError, TimeoutError) as exc:
        if not resp.prepared:
            return _unavailable("subscribe_unreachable", f"the subscription server did not answer: "
                                                         f"{type(exc).__name__}")
    except ConnectionError:  # the page went away
        pass
    finally:
        active["n"] -= 1
    # A stream that ends (the server cut it off, restarted, or the page left): the browser reconnects with its
    # Last-Event-ID after the server's `retry`.
    return resp


async def _session(app: web.Application) -> AsyncIterator[None]:
    app[SESSION] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=90))
    app[ACTIVE] = {"n": 0}
    yield
    await app[SESSION].close()


def install(app: web.Application, cfg: ConsoleConfig) -> None:
    """The hook: the route and its client session (console/app.py calls this once)."""
    app[CFG] = cfg
    app.router.add_get("/api/live/{stream}", relay)
    app.cleanup_ctx.append(_session)
