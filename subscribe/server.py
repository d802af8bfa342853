"""Runs the server until SIGTERM/SIGINT: aiohttp's own error answers as JSON, a header timeout, graceful stop.

aiohttp answers a request its parser refuses (an over-long `Last-Event-ID` or other header, a malformed line)
itself, in plain text echoing the request, and logs the line: a read key in a header would reach the log.
`JsonRunner` makes it answer `{code, message}` like every other error and log only the status and class.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from subscribe.app import build_app
from subscribe.config import SubscribeConfig
from subscribe.errors import error_body

log = logging.getLogger("subscribe.server")
_CODES = {400: "invalid_http", 413: "payload_too_large", 431: "headers_too_large"}


class JsonErrorHandler(RequestHandler):
    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        code = _CODES.get(status, "internal_error")
        # A 500 is ours (a bug): its traceback helps and holds no request bytes. Parser errors quote the request.
        log.warning("http error answered by the server", exc_info=exc if status >= 500 else None,
                    extra={"fields": {"status": status, "error": type(exc).__name__ if exc else None}})
        if request.writer.output_size > 0:
            raise ConnectionError("response already started; cannot send an error answer")
        resp = web.json_response(error_body(code, f"malformed HTTP request ({type(exc).__name__ if exc else status})"),
                                 status=status)
        resp.force_close()
        return resp


class _JsonErrorServer(Server):
    def __call__(self) -> RequestHandler:
        return JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class JsonRunner(web.AppRunner):
    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = _JsonErrorServer  # only which handler class it builds changes
        return server


async def serve(cfg: SubscribeConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = JsonRunner(build_app(cfg), keepalive_timeout=cfg.header_timeout_s, shutdown_timeout=cfg.shutdown_timeout_s,
                        handle_signals=False, access_log=None, auto_decompress=False)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, backlog=1024)
    await site.start()
    # What start-up made (modules, the app) lives as long as the process: moved out of the collector's reach, so
    # that a full collection walks only what serving made (shorter pauses of the event loop and the readers).
    gc.collect()
    gc.freeze()
    log.info("listening", extra={"fields": {"host": cfg.host, "port": cfg.port}})
    print(f"subscriptions on http://{cfg.host}:{cfg.port}/v1/streams/<stream>", flush=True)
    await stop.wait()
    log.info("shutting down", extra={"fields": {"deadline_s": cfg.shutdown_timeout_s}})
    await runner.cleanup()
    log.info("stopped")
