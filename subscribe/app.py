"""Builds the aiohttp application: routes, middleware, and the hub (readers, pools, ticker) in a cleanup context."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from subscribe import handlers
from subscribe.config import SubscribeConfig
from subscribe.decode import SchemaSource
from subscribe.handlers import HUB
from subscribe.hub import Hub
from subscribe.schemas import RegistrySchemas


def build_app(cfg: SubscribeConfig, schemas: SchemaSource | None = None) -> web.Application:
    app = web.Application(middlewares=[handlers.errors_middleware], client_max_size=1024)
    app[HUB] = Hub(cfg, schemas or RegistrySchemas(cfg.registry_url, access=cfg.registry_access))
    app.router.add_get("/v1/streams/{stream}", handlers.subscribe, allow_head=False)
    app.router.add_route("OPTIONS", "/v1/streams/{stream}", handlers.preflight)
    app.router.add_get("/livez", handlers.livez, allow_head=False)
    app.router.add_get("/readyz", handlers.readyz, allow_head=False)
    app.router.add_get("/metrics", handlers.metrics, allow_head=False)
    app.on_response_prepare.append(handlers.add_cors)
    app.on_shutdown.append(_closing)
    app.cleanup_ctx.append(_hub_ctx)
    return app


async def _hub_ctx(app: web.Application) -> AsyncIterator[None]:
    hub = app[HUB]
    ticker = asyncio.create_task(hub.run_ticker())
    yield
    ticker.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await ticker
    await hub.close()


async def _closing(app: web.Application) -> None:
    """On shutdown: refuse new subscriptions and end every stream (clients reconnect elsewhere)."""
    hub = app[HUB]
    hub.closing = True
    hub.wake_all()
