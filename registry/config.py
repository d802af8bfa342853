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
| `REGISTRY_USERS_FILE` | | `name:role:hash` lines (`common/basic_auth.py`); roles `read`, `write`, `admin` |
| `REGISTRY_AUTH` | `required` | `none` serves without authentication; allowed without a users file only on loopback |
| `REGISTRY_READS` | `open` | `open`: reads need no credentials; `authenticated`: they need the `read` role |
| `REGISTRY_ALLOWED_ORIGINS` | | comma-separated browser origins whose pages may write (none: every page refused) |
| `REGISTRY_TLS_CERT`, `REGISTRY_TLS_KEY` | | serve HTTPS with this certificate chain and key (PEM) |
| `KAFKA_SECURITY_PROTOCOL`, `KAFKA_SASL_*`, ... | `PLAINTEXT` | its Kafka principal (common/kafka_security.py) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from common.basic_auth import AuthConfigError, Users
from common.env import env_int
from common.kafka_security import KafkaSecurity, KafkaSecurityError
from common.tls import ServerTls, server_tls
from registry.access import ROLES, AccessPolicy
from registry.compat import normalize_level

LOOPBACK = ("127.0.0.1", "::1", "localhost")


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
    access: AccessPolicy = field(default_factory=AccessPolicy)
    tls: ServerTls | None = None
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)

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
        host = env.get("REGISTRY_HOST") or "127.0.0.1"
        try:
            security = KafkaSecurity.from_env(env, "REGISTRY")
        except KafkaSecurityError as exc:
            raise ConfigError(str(exc)) from None
        return cls(
            bootstrap=bootstrap,
            topic=topic,
            host=host,
            port=_number(env, "REGISTRY_PORT", 8081, 1, 65535),
            default_compatibility=level,
            transactional_id=env.get("REGISTRY_TRANSACTIONAL_ID") or f"headwater-registry.{topic}",
            kafka_timeout_s=float(_number(env, "REGISTRY_KAFKA_TIMEOUT_S", 30, 1, 3600)),
            log_level=log_level,
            access=_access(env, host),
            tls=server_tls(env, "REGISTRY_", ConfigError),
            kafka_security=security,
        )


def _access(env: Mapping[str, str], host: str) -> AccessPolicy:
    """Authentication is required unless REGISTRY_AUTH=none, and `none` is refused beyond loopback."""
    users_file = (env.get("REGISTRY_USERS_FILE") or "").strip()
    mode = (env.get("REGISTRY_AUTH") or "required").strip().lower()
    if mode not in ("required", "none"):
        raise ConfigError(f"REGISTRY_AUTH={mode!r} is not required or none")
    if mode == "required" and not users_file and host not in LOOPBACK:
        raise ConfigError(f"REGISTRY_HOST={host} is beyond loopback: set REGISTRY_USERS_FILE (or REGISTRY_AUTH=none "
                          "to serve without authentication, knowingly)")
    if mode == "none":
        users_file = ""
    reads = (env.get("REGISTRY_READS") or "open").strip().lower()
    if reads not in ("open", "authenticated"):
        raise ConfigError(f"REGISTRY_READS={reads!r} is not open or authenticated")
    if reads == "authenticated" and not users_file:
        raise ConfigError("REGISTRY_READS=authenticated needs REGISTRY_USERS_FILE")
    origins = frozenset(o.strip() for o in (env.get("REGISTRY_ALLOWED_ORIGINS") or "").split(",") if o.strip())
    if users_file:
        try:
            Users(Path(users_file), frozenset(ROLES))
        except AuthConfigError as exc:
            raise ConfigError(f"REGISTRY_USERS_FILE: {exc}") from None
    return AccessPolicy(users_file=users_file, reads_open=reads == "open", allowed_origins=origins)


def _number(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    return env_int(env, name, default, lo, hi, error=ConfigError)
