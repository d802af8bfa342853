"""The console's settings: one frozen dataclass read once from the environment (stack.env's names) and validated.

| variable | default | meaning |
| --- | --- | --- |
| `HEADWATER_CONSOLE_HOST` | `127.0.0.1` | address to listen on; beyond loopback a users file and TLS are required |
| `HEADWATER_CONSOLE_USERS_FILE` | | `name:view:hash` lines (common/basic_auth.py): who may see the page |
| `HEADWATER_CONSOLE_TLS_CERT`, `HEADWATER_CONSOLE_TLS_KEY` | | serve HTTPS with this certificate chain and key |
| `HEADWATER_CONSOLE_PLAIN_HTTP` | `0` | `1`: serve plain HTTP beyond loopback (a TLS-terminating proxy in front) |
| `HEADWATER_CONSOLE_CA_BUNDLE` | `HEADWATER_CA_BUNDLE` | CA of https gateways (empty: the system store) |
| `KAFKA_SECURITY_PROTOCOL`, `KAFKA_SASL_*`, ... | `PLAINTEXT` | its Kafka principal (common/kafka_security.py) |
| `REGISTRY_BASIC_AUTH_USER_INFO_FILE`, ... | | its registry credentials (common/registry_access.py) |
| `HEADWATER_CONSOLE_PORT` | `8090` | port to listen on |
| `KAFKA_BOOTSTRAP` | `127.0.0.1:9092` | the Kafka cluster (offsets, aggregates and dead-letter topics) |
| `REGISTRY_URL` | `http://127.0.0.1:8081` | the registry (health; writer schemas of the aggregates topic) |
| `HEADWATER_CONSOLE_GATEWAYS` | `GATEWAY_URL` | comma-separated gateway base URLs whose `/metrics` are read |
| `EVENTS_TOPIC`, `DEADLETTER_TOPIC`, `AGGREGATES_TOPIC` | `headwater.events`, ... | the stack's topics |
| `HEADWATER_PIPELINE_DIR` | `<state dir>/pipeline` | the pipeline's output root (checkpoint offsets, `loss_audit`) |
| `HEADWATER_CONSOLE_POLL_S` | `2` | seconds between two samples |
| `SUBSCRIBE_URL` | none | the subscription server the live panel relays (console/live.py) |
| `HEADWATER_CONSOLE_READ_KEY` | `HEADWATER_READ_KEY` | the read key the live panel uses (never sent to the page) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.basic_auth import AuthConfigError, Users
from common.env import env_float, env_int
from common.envfile import pipeline_dir
from common.kafka_security import KafkaSecurity, KafkaSecurityError
from common.registry_access import RegistryAccess
from common.tls import ServerTls, ca_file, server_tls


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
    users_file: str = ""  # empty: no authentication (allowed on loopback only)
    tls: ServerTls | None = None
    ca_bundle: str = ""
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    registry_access: RegistryAccess = field(default_factory=RegistryAccess)
    subscribe_url: str = ""
    read_key: str = field(default="", repr=False)  # a secret: never in a repr or a log line

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
            subscribe_url=(env.get("SUBSCRIBE_URL") or "").rstrip("/"),
            read_key=env.get("HEADWATER_CONSOLE_READ_KEY") or env.get("HEADWATER_READ_KEY") or "",
            **_security(env, env.get("HEADWATER_CONSOLE_HOST") or d.host),
        )


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _security(env: Mapping[str, str], host: str) -> dict[str, Any]:
    """Beyond loopback the page needs a users file, and TLS unless HEADWATER_CONSOLE_PLAIN_HTTP=1 says a proxy
    in front terminates it; credentials for Kafka and the registry, CA bundle for https gateways."""
    users_file = (env.get("HEADWATER_CONSOLE_USERS_FILE") or "").strip()
    tls = server_tls(env, "HEADWATER_CONSOLE_", ConfigError)
    plain = (env.get("HEADWATER_CONSOLE_PLAIN_HTTP") or "0").strip() == "1"
    if host not in LOOPBACK and not users_file:
        raise ConfigError(f"HEADWATER_CONSOLE_HOST={host} is beyond loopback: set HEADWATER_CONSOLE_USERS_FILE "
                          "(who may see the page)")
    if host not in LOOPBACK and tls is None and not plain:
        raise ConfigError(f"HEADWATER_CONSOLE_HOST={host} is beyond loopback: set HEADWATER_CONSOLE_TLS_CERT and "
                          "_KEY (or HEADWATER_CONSOLE_PLAIN_HTTP=1 behind a TLS-terminating proxy)")
    try:
        if users_file:
            Users(Path(users_file), frozenset({"view"}))
        bundle_var = "HEADWATER_CONSOLE_CA_BUNDLE" if env.get("HEADWATER_CONSOLE_CA_BUNDLE") else "HEADWATER_CA_BUNDLE"
        return {"users_file": users_file, "tls": tls, "ca_bundle": ca_file(env, bundle_var, "", ConfigError),
                "kafka_security": KafkaSecurity.from_env(env, "CONSOLE"),
                "registry_access": RegistryAccess.from_env(env, "CONSOLE")}
    except (AuthConfigError, KafkaSecurityError) as exc:
        raise ConfigError(f"{exc}") from None
