"""The dead-letter tool's settings: one frozen dataclass read once from stack.env and the environment.

| variable | default | meaning |
| --- | --- | --- |
| `KAFKA_BOOTSTRAP` | (required) | the Kafka cluster |
| `REGISTRY_URL` | (required for `replay`) | the Confluent-compatible schema registry the gateway uses |
| `DEADLETTER_TOPIC` | `headwater.deadletter` | where the gateway writes rejected events |
| `HEADWATER_REPLAY_TRANSACTION_TIMEOUT_S` | `60` | an abandoned (killed) replay transaction is aborted after this |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common.env import env_float
from common.envfile import stack_settings


class ConfigError(ValueError):
    """A setting is missing or unusable; the message names the variable."""


@dataclass(frozen=True)
class ToolConfig:
    bootstrap: str
    registry_url: str
    deadletter_topic: str = "headwater.deadletter"
    transaction_timeout_s: float = 60.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ToolConfig:
        bootstrap = env.get("KAFKA_BOOTSTRAP", "")
        if not bootstrap:
            raise ConfigError("KAFKA_BOOTSTRAP is not set (run `make up`, or pass --env-file)")
        return cls(
            bootstrap=bootstrap,
            registry_url=env.get("REGISTRY_URL", ""),
            deadletter_topic=env.get("DEADLETTER_TOPIC") or "headwater.deadletter",
            transaction_timeout_s=env_float(env, "HEADWATER_REPLAY_TRANSACTION_TIMEOUT_S", 60.0, 1.0, 900.0,
                                            error=ConfigError),
        )

    @classmethod
    def load(cls, env_file: Path | None) -> ToolConfig:
        """`env_file`, else the running stack's `$HEADWATER_STATE_DIR/stack.env` (when it exists), overridden by
        the process environment."""
        return cls.from_env(stack_settings(env_file, os.environ))
