"""Runs the registry: `python -m registry` (configuration from the environment, see registry/config.py)."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator

from aiohttp import web

from registry import logs
from registry.api import REGISTRY, make_app
from registry.config import ConfigError, RegistryConfig
from registry.follower import Forwarder
from registry.kafka_log import KafkaLog
from registry.service import Registry

log = logging.getLogger("registry")


def build(cfg: RegistryConfig) -> web.Application:
    """The app, with the Kafka log opened, replayed before serving, and closed at shutdown; on a follower, its
    log read-only and its client to the primary opened and closed with it."""
    schema_log = KafkaLog(cfg.bootstrap, cfg.topic, cfg.transactional_id, cfg.kafka_timeout_s, cfg.kafka_security,
                          writable=cfg.follower is None)
    forwarder = Forwarder(cfg.follower) if cfg.follower is not None else None
    app = make_app(Registry(schema_log, cfg.default_compatibility), cfg.access, forwarder)

    async def storage(app: web.Application) -> AsyncIterator[None]:
        if forwarder is not None:
            await forwarder.start()
        try:
            await app[REGISTRY].start()
            yield
            await app[REGISTRY].close()
        finally:
            if forwarder is not None:
                await forwarder.close()

    app.cleanup_ctx.append(storage)
    return app


def main() -> int:
    try:
        cfg = RegistryConfig.from_env()
    except ConfigError as exc:
        print(f"registry: {exc}", file=sys.stderr)
        return 2
    logs.setup(cfg.log_level)
    log.info("starting", extra={"bootstrap": cfg.bootstrap, "topic": cfg.topic, "port": cfg.port,
                                "kafka": cfg.kafka_security.describe(), "https": cfg.tls is not None,
                                "authentication": bool(cfg.access.users_file), "reads_open": cfg.access.reads_open,
                                "follower_of": cfg.follower.primary_url if cfg.follower else None})
    if cfg.follower is not None:
        log.info("a read-only follower: reads from the mirrored topic, writes forwarded to the primary",
                 extra={"primary": cfg.follower.primary_url, "topic": cfg.topic})
    if not cfg.access.users_file and cfg.follower is None:
        log.warning("serving without authentication: anyone who reaches this port may register and delete schemas")
    elif not cfg.access.users_file:
        log.warning("serving without authentication: anyone who reaches this port may read schemas; writes are "
                    "forwarded to the primary with the caller's own credentials")
    web.run_app(build(cfg), host=cfg.host, port=cfg.port, print=None, access_log=None,
                ssl_context=cfg.tls.context() if cfg.tls else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
