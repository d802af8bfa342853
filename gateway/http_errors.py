"""aiohttp's own error answers (requests its HTTP parser refuses, handler timeouts) as the gateway's JSON error,
logged as one short line that never quotes the request, at a bounded rate.

aiohttp answers a malformed request itself, before any middleware runs: a plain-text 400 echoing the offending
header line (up to 16 KB) and an ERROR log line with the same text and a traceback, so that a client sending
`Authorization : Bearer <key>` or a bare-LF request wrote its key into the log. `GatewayRunner` makes the
server use `JsonErrorHandler` instead, which answers `{code, message}` like every other error and logs the
status, the exception's class and the peer address only.
"""

from __future__ import annotations

import logging
import time
from http import HTTPStatus

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from gateway import metrics as m
from gateway.errors import error_body

log = logging.getLogger("gateway.http")
_CODES = {400: "invalid_http", 413: "payload_too_large", 431: "headers_too_large", 500: "internal_error",
          504: "handler_timeout"}


class LogBudget:
    """At most `rate` lines a second (burst `burst`); the next line admitted says how many were dropped."""

    def __init__(self, rate: float = 5.0, burst: float = 20.0) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.last = time.monotonic()
        self.dropped = 0

    def admit(self, now: float | None = None) -> int | None:
        """None: drop this line; otherwise the number of lines dropped since the last one admitted."""
        now = time.monotonic() if now is None else now
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens < 1:
            self.dropped += 1
            return None
        self.tokens -= 1
        dropped, self.dropped = self.dropped, 0
        return dropped


BUDGET = LogBudget()


def parser_error_response(status: int, exc: BaseException | None) -> web.Response:
    """The JSON answer for an error aiohttp handles itself: a fixed message, never the request's bytes."""
    code = _CODES.get(status, "invalid_http")
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    what = "malformed HTTP request" if status < 500 else phrase.lower()
    resp = web.json_response(error_body(code, f"{what} ({type(exc).__name__ if exc else phrase})"), status=status)
    resp.force_close()
    return resp


class JsonErrorHandler(RequestHandler):
    """aiohttp's connection handler with `handle_error` answering JSON and logging one bounded line.

    Unlike its base class it can be weakly referenced (no `__slots__`): the connection recycler keys its
    per-connection counts by it."""

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        dropped = BUDGET.admit()
        if dropped is not None:
            log.log(logging.ERROR if status >= 500 else logging.WARNING, "http error answered by the server",
                    extra={"fields": {"status": status, "error": type(exc).__name__ if exc else None,
                                      "remote": request.remote, "suppressed": dropped}})
        m.REQUESTS.labels("other", str(status), _CODES.get(status, "invalid_http")).inc()
        if request.writer.output_size > 0:  # part of an answer is out: the connection cannot carry another
            raise ConnectionError("response already started; cannot send an error answer")
        return parser_error_response(status, exc)


class _JsonErrorServer(Server):
    def __call__(self) -> RequestHandler:
        return JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class GatewayRunner(web.AppRunner):
    """`web.AppRunner` whose connections answer aiohttp's own errors with `JsonErrorHandler`."""

    async def _make_server(self) -> Server:
        server = await super()._make_server()
        # Server only builds handlers; this subclass changes which class, and holds no state of its own.
        server.__class__ = _JsonErrorServer
        return server
