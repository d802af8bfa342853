"""Runs one worker process: the app on a SO_REUSEPORT socket (HTTP or HTTPS) and on the proxy's unix socket when
configured, until SIGTERM/SIGINT, then a graceful shutdown; SIGHUP reloads the TLS certificate files."""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import os
import signal
import socket
import ssl
import threading
from pathlib import Path

from aiohttp import web

from gateway.app import build_app
from gateway.config import GatewayConfig
from gateway.http_errors import GatewayRunner
from gateway.loop import loop_name, run
from gateway.proxy_socket import bind_proxy_socket

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


def sites(runner: web.AppRunner, cfg: GatewayConfig, tls: ssl.SSLContext | None,
          proxy: socket.socket | None) -> list[web.BaseSite]:
    """host:port (HTTPS when `tls`), and the proxy's unix socket when given."""
    found: list[web.BaseSite] = [web.TCPSite(runner, cfg.host, cfg.port, reuse_port=True, backlog=1024,
                                             ssl_context=tls)]
    if proxy is not None:
        found.append(web.SockSite(runner, proxy))
    return found


def _reload_tls(cfg: GatewayConfig, ctx: ssl.SSLContext) -> None:
    assert cfg.tls is not None
    try:
        cfg.tls.reload(ctx)
        log.info("reloaded the TLS certificate")
    except (OSError, ssl.SSLError) as exc:  # keep serving with the previous certificate
        log.error("TLS certificate reload failed; still serving the previous one",
                  extra={"fields": {"error": str(exc)}})


async def serve(cfg: GatewayConfig, worker: int, supervisor: int | None = None, proxy_fd: int | None = None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Watched from the start: a worker orphaned while it starts (waiting for the registry or the broker) exits too.
    # The supervisor's pid comes from the command line: one that died before this worker got here is noticed too.
    watcher = asyncio.create_task(_watch_parent(supervisor, stop)) if supervisor is not None else None
    app = build_app(cfg, worker)
    runner = make_runner(app, cfg)
    # Cleanup contexts: schemas loaded, producer initialised, before we listen.
    setup = asyncio.create_task(runner.setup())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({setup, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not setup.done():
        setup.cancel()
        log.warning("stopped before serving")
        return
    tls = cfg.tls.context() if cfg.tls else None
    if tls is not None:
        loop.add_signal_handler(signal.SIGHUP, _reload_tls, cfg, tls)
    proxy = None
    if cfg.proxy_socket:  # the supervisor's socket, or (one process alone) our own
        proxy = socket.socket(fileno=proxy_fd) if proxy_fd is not None else bind_proxy_socket(cfg.proxy_socket)
    for site in sites(runner, cfg, tls, proxy):
        await site.start()
    # What start-up made (modules, the app, parsed schemas) lives as long as the worker: out of the collector's
    # reach, so that a full collection walks only what serving made (each one pauses every request in flight).
    gc.collect()
    gc.freeze()
    log.info("listening", extra={"fields": {"host": cfg.host, "port": cfg.port, "https": tls is not None,
                                            "proxy_socket": cfg.proxy_socket or None}})
    await stopping
    if watcher is not None:
        watcher.cancel()
    # Nobody may be left to kill a worker that misses its deadline (its supervisor is gone): it does it itself.
    deadline = threading.Timer(cfg.shutdown_timeout_s + 10.0, _exit_late)
    deadline.daemon = True
    deadline.start()
    log.info("shutting down", extra={"fields": {"deadline_s": cfg.shutdown_timeout_s}})
    await runner.cleanup()
    if cfg.proxy_socket and proxy_fd is None:
        Path(cfg.proxy_socket).unlink(missing_ok=True)
    log.info("stopped")


def _exit_late() -> None:
    log.error("shutdown missed its deadline; exiting now")
    faulthandler.dump_traceback()
    os._exit(1)


def run_worker(cfg: GatewayConfig, worker: int, supervisor: int | None = None, proxy_fd: int | None = None) -> None:
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>`: every thread's stack on stderr
    log.info("event loop", extra={"fields": {"loop": loop_name(cfg.uvloop)}})
    run(serve(cfg, worker, supervisor, proxy_fd), cfg.uvloop)
