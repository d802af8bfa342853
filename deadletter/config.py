"""The dead-letter tool's settings: one frozen dataclass read once from stack.env and the environment.

| variable | default | meaning |
| --- | --- | --- |
| `KAFKA_BOOTSTRAP` | (required) | the Kafka cluster |
| `REGISTRY_URL` | (required for `replay`) | the Confluent-compatible schema registry the gateway uses |
| `DEADLETTER_TOPIC` | `headwater.deadletter` | where the gateway writes rejected events |
| `HEADWATER_REPLAY_TRANSACTION_TIMEOUT_S` | `60` | an abandoned (killed) replay transaction is aborted after this |
| `HEADWATER_GATEWAY_EVENTS_TOPIC` | `headwater.events` | as the gateway's: where replayed events go |
| `HEADWATER_GATEWAY_TOPIC_OVERRIDES` | (none) | as the gateway's: `type=topic,...`, the event types written elsewhere |
| `KAFKA_SECURITY_PROTOCOL`, `KAFKA_SASL_*`, ... | `PLAINTEXT` | its Kafka principal (common/kafka_security.py) |
| `REGISTRY_BASIC_AUTH_USER_INFO_FILE`, ... | | its registry credentials (common/registry_access.py) |

Each of the last two rows may be given for this tool alone as `HEADWATER_DEADLETTER_<VARIABLE>`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.basic_auth import AuthConfigError
from common.env import env_float
from common.envfile import stack_settings
from common.kafka_security import KafkaSecurity, KafkaSecurityError
from common.registry_access import RegistryAccess
from deadletter.gateway_code import GatewayConfigError, TopicMap, topic_map


class ConfigError(ValueError):
    """A setting is missing or unusable; the message names the variable."""


@dataclass(frozen=True)
class ToolConfig:
    bootstrap: str
    registry_url: str
    deadletter_topic: str = "headwater.deadletter"
    transaction_timeout_s: float = 60.0
    topics: TopicMap = field(default_factory=TopicMap)  # the gateway's routing of event types to topics
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    registry_access: RegistryAccess = field(default_factory=RegistryAccess)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ToolConfig:
        bootstrap = env.get("KAFKA_BOOTSTRAP", "")
        if not bootstrap:
            raise ConfigError("KAFKA_BOOTSTRAP is not set (run `make up`, or pass --env-file)")
        try:
            topics = topic_map(env.get("HEADWATER_GATEWAY_EVENTS_TOPIC") or "headwater.events",
                               env.get("HEADWATER_GATEWAY_TOPIC_OVERRIDES", ""))
        except GatewayConfigError as exc:
            raise ConfigError(str(exc)) from None
        return cls(
            bootstrap=bootstrap,
            topics=topics,
            registry_url=env.get("REGISTRY_URL", ""),
            deadletter_topic=env.get("DEADLETTER_TOPIC") or "headwater.deadletter",
            transaction_timeout_s=env_float(env, "HEADWATER_REPLAY_TRANSACTION_TIMEOUT_S", 60.0, 1.0, 900.0,
                                            error=ConfigError),
            **_credentials(env),
        )

    @classmethod
    def load(cls, env_file: Path | None) -> ToolConfig:
        """`env_file`, else the running stack's `$HEADWATER_STATE_DIR/stack.env` (when it exists), overridden by
        the process environment."""
        return cls.from_env(stack_settings(env_file, os.environ))


def _credentials(env: Mapping[str, str]) -> dict[str, Any]:
    try:
        return {"kafka_security": KafkaSecurity.from_env(env, "DEADLETTER"),
                "registry_access": RegistryAccess.from_env(env, "DEADLETTER")}
    except (KafkaSecurityError, AuthConfigError) as exc:
        raise ConfigError(str(exc)) from None
