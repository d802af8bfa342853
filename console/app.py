"""The console's aiohttp application: the static page, `/api/snapshot` (JSON), `/metrics` (derived gauges for
alerting) and `/healthz`; a background task samples the stack every `poll_s` seconds. Read-only: nothing here
writes to Kafka, the registry or the gateways."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest

from console import live
from console.auth import auth_middleware, outgoing_tls
from console.config import ConsoleConfig
from console.kafka_view import KafkaFigures, KafkaView
from console.pipeline_files import (
    LossAudit,
    checkpoint_offsets,
    lag,
    last_batch_at,
    pipeline_health,
    read_loss_audit,
)
from console.prom import GatewaySample, parse
from console.sampler import Sampler

log = logging.getLogger("console")
STATIC = Path(__file__).resolve().parent / "static"
AUDIT_EVERY_S = 10.0


class Exported:
    """The gauges `/metrics` serves (ops/alerts.yml alerts on them); computed from what the console reads."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.lag = Gauge("headwater_pipeline_lag_records", "events topic records the live query has not read",
                         registry=self.registry)
        self.missing = Gauge("headwater_loss_audit_still_missing_events",
                             "events the loss audit reported missing and that did not arrive late",
                             registry=self.registry)
        self.gap_producers = Gauge("headwater_loss_audit_open_gap_producers", "producers with events still missing",
                                   registry=self.registry)
        self.deadletters = Gauge("headwater_deadletter_records", "records in the dead-letter topic by reason",
                                 ["reason"], registry=self.registry)


@dataclass
class Console:
    cfg: ConsoleConfig
    kafka: KafkaView
    sampler: Sampler = field(default_factory=Sampler)
    figures: KafkaFigures = field(default_factory=KafkaFigures)
    audit: LossAudit = field(default_factory=LossAudit)
    health: dict[str, Any] = field(default_factory=dict)
    exported: Exported = field(default_factory=Exported)
    audit_at: float = 0.0
    tls: tuple[ssl.SSLContext, ssl.SSLContext] = field(init=False)  # checks https gateways, https registry

    def __post_init__(self) -> None:
        self.tls = outgoing_tls(self.cfg)

    async def sample(self, http: aiohttp.ClientSession) -> None:
        loop = asyncio.get_running_loop()
        gateway, gw_health = await self._gateways(http)
        self.figures = await loop.run_in_executor(None, self.kafka.poll)
        committed = await loop.run_in_executor(None, checkpoint_offsets, self.cfg.pipeline_dir, self.cfg.events_topic)
        if time.monotonic() - self.audit_at >= AUDIT_EVERY_S:
            self.audit = await loop.run_in_executor(None, read_loss_audit, self.cfg.pipeline_dir)
            self.audit_at = time.monotonic()
        batch_at = await loop.run_in_executor(None, last_batch_at, self.cfg.pipeline_dir)
        pipeline_lag = lag(self.figures.events_end, committed)
        now = time.time()
        self.sampler.add(now, gateway, self.figures, pipeline_lag)
        self.health = {"gateways": gw_health, "registry": await self._registry(http),
                       "kafka": self.figures.error or "ok",
                       "pipeline": pipeline_health(committed, pipeline_lag,
                                                   None if batch_at is None else max(0.0, now - batch_at))}
        self._export(pipeline_lag)

    async def _gateways(self, http: aiohttp.ClientSession) -> tuple[GatewaySample | None, dict[str, str]]:
        sample: GatewaySample | None = None
        health: dict[str, str] = {}
        for url in self.cfg.gateways:
            try:
                async with http.get(url + "/metrics", ssl=self.tls[0]) as resp:
                    text = await resp.text()
                    if resp.status != 200:
                        raise RuntimeError(f"HTTP {resp.status}")
                sample = parse(text, sample)
                health[url] = "ok"
            except Exception as exc:
                health[url] = f"{type(exc).__name__}: {exc}"
        return sample, health

    async def _registry(self, http: aiohttp.ClientSession) -> str:
        try:
            async with http.get(self.cfg.registry_url + "/ready", ssl=self.tls[1]) as resp:
                return "ok" if resp.status == 200 else f"HTTP {resp.status}"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"

    def _export(self, pipeline_lag: int | None) -> None:
        e = self.exported
        if pipeline_lag is not None:
            e.lag.set(pipeline_lag)
        e.missing.set(self.audit.still_missing)
        e.gap_producers.set(sum(1 for p in self.audit.producers if p["still_missing"] > 0))
        e.deadletters.clear()
        for reason, count in self.figures.deadletters_by_reason.items():  # bounded: kafka_view.MAX_REASONS
            e.deadletters.labels(reason).set(count)


CONSOLE = web.AppKey("console", Console)


async def _sampling(app: web.Application) -> AsyncIterator[None]:
    console = app[CONSOLE]

    async def loop() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            while True:
                t0 = time.monotonic()
                try:
                    await console.sample(http)
                except Exception:
                    log.exception("sampling failed")
                await asyncio.sleep(max(0.1, console.cfg.poll_s - (time.monotonic() - t0)))

    task = asyncio.create_task(loop())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await asyncio.get_running_loop().run_in_executor(None, console.kafka.close)


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def snapshot(request: web.Request) -> web.Response:
    c = request.app[CONSOLE]
    return web.json_response(c.sampler.snapshot(c.figures, c.audit, c.health))


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[CONSOLE].exported.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "alive", "samples": request.app[CONSOLE].sampler.samples})


@web.middleware
async def security_headers(request: web.Request, handler: Any) -> web.StreamResponse:
    """No third-party anything: the page loads only its own files."""
    resp: web.StreamResponse = await handler(request)
    resp.headers["Content-Security-Policy"] = "default-src 'self'; img-src 'self' data:"
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def make_app(cfg: ConsoleConfig, kafka: KafkaView | None = None) -> web.Application:
    auth = [auth_middleware(cfg.users_file)] if cfg.users_file else []
    app = web.Application(middlewares=[*auth, security_headers])
    app[CONSOLE] = Console(cfg, kafka or KafkaView(cfg))
    app.router.add_get("/", index)
    app.router.add_get("/api/snapshot", snapshot)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_static("/static/", STATIC)
    live.install(app, cfg)  # the live panel's relay (console/live.py)
    app.cleanup_ctx.append(_sampling)
    return app
