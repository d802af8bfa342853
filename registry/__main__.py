"""Runs the registry: `python -m registry` (configuration from the environment, see registry/config.py)."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator

from aiohttp import web

from registry import logs
from registry.api import REGISTRY, make_app
from registry.config import ConfigError, RegistryConfig
from registry.kafka_log import KafkaLog
from registry.service import Registry

log = logging.getLogger("registry")


def build(cfg: RegistryConfig) -> web.Application:
    """The app, with the Kafka log opened, replayed before serving, and closed at shutdown."""
    schema_log = KafkaLog(cfg.bootstrap, cfg.topic, cfg.transactional_id, cfg.kafka_timeout_s, cfg.kafka_security)
    app = make_app(Registry(schema_log, cfg.default_compatibility), cfg.access)

    async def storage(app: web.Application) -> AsyncIterator[None]:
        await app[REGISTRY].start()
        yield
        await app[REGISTRY].close()

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
                                "authentication": bool(cfg.access.users_file), "reads_open": cfg.access.reads_open})
    if not cfg.access.users_file:
        log.warning("serving without authentication: anyone who reaches this port may register and delete schemas")
    web.run_app(build(cfg), host=cfg.host, port=cfg.port, print=None, access_log=None,
                ssl_context=cfg.tls.context() if cfg.tls else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
