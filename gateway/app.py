"""Builds the aiohttp application of one worker: routes, middlewares, and every resource in a cleanup context."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from gateway import handlers
from gateway.batch_cache import SharedCommittedBatches
from gateway.commit import CommitSettings, GroupCommitter
from gateway.config import GatewayConfig
from gateway.connections import ConnectionRecycler
from gateway.handlers import GATEWAY, Gateway
from gateway.limits import CommittedBatches, InFlight, SourceRates
from gateway.lookup_limits import LookupBudget, NegativeCache
from gateway.metrics import CommitMetrics
from gateway.middleware import make_middlewares
from gateway.producer import ProducerFactory, confluent_factory, kafka_config
from gateway.schema_cache import NEGATIVE_TTL_S, HttpRegistry, SchemaCache, SchemaSource
from gateway.schemas import TopicMap

log = logging.getLogger("gateway.app")


def commit_settings(cfg: GatewayConfig) -> CommitSettings:
    return CommitSettings(window_s=cfg.commit_window_ms / 1000, max_records=cfg.commit_max_records,
                          min_interval_s=cfg.commit_min_interval_ms / 1000,
                          busy_interval_s=cfg.commit_busy_interval_ms / 1000, busy_cpu=cfg.commit_busy_cpu,
                          busy_waiting=cfg.commit_busy_waiting,
                          commit_timeout_s=cfg.delivery_timeout_s, init_timeout_s=cfg.delivery_timeout_s,
                          retry_after_s=cfg.retry_after_s, ready_grace_s=cfg.ready_grace_s)


def schema_cache(cfg: GatewayConfig, source: SchemaSource) -> SchemaCache:
    """The worker's schema cache: topics from config, bounded negative cache, lookup budget, shared snapshot."""
    snapshot = Path(cfg.shared_dir) / "schemas.json" if cfg.shared_dir else None
    return SchemaCache(source, TopicMap(cfg.events_topic, dict(cfg.topic_overrides)),
                       budget=LookupBudget(cfg.registry_lookups_per_s, cfg.registry_lookup_burst, cfg.retry_after_s),
                       negative=NegativeCache(cfg.negative_cache_size, NEGATIVE_TTL_S), snapshot=snapshot,
                       codegen=cfg.avro_codegen)


def committed_batches(cfg: GatewayConfig) -> CommittedBatches | SharedCommittedBatches:
    """Shared by the workers when they have a shared directory, else this process's own LRU."""
    if cfg.shared_dir:
        return SharedCommittedBatches(Path(cfg.shared_dir) / "committed-batches.sqlite3", cfg.dedup_cache_size)
    return CommittedBatches(cfg.dedup_cache_size)


def producer_factories(cfg: GatewayConfig, worker: int) -> list[ProducerFactory]:
    """One per commit lane, each with its own transactional id: lane 0 keeps `<prefix>-<worker>` (so a restarted
    worker fences the producer it had before lanes existed), lane n > 0 is `<prefix>-<worker>-l<n>`."""
    return [confluent_factory({**kafka_config(cfg.bootstrap, f"{cfg.transactional_id_prefix}-{worker}"
                                              + (f"-l{lane}" if lane else ""),
                                              cfg.delivery_timeout_s, cfg.transaction_timeout_s,
                                              compression=cfg.kafka_compression, linger_ms=cfg.kafka_linger_ms),
                               **cfg.kafka_security.librdkafka()})
            for lane in range(cfg.commit_lanes)]


def build_app(cfg: GatewayConfig, worker: int = 0, *, source: SchemaSource | None = None,
              factory: ProducerFactory | None = None) -> web.Application:
    """The worker's app; `source` and `factory` replace the registry and Kafka in tests (`factory`: one lane)."""
    if cfg.shared_dir:
        Path(cfg.shared_dir).mkdir(parents=True, exist_ok=True)
    registry = HttpRegistry(cfg.registry_url, cfg.registry_timeout_s, cfg.registry_access) if source is None else None
    cache = schema_cache(cfg, registry if registry is not None else source)  # type: ignore[arg-type]
    factories = producer_factories(cfg, worker) if factory is None else [factory]
    committer = GroupCommitter(factories, commit_settings(cfg), CommitMetrics())
    gw = Gateway(cfg, cache, committer,
                 InFlight(cfg.limits.max_inflight_events, cfg.limits.max_inflight_bytes, cfg.retry_after_s),
                 committed_batches(cfg), SourceRates(cfg.limits.source_events_per_s))
    recycler = ConnectionRecycler(cfg.conn_max_age_s, cfg.conn_max_requests, cfg.conn_jitter)
    app = web.Application(middlewares=make_middlewares(recycler), client_max_size=cfg.limits.max_compressed_bytes)
    app[GATEWAY] = gw
    app.router.add_post("/v1/batch", handlers.post_batch, expect_handler=handlers.expect_after_auth)
    app.router.add_get("/livez", handlers.livez)
    app.router.add_get("/readyz", handlers.readyz)
    app.router.add_get("/metrics", handlers.metrics)
    app.cleanup_ctx.append(_schemas_ctx(registry))
    app.cleanup_ctx.append(_kafka_ctx)
    app.on_shutdown.append(_drain)
    return app


def _schemas_ctx(registry: HttpRegistry | None):  # type: ignore[no-untyped-def]
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        gw = app[GATEWAY]
        await gw.cache.load(retry_s=1.0)  # a cold worker does not listen before its first schema load
        task = asyncio.create_task(gw.cache.run_refresher(gw.cfg.registry_refresh_s))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if registry is not None:
            await registry.close()
    return ctx


async def _kafka_ctx(app: web.Application) -> AsyncIterator[None]:
    gw = app[GATEWAY]
    gw.committer.start()
    # Serve only once the producer is ready (or after the timeout, then /readyz says not ready).
    await asyncio.get_running_loop().run_in_executor(None, gw.committer.wait_ready, gw.cfg.delivery_timeout_s * 2)
    yield
    # aiohttp has already stopped accepting and waited for in-flight handlers; finish queued transactions.
    await asyncio.get_running_loop().run_in_executor(None, gw.committer.stop, gw.cfg.shutdown_timeout_s)


async def _drain(app: web.Application) -> None:
    app[GATEWAY].draining = True
    log.info("draining: no new batches accepted")
