"""HTTP: `GET /v1/streams/{stream}` (the subscription, as Server-Sent Events), its CORS preflight, `/livez`,
`/readyz`, `/metrics`; the middleware that answers every refusal as JSON and adds CORS headers."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from subscribe import metrics as m
from subscribe.errors import Forbidden, SubscribeError, error_body
from subscribe.filters import parse_filter
from subscribe.hub import Hub
from subscribe.position import decode, parse_from, topic_tag
from subscribe.start import resolve
from subscribe.streams import parse_stream
from subscribe.subscriber import Subscriber

log = logging.getLogger("subscribe.http")
HUB = web.AppKey("hub", Hub)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PREFLIGHT_HEADERS = "Authorization, Last-Event-ID, Cache-Control"


async def subscribe(request: web.Request) -> web.StreamResponse:
    hub = request.app[HUB]
    cfg = hub.cfg
    key = cfg.keys.authenticate(request.headers.get("Authorization"), request.query.get("access_token"))
    stream = parse_stream(request.match_info["stream"], cfg.topics)
    if not key.allows(stream.name):
        raise Forbidden(f"read key {key.name!r} may not read {stream.name!r}", code="stream_not_allowed")
    filt = parse_filter(request.query.get("filter"))
    start = parse_from(request.query.get("from"), int(time.time() * 1000))
    last_id = request.headers.get("Last-Event-ID") or request.query.get("last_event_id")
    partitions = await hub.partitions(stream.topic)
    resume = decode(topic_tag(stream.topic), last_id, partitions) if last_id else None
    slot = hub.reserve(key.name)
    hub.attach(stream.topic)
    began = time.monotonic()
    try:
        ring = await hub.ring(stream, partitions)
        if resume is not None and len(resume) != ring.partitions:
            resume = decode(ring.tag, last_id or "", ring.partitions)
        cursor, gaps = await resolve(hub, ring, resume, start)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        resp.force_close()
        _limit_send_buffer(request, cfg.sndbuf_bytes)
        await resp.prepare(request)
        outcome = await Subscriber(hub, request, resp, stream, filt).run(cursor, ring, gaps)
        log.info("subscription ended", extra={"fields": {
            "stream": stream.name, "key": key.name, "seconds": round(time.monotonic() - began, 3),
            "records": outcome.records, "bytes": outcome.bytes, "end": outcome.end,
            "caught_up": outcome.caught_up, "filtered": filt is not None}})
        return resp
    finally:
        hub.detach(stream.topic)
        hub.release(slot)


def _limit_send_buffer(request: web.Request, size: int) -> None:
    """Cap the kernel's send buffer of this connection (HEADWATER_SUBSCRIBE_SNDBUF_BYTES; 0: autotuned)."""
    sock = request.transport.get_extra_info("socket") if size and request.transport is not None else None
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


async def preflight(request: web.Request) -> web.Response:
    """CORS preflight of a `fetch` with `Authorization` (EventSource needs none)."""
    return web.Response(status=204, headers={"Access-Control-Allow-Methods": "GET, OPTIONS",
                                             "Access-Control-Allow-Headers": PREFLIGHT_HEADERS,
                                             "Access-Control-Max-Age": "600"})


async def livez(request: web.Request) -> web.Response:
    return web.json_response({"status": "alive"})


async def readyz(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    if hub.closing:
        return web.json_response(error_body("shutting_down", "the instance is shutting down"), status=503)
    try:
        await hub.partitions(hub.cfg.topics.events)
    except SubscribeError as exc:
        if exc.status >= 500:
            return web.json_response(error_body(exc.code, exc.message), status=503)
    return web.json_response({"status": "ready", "subscribers": hub.total, "readers": len(hub.readers)})


async def metrics(request: web.Request) -> web.Response:
    return web.Response(body=generate_latest(m.REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})


def cors_headers(origins: tuple[str, ...], origin: str | None) -> dict[str, str]:
    if not origins or not origin:
        return {}
    if "*" in origins:
        return {"Access-Control-Allow-Origin": "*"}
    if origin.rstrip("/") in origins:
        return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
    return {}


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refusals as `{code, message}` (with Retry-After on 429/503); aiohttp's own 404/405 too."""
    try:
        return await handler(request)
    except SubscribeError as exc:
        m.REFUSED.labels(exc.code).inc()
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
        return web.json_response(error_body(exc.code, exc.message), status=exc.status, headers=headers)
    except web.HTTPException as exc:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status, "bad_request")
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else {}
        return web.json_response(error_body(code, exc.reason), status=exc.status, headers=headers)


async def add_cors(request: web.Request, resp: web.StreamResponse) -> None:
    """on_response_prepare: every answer (streams before their first byte, errors too) gets the CORS headers."""
    resp.headers.update(cors_headers(request.app[HUB].cfg.cors_origins, request.headers.get("Origin")))
