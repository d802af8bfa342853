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
| `REGISTRY_PRIMARY_URL` | | set: a read-only FOLLOWER of the primary at this http(s) base URL (no user-info) |
| `REGISTRY_PRIMARY_CA` | (system store) | CA bundle (PEM) that verifies an https primary's certificate |
| `REGISTRY_FORWARD_TIMEOUT_S` | `10` | bound on one write forwarded to the primary, connecting included (0.1-300) |
| `REGISTRY_FOLLOW_WAIT_S` | `5` | how long a forwarded registration waits for its id to arrive here (0-300) |

A follower replays `SCHEMAS_TOPIC` (there: the primary's topic as mirrored into this region, `a._schemas`), so ids
are the primary's; it never writes to Kafka and forwards every write to the primary (registry/follower.py).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from common.basic_auth import AuthConfigError, Users
from common.env import env_float, env_int
from common.kafka_security import KafkaSecurity, KafkaSecurityError
from common.tls import ServerTls, server_tls
from registry.access import ROLES, AccessPolicy
from registry.compat import normalize_level

LOOPBACK = ("127.0.0.1", "::1", "localhost")


class ConfigError(ValueError):
    """A registry environment variable is missing or unusable; the message names it."""


@dataclass(frozen=True)
class FollowerConfig:
    """A follower's link to its primary (REGISTRY_PRIMARY_URL and the settings that go with it)."""

    primary_url: str                  # http(s)://host[:port][/prefix], no trailing slash, no user-info
    primary_ca: str = ""              # "" : the system's trust store
    forward_timeout_s: float = 10.0
    follow_wait_s: float = 5.0


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
    follower: FollowerConfig | None = None  # None: the primary (writes to its topic)

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
            follower=_follower(env),
        )


def _follower(env: Mapping[str, str]) -> FollowerConfig | None:
    """REGISTRY_PRIMARY_URL and its settings; None (a primary) when the URL is unset."""
    raw = (env.get("REGISTRY_PRIMARY_URL") or "").strip()
    ca = (env.get("REGISTRY_PRIMARY_CA") or "").strip()
    timeout_s = env_float(env, "REGISTRY_FORWARD_TIMEOUT_S", 10.0, 0.1, 300.0, error=ConfigError)
    wait_s = env_float(env, "REGISTRY_FOLLOW_WAIT_S", 5.0, 0.0, 300.0, error=ConfigError)
    if not raw:
        if ca:
            raise ConfigError("REGISTRY_PRIMARY_CA is set but REGISTRY_PRIMARY_URL is not (only a follower forwards)")
        return None
    url = primary_url(raw)
    if ca:
        if not url.startswith("https://"):
            raise ConfigError("REGISTRY_PRIMARY_CA applies to an https REGISTRY_PRIMARY_URL only")
        try:
            ssl.create_default_context(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"REGISTRY_PRIMARY_CA={ca!r}: cannot load: {exc}") from None
    return FollowerConfig(url, ca, timeout_s, wait_s)


def primary_url(raw: str) -> str:
    """REGISTRY_PRIMARY_URL checked: http(s), a host, no user-info, query or fragment; without a trailing slash.

    Credentials never go in the URL: a follower passes each caller's own Authorization header through, and a URL
    is printed in logs and error messages. The refusal shows the URL with any user-info cut out."""
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number or out of range)
    except ValueError as exc:
        raise ConfigError(f"REGISTRY_PRIMARY_URL: {exc}") from None
    shown = raw if "@" not in parts.netloc else f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"REGISTRY_PRIMARY_URL={shown!r} must start with http:// or https://")
    if "@" in parts.netloc:
        raise ConfigError(f"REGISTRY_PRIMARY_URL={shown!r} must not carry user-info (credentials): a follower passes "
                          "each caller's own Authorization header to the primary")
    if not parts.hostname:
        raise ConfigError(f"REGISTRY_PRIMARY_URL={shown!r} names no host")
    if parts.query or parts.fragment:
        raise ConfigError(f"REGISTRY_PRIMARY_URL={shown!r} must not have a query or fragment")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


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
