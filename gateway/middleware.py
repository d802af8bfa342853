"""Middlewares: map every error to its JSON answer in one place, recycle connections, log and count requests."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway import metrics as m
from gateway.connections import ConnectionRecycler
from gateway.errors import GatewayError, error_body
from gateway.handlers import BATCH_ID, SOURCE

log = logging.getLogger("gateway.http")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(exc: GatewayError) -> web.Response:
    """The one mapping from a GatewayError to an HTTP answer (status, JSON body, Retry-After)."""
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return web.json_response(error_body(exc.code, exc.message), status=exc.status, headers=headers)


def make_middlewares(recycler: ConnectionRecycler) -> list[Callable[..., Awaitable[web.StreamResponse]]]:
    @web.middleware
    async def errors_and_logs(request: web.Request, handler: Handler) -> web.StreamResponse:
        t0 = time.perf_counter()
        code = "ok"
        try:
            resp = await handler(request)
        except GatewayError as exc:
            code = exc.code
            resp = error_response(exc)
        except web.HTTPException as exc:  # routing: 404, 405 (with its Allow header)
            code = exc.reason.lower().replace(" ", "_")
            kept = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
            resp = web.json_response(error_body(code, exc.reason), status=exc.status, headers=kept or None)
        except Exception as exc:
            log.error("unhandled error", exc_info=True, extra={"fields": {"path": request.path[:200]}})
            code = "internal_error"
            resp = web.json_response(error_body(code, f"internal error: {type(exc).__name__}"), status=500)
        elapsed = time.perf_counter() - t0
        if request.path == "/v1/batch":
            m.REQUEST_SECONDS.observe(elapsed)
            if resp.status >= 400 and resp.status != 422:
                # The body may not have been read: this connection cannot carry another request safely. A 499
                # (client gone mid-body) is never delivered: its request line is its one log line.
                resp.force_close()
            log.info("request", extra={"fields": {
                "path": request.path, "status": resp.status, "code": code, "ms": round(elapsed * 1000, 2),
                "batch_id": request.get(BATCH_ID), "source": request.get(SOURCE), "remote": request.remote}})
        m.REQUESTS.labels(request.path if request.match_info.route.resource else "other", str(resp.status),
                          code).inc()
        if recycler.should_close(request.protocol):  # one protocol object per connection, TLS or not
            resp.force_close()
        return resp

    return [errors_and_logs]
