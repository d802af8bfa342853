"""Starts the local stack in order (Kafka, then topics), records its endpoints, and stops it in reverse."""

from __future__ import annotations

import time
from dataclasses import dataclass

from common.envfile import write_env
from common.registry_client import RegistryClient, RegistryClientError
from schemas.catalog import CatalogError, load_catalog
from schemas.register import register_catalog
from stack.config import StackConfig
from stack.kafka import KafkaBroker
from stack.services import ServiceError, services
from stack.topics import (
    AGGREGATES_TOPIC,
    DEADLETTER_TOPIC,
    EVENTS_TOPIC,
    SCHEMAS_TOPIC,
    ensure_topics,
    topic_specs,
)


@dataclass
class UpReport:
    env: dict[str, str]
    started: list[str]
    created_topics: list[str]
    seconds: float


class Stack:
    """The services of one state directory."""

    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.kafka = KafkaBroker(cfg)

    def endpoints(self) -> dict[str, str]:
        return {
            "KAFKA_BOOTSTRAP": self.cfg.bootstrap,
            "EVENTS_TOPIC": EVENTS_TOPIC,
            "DEADLETTER_TOPIC": DEADLETTER_TOPIC,
            "SCHEMAS_TOPIC": SCHEMAS_TOPIC,
            "AGGREGATES_TOPIC": AGGREGATES_TOPIC,
        }

    def up(self) -> UpReport:
        t0 = time.monotonic()
        started = ["kafka"] if self.kafka.start() else []
        created = ensure_topics(self.cfg.bootstrap, topic_specs(self.cfg))
        self.kafka.warm_up_transactions()
        env = self.endpoints()
        for service in services(self.cfg):
            if service.start(self.cfg, env):
                started.append(service.name)
            env.update(service.endpoints)
            if service.name == "registry":
                self.register_schemas(env["REGISTRY_URL"])
        write_env(self.cfg.env_file, env)
        return UpReport(env, started, created, time.monotonic() - t0)

    def register_schemas(self, registry_url: str) -> None:
        """Set each subject's compatibility and register every schema of schemas/ (idempotent), so the
        services started after the registry (the gateway) find them."""
        try:
            register_catalog(RegistryClient(registry_url), load_catalog())
        except (RegistryClientError, CatalogError) as exc:
            raise ServiceError(f"registering schemas/ at {registry_url} failed: {exc}") from exc

    def down(self) -> list[str]:
        stopped = [s.name for s in reversed(services(self.cfg)) if s.process(self.cfg).stop()]
        if self.kafka.stop():
            stopped.append("kafka")
        self.cfg.env_file.unlink(missing_ok=True)
        return stopped

    def status(self) -> dict[str, bool]:
        status = {"kafka": self.kafka.running()}
        status.update({s.name: s.process(self.cfg).pid() is not None for s in services(self.cfg)})
        return status
