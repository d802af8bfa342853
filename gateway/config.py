"""The gateway's configuration: one frozen dataclass read once from the environment and validated."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from common.basic_auth import AuthConfigError
from common.env import env_float, env_int
from common.kafka_security import KafkaSecurity, KafkaSecurityError
from common.registry_access import RegistryAccess
from common.tls import ServerTls, server_tls
from gateway.auth import KeyStore, parse_keys


class ConfigError(ValueError):
    """A gateway environment variable has a value that cannot be used; the message names it."""


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    return env_int(env, name, default, lo, hi, error=ConfigError)


def _float(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    return env_float(env, name, default, lo, hi, error=ConfigError)


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise ConfigError(f"{name} is not set")
    return value


@dataclass(frozen=True)
class Limits:
    """Request limits (protocol.md section 5); over any of them the answer is 413 and nothing is written."""

    max_events: int = 40
    max_body_bytes: int = 1024 * 1024          # decompressed
    max_compressed_bytes: int = 1024 * 1024    # as received
    max_event_bytes: int = 64 * 1024           # one JSON event object or one framed Avro event
    max_ratio: int = 100                       # decompressed / compressed
    max_frames: int = 64                       # zstd frames or gzip members in one body (each costs a decoder)
    max_inflight_events: int = 20_000          # per process; beyond: 503
    max_inflight_bytes: int = 64 * 1024 * 1024  # per process, decompressed; beyond: 503
    source_events_per_s: float = 0.0           # per write-key source and process; 0 = unlimited; beyond: 429


@dataclass(frozen=True)
class GatewayConfig:
    """Everything the gateway reads from its environment; README.md ("Gateway") documents each variable."""

    host: str
    port: int
    workers: int
    bootstrap: str
    registry_url: str
    keys: KeyStore
    deadletter_topic: str = "headwater.deadletter"
    transactional_id_prefix: str = "headwater-gateway"
    limits: Limits = field(default_factory=Limits)
    commit_window_ms: float = 2.0
    commit_max_records: int = 5000
    kafka_compression: str = "none"  # the producer's record-batch compression (docs/gateway.md, "Tuning")
    # Records wait in librdkafka until the commit flushes them (a flush does not wait for linger.ms): one produce
    # request per partition per transaction instead of one per millisecond of producing (docs/gateway.md, "Tuning").
    kafka_linger_ms: float = 100.0
    uvloop: bool = True  # uvloop when installed; False: asyncio's own loop
    avro_codegen: bool = True  # generated Avro encoders; False: fastavro's writer for every event
    commit_min_interval_ms: float = 10.0
    commit_busy_interval_ms: float = 100.0  # transactions' spacing while the worker is saturated (see "Tuning")
    commit_busy_cpu: float = 0.85  # cores the worker uses from which it counts as saturated
    commit_busy_waiting: int = 128  # ... or batches waiting for their commit
    commit_lanes: int = 2  # transactional producers per worker taking turns (docs/gateway.md, "Tuning")
    delivery_timeout_s: float = 5.0
    # A dead worker's open transaction blocks read_committed consumers until the coordinator aborts it after
    # this long (or until the restarted worker fences it): keep it short.
    transaction_timeout_s: float = 10.0
    retry_after_s: int = 1
    ready_grace_s: float = 30.0  # /readyz stays ready this long after a failed transaction (docs/gateway.md)
    body_timeout_s: float = 10.0
    idle_timeout_s: float = 15.0
    conn_max_age_s: float = 300.0
    conn_max_requests: int = 10_000
    conn_jitter: float = 0.2
    shutdown_timeout_s: float = 20.0
    registry_refresh_s: float = 30.0
    registry_timeout_s: float = 5.0
    dedup_cache_size: int = 100_000
    events_topic: str = "headwater.events"
    topic_overrides: tuple[tuple[str, str], ...] = ()  # (event type, topic)
    registry_lookups_per_s: float = 5.0   # per source and worker: lookups of unknown schemas; beyond: 429
    registry_lookup_burst: int = 20
    negative_cache_size: int = 10_000     # per worker: recent registry 404s remembered (5 s each)
    shared_dir: str = ""  # a directory the workers of one instance share (batch answers, schema snapshot)
    # Proxies whose X-Forwarded-For is believed: the names (CN or DNS SAN) of the TLS client certificates they show,
    # verified against tls.client_ca; a connection on proxy_socket (a unix socket) is a proxy's too. Never an address.
    trusted_proxies: frozenset[str] = frozenset()
    log_level: str = "INFO"
    tls: ServerTls | None = None  # HTTPS on host:port (certificate, key, CA of the proxies' client certificates)
    proxy_socket: str = ""  # a unix socket the proxy connects to, besides host:port
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    registry_access: RegistryAccess = field(default_factory=RegistryAccess)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GatewayConfig:
        env = os.environ if env is None else env
        keys = _keys(env)
        limits = _limits(env)
        tls, proxies = _proxies(env)
        try:
            kafka_security = KafkaSecurity.from_env(env, "GATEWAY")
            registry_access = RegistryAccess.from_env(env, "GATEWAY")
        except (KafkaSecurityError, AuthConfigError) as exc:
            raise ConfigError(str(exc)) from None
        level = env.get("HEADWATER_GATEWAY_LOG_LEVEL", "INFO").upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ConfigError(f"HEADWATER_GATEWAY_LOG_LEVEL={level!r} is not DEBUG, INFO, WARNING or ERROR")
        cfg = cls(
            host=env.get("HEADWATER_GATEWAY_HOST", "127.0.0.1"),
            port=_int(env, "HEADWATER_GATEWAY_PORT", 8080, 1, 65535),
            workers=_int(env, "HEADWATER_GATEWAY_WORKERS", os.cpu_count() or 1, 1, 256),
            bootstrap=_required(env, "KAFKA_BOOTSTRAP"),
            registry_url=_required(env, "REGISTRY_URL").rstrip("/"),
            keys=keys,
            deadletter_topic=env.get("DEADLETTER_TOPIC", "headwater.deadletter"),
            transactional_id_prefix=env.get("HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX",
                                            f"headwater-gateway-{socket.gethostname()}"),
            limits=limits,
            commit_window_ms=_float(env, "HEADWATER_GATEWAY_COMMIT_WINDOW_MS", 2.0, 0.0, 1000.0),
            commit_max_records=_int(env, "HEADWATER_GATEWAY_COMMIT_MAX_RECORDS", 5000, 1, 10**6),
            kafka_compression=_compression(env),
            kafka_linger_ms=_float(env, "HEADWATER_GATEWAY_KAFKA_LINGER_MS", 100.0, 0.0, 1000.0),
            uvloop=_flag(env, "HEADWATER_GATEWAY_UVLOOP", True),
            avro_codegen=_flag(env, "HEADWATER_GATEWAY_AVRO_CODEGEN", True),
            commit_min_interval_ms=_float(env, "HEADWATER_GATEWAY_COMMIT_MIN_INTERVAL_MS", 10.0, 0.0, 1000.0),
            commit_busy_interval_ms=_float(env, "HEADWATER_GATEWAY_COMMIT_BUSY_INTERVAL_MS", 100.0, 0.0, 1000.0),
            commit_busy_cpu=_float(env, "HEADWATER_GATEWAY_COMMIT_BUSY_CPU", 0.85, 0.0, 64.0),
            commit_busy_waiting=_int(env, "HEADWATER_GATEWAY_COMMIT_BUSY_WAITING", 128, 1, 10**6),
            commit_lanes=_int(env, "HEADWATER_GATEWAY_COMMIT_LANES", 2, 1, 16),
            delivery_timeout_s=_float(env, "HEADWATER_GATEWAY_DELIVERY_TIMEOUT_S", 5.0, 1.0, 300.0),
            transaction_timeout_s=_float(env, "HEADWATER_GATEWAY_TRANSACTION_TIMEOUT_S", 10.0, 2.0, 900.0),
            retry_after_s=_int(env, "HEADWATER_GATEWAY_RETRY_AFTER_S", 1, 1, 3600),
            ready_grace_s=_float(env, "HEADWATER_GATEWAY_READY_GRACE_S", 30.0, 0.0, 3600.0),
            body_timeout_s=_float(env, "HEADWATER_GATEWAY_BODY_TIMEOUT_S", 10.0, 0.1, 600.0),
            idle_timeout_s=_float(env, "HEADWATER_GATEWAY_IDLE_TIMEOUT_S", 15.0, 0.1, 3600.0),
            conn_max_age_s=_float(env, "HEADWATER_GATEWAY_CONN_MAX_AGE_S", 300.0, 1.0, 86400.0),
            conn_max_requests=_int(env, "HEADWATER_GATEWAY_CONN_MAX_REQUESTS", 10_000, 1, 10**9),
            conn_jitter=_float(env, "HEADWATER_GATEWAY_CONN_JITTER", 0.2, 0.0, 0.9),
            shutdown_timeout_s=_float(env, "HEADWATER_GATEWAY_SHUTDOWN_TIMEOUT_S", 20.0, 0.5, 600.0),
            registry_refresh_s=_float(env, "HEADWATER_GATEWAY_REGISTRY_REFRESH_S", 30.0, 0.5, 86400.0),
            registry_timeout_s=_float(env, "HEADWATER_GATEWAY_REGISTRY_TIMEOUT_S", 5.0, 0.1, 120.0),
            dedup_cache_size=_int(env, "HEADWATER_GATEWAY_DEDUP_CACHE_SIZE", 100_000, 0, 10**8),
            events_topic=_topic(env.get("HEADWATER_GATEWAY_EVENTS_TOPIC", "headwater.events")),
            topic_overrides=_overrides(env.get("HEADWATER_GATEWAY_TOPIC_OVERRIDES", "")),
            registry_lookups_per_s=_float(env, "HEADWATER_GATEWAY_REGISTRY_LOOKUPS_PER_S", 5.0, 0.0, 1e6),
            registry_lookup_burst=_int(env, "HEADWATER_GATEWAY_REGISTRY_LOOKUP_BURST", 20, 1, 10**6),
            negative_cache_size=_int(env, "HEADWATER_GATEWAY_NEGATIVE_CACHE_SIZE", 10_000, 1, 10**7),
            shared_dir=env.get("HEADWATER_GATEWAY_SHARED_DIR", ""),
            trusted_proxies=proxies,
            log_level=level,
            tls=tls,
            proxy_socket=env.get("HEADWATER_GATEWAY_PROXY_SOCKET", "").strip(),
            kafka_security=kafka_security,
            registry_access=registry_access,
        )
        if cfg.delivery_timeout_s >= cfg.transaction_timeout_s:
            raise ConfigError("HEADWATER_GATEWAY_DELIVERY_TIMEOUT_S must be below "
                              "HEADWATER_GATEWAY_TRANSACTION_TIMEOUT_S")
        if cfg.kafka_linger_ms >= cfg.delivery_timeout_s * 1000:  # librdkafka refuses to create the producer
            raise ConfigError("HEADWATER_GATEWAY_KAFKA_LINGER_MS must be below HEADWATER_GATEWAY_DELIVERY_TIMEOUT_S "
                              "(in ms)")
        return cfg


def _proxies(env: Mapping[str, str]) -> tuple[ServerTls | None, frozenset[str]]:
    """HTTPS settings and the certificate names of trusted proxies (which need a CA to verify them against)."""
    if env.get("HEADWATER_GATEWAY_TRUSTED_PROXIES", "").strip():
        raise ConfigError("HEADWATER_GATEWAY_TRUSTED_PROXIES (peer addresses) is no longer honoured: any local user "
                          "can bind an address. Name the proxies' TLS client certificates in "
                          "HEADWATER_GATEWAY_TRUSTED_PROXY_NAMES (with HEADWATER_GATEWAY_TLS_CLIENT_CA), or let the "
                          "proxy connect through HEADWATER_GATEWAY_PROXY_SOCKET")
    tls = server_tls(env, "HEADWATER_GATEWAY_", ConfigError)
    names = frozenset(n.strip() for n in env.get("HEADWATER_GATEWAY_TRUSTED_PROXY_NAMES", "").split(",")
                      if n.strip())
    if names and (tls is None or not tls.client_ca):
        raise ConfigError("HEADWATER_GATEWAY_TRUSTED_PROXY_NAMES needs HEADWATER_GATEWAY_TLS_CLIENT_CA (and "
                          "HEADWATER_GATEWAY_TLS_CERT/_KEY): a proxy proves its name with a client certificate")
    return tls, names


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in ("0", "1", "true", "false"):
        raise ConfigError(f"{name}={raw!r} is not 0, 1, true or false")
    return raw in ("1", "true")


COMPRESSIONS = ("zstd", "lz4", "snappy", "gzip", "none")


def _compression(env: Mapping[str, str]) -> str:
    value = env.get("HEADWATER_GATEWAY_KAFKA_COMPRESSION", "none").strip().lower()
    if value not in COMPRESSIONS:
        raise ConfigError(f"HEADWATER_GATEWAY_KAFKA_COMPRESSION={value!r} is not one of {', '.join(COMPRESSIONS)}")
    return value


_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _topic(name: str) -> str:
    if not _TOPIC.fullmatch(name) or name in (".", ".."):
        raise ConfigError(f"HEADWATER_GATEWAY_EVENTS_TOPIC={name!r} is not a valid Kafka topic name")
    return name


def _overrides(raw: str) -> tuple[tuple[str, str], ...]:
    """`type=topic,type=topic` -> ((type, topic), ...)."""
    pairs = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        event_type, sep, topic = (p.strip() for p in item.partition("="))
        if not sep or not _TYPE.fullmatch(event_type) or not _TOPIC.fullmatch(topic):
            raise ConfigError(f"HEADWATER_GATEWAY_TOPIC_OVERRIDES: {item!r} is not <event_type>=<topic>")
        pairs.append((event_type, topic))
    return tuple(pairs)


def _keys(env: Mapping[str, str]) -> KeyStore:
    keys_raw = env.get("HEADWATER_GATEWAY_WRITE_KEYS", "")
    keys_file = env.get("HEADWATER_GATEWAY_WRITE_KEYS_FILE", "")
    if keys_file:
        try:
            keys_raw = ",".join(filter(None, [keys_raw, Path(keys_file).read_text().replace("\n", ",")]))
        except OSError as exc:
            raise ConfigError(f"HEADWATER_GATEWAY_WRITE_KEYS_FILE={keys_file!r}: {exc}") from None
    try:
        keys = parse_keys(keys_raw)
    except ValueError as exc:
        raise ConfigError(f"HEADWATER_GATEWAY_WRITE_KEYS: {exc}") from None
    if not keys.sources():
        raise ConfigError("HEADWATER_GATEWAY_WRITE_KEYS (or _FILE) holds no write key")
    return keys


def _limits(env: Mapping[str, str]) -> Limits:
    return Limits(
        max_events=_int(env, "HEADWATER_GATEWAY_MAX_EVENTS", 40, 1, 100_000),
        max_body_bytes=_int(env, "HEADWATER_GATEWAY_MAX_BODY_BYTES", 1 << 20, 1024, 1 << 30),
        max_compressed_bytes=_int(env, "HEADWATER_GATEWAY_MAX_COMPRESSED_BYTES", 1 << 20, 1024, 1 << 30),
        max_event_bytes=_int(env, "HEADWATER_GATEWAY_MAX_EVENT_BYTES", 64 << 10, 256, 1 << 20),
        max_ratio=_int(env, "HEADWATER_GATEWAY_MAX_RATIO", 100, 1, 100_000),
        max_frames=_int(env, "HEADWATER_GATEWAY_MAX_FRAMES", 64, 1, 100_000),
        max_inflight_events=_int(env, "HEADWATER_GATEWAY_MAX_INFLIGHT_EVENTS", 20_000, 1, 10**8),
        max_inflight_bytes=_int(env, "HEADWATER_GATEWAY_MAX_INFLIGHT_BYTES", 64 << 20, 1 << 16, 1 << 40),
        source_events_per_s=_float(env, "HEADWATER_GATEWAY_SOURCE_EVENTS_PER_S", 0.0, 0.0, 1e9),
    )
