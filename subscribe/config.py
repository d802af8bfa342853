"""The subscription server's settings: one frozen dataclass read once from the environment and validated.

Every variable, its default and meaning: docs/subscriptions.md, "Settings". The required ones: `KAFKA_BOOTSTRAP`,
`REGISTRY_URL` and `HEADWATER_SUBSCRIBE_READ_KEYS` (or `_FILE`): `name:sha256hex:scope|scope[:revoked]` entries.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from common.basic_auth import AuthConfigError
from common.env import env_float, env_int
from common.kafka_security import KafkaSecurity, KafkaSecurityError
from common.registry_access import RegistryAccess
from subscribe.keys import ReadKeys, parse_read_keys
from subscribe.streams import Topics

MIB = 1024 * 1024
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")


class ConfigError(ValueError):
    """A variable is unusable; the message names it."""


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    return env_int(env, name, default, lo, hi, error=ConfigError)


def _float(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    return env_float(env, name, default, lo, hi, error=ConfigError)


@dataclass(frozen=True)
class SubscribeConfig:
    bootstrap: str
    registry_url: str
    keys: ReadKeys
    topics: Topics = field(default_factory=Topics)
    host: str = "127.0.0.1"
    port: int = 8082
    max_subscribers: int = 2000
    max_per_key: int = 100
    max_catchups: int = 4
    buffer_bytes: int = 8 * MIB
    ring_bytes: int = 16 * MIB
    stall_s: float = 30.0
    cutoff_grace_s: float = 5.0
    heartbeat_s: float = 15.0
    retry_ms: int = 2000
    cors_origins: tuple[str, ...] = ()
    idle_reader_s: float = 60.0
    header_timeout_s: float = 10.0
    kafka_timeout_s: float = 10.0
    shutdown_timeout_s: float = 5.0
    prefetch_kb: int = 1024
    sndbuf_bytes: int = 0  # 0: the kernel's autotuning (bounded by net.ipv4.tcp_wmem)
    log_level: str = "INFO"
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)  # its Kafka principal (docs/security.md)
    registry_access: RegistryAccess = field(default_factory=RegistryAccess)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SubscribeConfig:
        env = os.environ if env is None else env
        buffer = _int(env, "HEADWATER_SUBSCRIBE_BUFFER_BYTES", 8 * MIB, 64 * 1024, 1 << 32)
        ring = _int(env, "HEADWATER_SUBSCRIBE_RING_BYTES", 2 * buffer, 64 * 1024, 1 << 34)
        if ring < buffer:
            raise ConfigError("HEADWATER_SUBSCRIBE_RING_BYTES must be at least HEADWATER_SUBSCRIBE_BUFFER_BYTES")
        level = env.get("HEADWATER_SUBSCRIBE_LOG_LEVEL", "INFO").upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ConfigError(f"HEADWATER_SUBSCRIBE_LOG_LEVEL={level!r} is not DEBUG, INFO, WARNING or ERROR")
        security, access = _credentials(env)
        return cls(
            bootstrap=_required(env, "KAFKA_BOOTSTRAP"),
            registry_url=_required(env, "REGISTRY_URL").rstrip("/"),
            keys=_keys(env),
            topics=Topics(events=_topic(env, "EVENTS_TOPIC", "headwater.events"),
                          deadletter=_topic(env, "DEADLETTER_TOPIC", "headwater.deadletter"),
                          aggregates=_topic(env, "AGGREGATES_TOPIC", "headwater.aggregates"),
                          overrides=_overrides(env.get("HEADWATER_SUBSCRIBE_TOPIC_OVERRIDES", ""))),
            host=env.get("HEADWATER_SUBSCRIBE_HOST") or "127.0.0.1",
            port=_int(env, "HEADWATER_SUBSCRIBE_PORT", 8082, 1, 65535),
            max_subscribers=_int(env, "HEADWATER_SUBSCRIBE_MAX_SUBSCRIBERS", 2000, 1, 1_000_000),
            max_per_key=_int(env, "HEADWATER_SUBSCRIBE_MAX_PER_KEY", 100, 1, 1_000_000),
            max_catchups=_int(env, "HEADWATER_SUBSCRIBE_MAX_CATCHUPS", 4, 1, 1000),
            buffer_bytes=buffer,
            ring_bytes=ring,
            stall_s=_float(env, "HEADWATER_SUBSCRIBE_STALL_S", 30.0, 0.5, 3600.0),
            cutoff_grace_s=_float(env, "HEADWATER_SUBSCRIBE_CUTOFF_GRACE_S", 5.0, 0.0, 600.0),
            heartbeat_s=_float(env, "HEADWATER_SUBSCRIBE_HEARTBEAT_S", 15.0, 0.1, 3600.0),
            retry_ms=_int(env, "HEADWATER_SUBSCRIBE_RETRY_MS", 2000, 0, 3_600_000),
            cors_origins=_origins(env.get("HEADWATER_SUBSCRIBE_CORS_ORIGINS", "")),
            idle_reader_s=_float(env, "HEADWATER_SUBSCRIBE_IDLE_READER_S", 60.0, 0.0, 86400.0),
            header_timeout_s=_float(env, "HEADWATER_SUBSCRIBE_HEADER_TIMEOUT_S", 10.0, 0.1, 600.0),
            kafka_timeout_s=_float(env, "HEADWATER_SUBSCRIBE_KAFKA_TIMEOUT_S", 10.0, 0.5, 300.0),
            shutdown_timeout_s=_float(env, "HEADWATER_SUBSCRIBE_SHUTDOWN_TIMEOUT_S", 5.0, 0.1, 600.0),
            prefetch_kb=_int(env, "HEADWATER_SUBSCRIBE_PREFETCH_KB", 1024, 64, 1 << 20),
            sndbuf_bytes=_int(env, "HEADWATER_SUBSCRIBE_SNDBUF_BYTES", 0, 0, 1 << 30),
            log_level=level,
            kafka_security=security,
            registry_access=access,
        )


def _credentials(env: Mapping[str, str]) -> tuple[KafkaSecurity, RegistryAccess]:
    """Kafka and registry credentials (KAFKA_*, REGISTRY_*; HEADWATER_SUBSCRIBE_<VARIABLE> for this server alone)."""
    try:
        return KafkaSecurity.from_env(env, "SUBSCRIBE"), RegistryAccess.from_env(env, "SUBSCRIBE")
    except (KafkaSecurityError, AuthConfigError) as exc:
        raise ConfigError(str(exc)) from None


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise ConfigError(f"{name} is not set")
    return value


def _topic(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name) or default
    if not _TOPIC.fullmatch(value) or value in (".", ".."):
        raise ConfigError(f"{name}={value!r} is not a valid Kafka topic name")
    return value


def _overrides(raw: str) -> dict[str, str]:
    pairs = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        event_type, sep, topic = (p.strip() for p in item.partition("="))
        if not sep or not _TYPE.fullmatch(event_type) or not _TOPIC.fullmatch(topic):
            raise ConfigError(f"HEADWATER_SUBSCRIBE_TOPIC_OVERRIDES: {item!r} is not <event_type>=<topic>")
        pairs[event_type] = topic
    return pairs


def _origins(raw: str) -> tuple[str, ...]:
    origins = tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())
    for o in origins:
        if o != "*" and not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?", o):
            raise ConfigError(f"HEADWATER_SUBSCRIBE_CORS_ORIGINS: {o!r} is not * or scheme://host[:port]")
    return origins


def _keys(env: Mapping[str, str]) -> ReadKeys:
    raw = env.get("HEADWATER_SUBSCRIBE_READ_KEYS", "")
    path = env.get("HEADWATER_SUBSCRIBE_READ_KEYS_FILE", "")
    if path:
        try:
            raw = ",".join(filter(None, [raw, Path(path).read_text().replace("\n", ",")]))
        except OSError as exc:
            raise ConfigError(f"HEADWATER_SUBSCRIBE_READ_KEYS_FILE={path!r}: {exc}") from None
    try:
        keys = parse_read_keys(raw)
    except ValueError as exc:
        raise ConfigError(f"HEADWATER_SUBSCRIBE_READ_KEYS: {exc}") from None
    if not keys.by_hash:
        raise ConfigError("HEADWATER_SUBSCRIBE_READ_KEYS (or _FILE) holds no read key")
    return keys
