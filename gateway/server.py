"""Runs one worker process: the app on a SO_REUSEPORT socket until SIGTERM/SIGINT, then a graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from aiohttp import web

from gateway.app import build_app
from gateway.config import GatewayConfig
from gateway.http_errors import GatewayRunner

log = logging.getLogger("gateway.server")


def make_runner(app: web.Application, cfg: GatewayConfig) -> web.AppRunner:
    """aiohttp runner settings: our own decompression, idle timeout (also bounds slow headers), drain deadline."""
    return GatewayRunner(  # aiohttp's own error answers (bad HTTP) as JSON, without the request in the log
        app,
        auto_decompress=False,            # gateway.body decompresses, after auth, with caps
        keepalive_timeout=cfg.idle_timeout_s,
        shutdown_timeout=cfg.shutdown_timeout_s,
        handle_signals=False,
        access_log=None,
        lingering_time=1.0,
    )


async def _watch_parent(parent: int, stop: asyncio.Event) -> None:
    """A worker whose supervisor died (kill -9 of the supervisor alone) shuts itself down."""
    while not stop.is_set():
        await asyncio.sleep(1.0)
        if os.getppid() != parent:
            log.warning("supervisor gone; shutting down")
            stop.set()


async def serve(cfg: GatewayConfig, worker: int, supervised: bool = False) -> None:
    app = build_app(cfg, worker)
    runner = make_runner(app, cfg)
    await runner.setup()  # cleanup contexts: schemas loaded, producer initialised, before we listen
    site = web.TCPSite(runner, cfg.host, cfg.port, reuse_port=True, backlog=1024)
    await site.start()
    log.info("listening", extra={"fields": {"host": cfg.host, "port": cfg.port}})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watcher = asyncio.create_task(_watch_parent(os.getppid(), stop)) if supervised else None
    await stop.wait()
    if watcher is not None:
        watcher.cancel()
    log.info("shutting down", extra={"fields": {"deadline_s": cfg.shutdown_timeout_s}})
    await runner.cleanup()
    log.info("stopped")


def run_worker(cfg: GatewayConfig, worker: int, supervised: bool = False) -> None:
    asyncio.run(serve(cfg, worker, supervised))
