"""The console's settings: one frozen dataclass read once from the environment (stack.env's names) and validated.

| variable | default | meaning |
| --- | --- | --- |
| `HEADWATER_CONSOLE_HOST` | `127.0.0.1` | address to listen on (loopback: the page has no authentication) |
| `HEADWATER_CONSOLE_PORT` | `8090` | port to listen on |
| `KAFKA_BOOTSTRAP` | `127.0.0.1:9092` | the Kafka cluster (offsets, aggregates and dead-letter topics) |
| `REGISTRY_URL` | `http://127.0.0.1:8081` | the registry (health; writer schemas of the aggregates topic) |
| `HEADWATER_CONSOLE_GATEWAYS` | `GATEWAY_URL` | comma-separated gateway base URLs whose `/metrics` are read |
| `EVENTS_TOPIC`, `DEADLETTER_TOPIC`, `AGGREGATES_TOPIC` | `headwater.events`, ... | the stack's topics |
| `HEADWATER_PIPELINE_DIR` | `<state dir>/pipeline` | the pipeline's output root (checkpoint offsets, `loss_audit`) |
| `HEADWATER_CONSOLE_POLL_S` | `2` | seconds between two samples |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common.env import env_float, env_int
from common.envfile import pipeline_dir


class ConfigError(ValueError):
    """A console variable is unusable; the message names it."""


@dataclass(frozen=True)
class ConsoleConfig:
    host: str = "127.0.0.1"
    port: int = 8090
    bootstrap: str = "127.0.0.1:9092"
    registry_url: str = "http://127.0.0.1:8081"
    gateways: tuple[str, ...] = ("http://127.0.0.1:8080",)
    events_topic: str = "headwater.events"
    deadletter_topic: str = "headwater.deadletter"
    aggregates_topic: str = "headwater.aggregates"
    pipeline_dir: Path = Path(".headwater", "pipeline")
    poll_s: float = 2.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ConsoleConfig:
        env = os.environ if env is None else env
        d = cls()
        gateways = env.get("HEADWATER_CONSOLE_GATEWAYS") or env.get("GATEWAY_URL") or d.gateways[0]
        urls = tuple(u.strip().rstrip("/") for u in gateways.split(",") if u.strip())
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"HEADWATER_CONSOLE_GATEWAYS: {url!r} is not an http(s) URL")
        return cls(
            host=env.get("HEADWATER_CONSOLE_HOST") or d.host,
            port=env_int(env, "HEADWATER_CONSOLE_PORT", d.port, 1, 65535, error=ConfigError),
            bootstrap=env.get("KAFKA_BOOTSTRAP") or d.bootstrap,
            registry_url=(env.get("REGISTRY_URL") or d.registry_url).rstrip("/"),
            gateways=urls,
            events_topic=env.get("EVENTS_TOPIC") or d.events_topic,
            deadletter_topic=env.get("DEADLETTER_TOPIC") or d.deadletter_topic,
            aggregates_topic=env.get("AGGREGATES_TOPIC") or d.aggregates_topic,
            pipeline_dir=Path(pipeline_dir(env)),
            poll_s=env_float(env, "HEADWATER_CONSOLE_POLL_S", d.poll_s, 0.2, 60.0, error=ConfigError),
        )
