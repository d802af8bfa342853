"""The registry's configuration: one frozen dataclass read once from the environment and validated.

| variable | default | meaning |
| --- | --- | --- |
| `KAFKA_BOOTSTRAP` | (required) | the Kafka cluster holding the schemas topic |
| `SCHEMAS_TOPIC` | `_schemas` | the compacted single-partition topic the registry stores everything in |
| `REGISTRY_HOST` | `127.0.0.1` | address to listen on |
| `REGISTRY_PORT` | `8081` | port to listen on |
| `REGISTRY_DEFAULT_COMPATIBILITY` | `BACKWARD` | global level until `PUT /config` sets one |
| `REGISTRY_TRANSACTIONAL_ID` | `headwater-registry.<topic>` | shared by every instance: one writer at a time |
| `REGISTRY_KAFKA_TIMEOUT_S` | `30` | bound on every Kafka call (start-up replay, a write and its read-back) |
| `REGISTRY_LOG_LEVEL` | `INFO` | logging level of the JSON log lines on stderr |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from common.env import env_int
from registry.compat import normalize_level


class ConfigError(ValueError):
    """A registry environment variable is missing or unusable; the message names it."""


@dataclass(frozen=True)
class RegistryConfig:
    """See the module docstring for each field's variable."""

    bootstrap: str
    topic: str = "_schemas"
    host: str = "127.0.0.1"
    port: int = 8081
    default_compatibility: str = "BACKWARD"
    transactional_id: str = "headwater-registry._schemas"
    kafka_timeout_s: float = 30.0
    log_level: str = "INFO"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RegistryConfig:
        env = os.environ if env is None else env
        bootstrap = env.get("KAFKA_BOOTSTRAP", "").strip()
        if not bootstrap:
            raise ConfigError("KAFKA_BOOTSTRAP is not set (host:port of the Kafka cluster)")
        topic = env.get("SCHEMAS_TOPIC") or "_schemas"
        level_raw = env.get("REGISTRY_DEFAULT_COMPATIBILITY") or "BACKWARD"
        level = normalize_level(level_raw)
        if level is None:
            raise ConfigError(f"REGISTRY_DEFAULT_COMPATIBILITY={level_raw!r} is not a compatibility level")
        log_level = (env.get("REGISTRY_LOG_LEVEL") or "INFO").upper()
        if log_level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ConfigError(f"REGISTRY_LOG_LEVEL={log_level!r} is not DEBUG, INFO, WARNING or ERROR")
        return cls(
            bootstrap=bootstrap,
            topic=topic,
            host=env.get("REGISTRY_HOST") or "127.0.0.1",
            port=_number(env, "REGISTRY_PORT", 8081, 1, 65535),
            default_compatibility=level,
            transactional_id=env.get("REGISTRY_TRANSACTIONAL_ID") or f"headwater-registry.{topic}",
            kafka_timeout_s=float(_number(env, "REGISTRY_KAFKA_TIMEOUT_S", 30, 1, 3600)),
            log_level=log_level,
        )


def _number(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    return env_int(env, name, default, lo, hi, error=ConfigError)
