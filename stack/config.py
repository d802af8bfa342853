"""The stack's configuration: one frozen dataclass read once from the environment and validated."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common.env import env_int

REPO_ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """A stack environment variable has a value that cannot be used; the message names it."""


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    return env_int(env, name, default, lo, hi, error=ConfigError)


@dataclass(frozen=True)
class StackConfig:
    """Where the stack keeps its state and which loopback ports and partition counts it uses.

    Every field has an environment variable (documented in docs/local-stack.md):
    HEADWATER_STATE_DIR, HEADWATER_KAFKA_PORT, HEADWATER_KAFKA_CONTROLLER_PORT,
    HEADWATER_EVENTS_PARTITIONS, HEADWATER_DEADLETTER_PARTITIONS, HEADWATER_AGGREGATES_PARTITIONS,
    HEADWATER_KAFKA_HEAP_MB, HEADWATER_KAFKA_FLUSH_MESSAGES, HEADWATER_START_TIMEOUT_S,
    HEADWATER_REGISTRY_PORT, HEADWATER_GATEWAY_PORT.
    """

    state_dir: Path
    kafka_port: int = 9092
    controller_port: int = 9093
    events_partitions: int = 6
    deadletter_partitions: int = 2
    aggregates_partitions: int = 2
    kafka_heap_mb: int = 1024
    # 0 = leave flushing to the OS (page cache); N = fsync every N messages on every topic (costly).
    kafka_flush_messages: int = 0
    start_timeout_s: int = 90
    registry_port: int = 8081
    gateway_port: int = 8080

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StackConfig:
        env = os.environ if env is None else env
        state = Path(env.get("HEADWATER_STATE_DIR") or REPO_ROOT / ".headwater").resolve()
        cfg = cls(
            state_dir=state,
            kafka_port=_int(env, "HEADWATER_KAFKA_PORT", 9092, 1, 65535),
            controller_port=_int(env, "HEADWATER_KAFKA_CONTROLLER_PORT", 9093, 1, 65535),
            events_partitions=_int(env, "HEADWATER_EVENTS_PARTITIONS", 6, 1, 1000),
            deadletter_partitions=_int(env, "HEADWATER_DEADLETTER_PARTITIONS", 2, 1, 1000),
            aggregates_partitions=_int(env, "HEADWATER_AGGREGATES_PARTITIONS", 2, 1, 1000),
            kafka_heap_mb=_int(env, "HEADWATER_KAFKA_HEAP_MB", 1024, 256, 65536),
            kafka_flush_messages=_int(env, "HEADWATER_KAFKA_FLUSH_MESSAGES", 0, 0, 1_000_000_000),
            start_timeout_s=_int(env, "HEADWATER_START_TIMEOUT_S", 90, 5, 3600),
            registry_port=_int(env, "HEADWATER_REGISTRY_PORT", 8081, 1, 65535),
            gateway_port=_int(env, "HEADWATER_GATEWAY_PORT", 8080, 1, 65535),
        )
        ports = [cfg.kafka_port, cfg.controller_port, cfg.registry_port, cfg.gateway_port]
        if len(set(ports)) != len(ports):
            raise ConfigError("HEADWATER_KAFKA_PORT, HEADWATER_KAFKA_CONTROLLER_PORT, HEADWATER_REGISTRY_PORT and "
                              "HEADWATER_GATEWAY_PORT must all differ")
        return cfg

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def jars_dir(self) -> Path:
        """Set-up puts Maven's copies here; shared by every state dir of this checkout."""
        return REPO_ROOT / ".headwater" / "jars"

    @property
    def kafka_data_dir(self) -> Path:
        return self.state_dir / "data" / "kafka"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def env_file(self) -> Path:
        return self.state_dir / "stack.env"
