"""The client's configuration: one frozen, validated dataclass, read once from arguments or the environment.

Every option is also an environment variable named `HEADWATER_<OPTION IN UPPER CASE>` (for example
`linger_s` -> `HEADWATER_LINGER_S`); `GATEWAY_URL` and `REGISTRY_URL` are accepted as aliases of
`HEADWATER_ENDPOINT` and `HEADWATER_REGISTRY_URL`; `HEADWATER_ENDPOINTS` lists several endpoints separated by commas.
The README lists every option with its default.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from ._exceptions import ConfigError

QUEUE_POLICIES = ("drop_newest", "drop_oldest", "block", "spill")
SPOOL_OVERFLOW_POLICIES = ("backpressure", "drop_oldest")
FSYNC_POLICIES = ("always", "never")
DURABILITIES = ("async", "sync")
WIRE_FORMATS = ("json", "avro")
COMPRESSIONS = ("zstd", "gzip", "identity")
GATEWAY_MAX_EVENTS = 40  # protocol.md section 5
ENV_ALIASES = {"endpoint": ("HEADWATER_ENDPOINT", "GATEWAY_URL"),
               "registry_url": ("HEADWATER_REGISTRY_URL", "REGISTRY_URL")}
_NOT_FROM_ENV = {"context", "on_delivery", "on_error", "transport"}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
MAX_IN_FLIGHT = 64
MAX_ENDPOINTS = 8


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """Every option of `Client`; see the README's option table for what each one does."""

    endpoint: str | None
    write_key: str
    endpoints: Sequence[str] = ()  # normalised to a tuple
    spool_dir: str | None = None
    registry_url: str | None = None
    wire_format: str = "json"
    compression: str = "zstd"
    max_batch_events: int = 40
    max_batch_bytes: int = 512 * 1024
    max_event_bytes: int = 64 * 1024
    linger_s: float = 0.05
    max_queue_events: int = 10_000
    queue_policy: str = "drop_newest"
    block_timeout_s: float = 0.1
    max_pending_batches: int = 1_000
    spool_max_bytes: int = 256 * 1024 * 1024
    spool_overflow: str = "backpressure"
    spool_fsync: str = "always"
    durability: str = "async"
    max_in_flight: int = 16
    request_timeout_s: float = 10.0
    retry_deadline_s: float = 300.0
    retry_base_s: float = 0.5
    retry_max_s: float = 30.0
    retry_refused_max_s: float = 2.0
    failover_after_s: float = 10.0
    failover_after_failures: int = 3
    failback_probe_s: float = 10.0
    connection_max_age_s: float = 300.0
    schema_refresh_s: float = 300.0
    exit_timeout_s: float = 5.0
    proxy: str | None = None
    ca_bundle: str | None = None
    disabled: bool = False
    debug: bool = False
    node_id: str = dataclasses.field(default_factory=socket.gethostname)
    context: Mapping[str, str] = dataclasses.field(default_factory=dict)
    on_delivery: Callable[..., None] | None = None
    on_error: Callable[..., None] | None = None
    transport: Any | None = None

    def __post_init__(self) -> None:
        self._check_endpoints()
        if not isinstance(self.write_key, str) or not self.write_key:
            raise ConfigError("write_key (HEADWATER_WRITE_KEY) must be a non-empty string")
        if self.registry_url is not None:
            _check_url("registry_url", self.registry_url)
        _check_choice("wire_format", self.wire_format, WIRE_FORMATS)
        _check_choice("compression", self.compression, COMPRESSIONS)
        _check_choice("queue_policy", self.queue_policy, QUEUE_POLICIES)
        _check_choice("spool_overflow", self.spool_overflow, SPOOL_OVERFLOW_POLICIES)
        _check_choice("spool_fsync", self.spool_fsync, FSYNC_POLICIES)
        _check_choice("durability", self.durability, DURABILITIES)
        _check_range("max_in_flight", self.max_in_flight, 1, MAX_IN_FLIGHT)
        _check_range("failover_after_failures", self.failover_after_failures, 1, 1_000_000)
        if self.proxy is not None:
            _check_url("proxy", self.proxy, credentials=True)
        if self.ca_bundle is not None:
            _check_readable("ca_bundle", self.ca_bundle)
        for name in ("disabled", "debug"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} ({env_name(name)}) must be True or False, got {getattr(self, name)!r}")
        _check_range("max_batch_events", self.max_batch_events, 1, GATEWAY_MAX_EVENTS)
        _check_range("max_batch_bytes", self.max_batch_bytes, 1024, 1 << 30)
        _check_range("max_event_bytes", self.max_event_bytes, 64, self.max_batch_bytes)
        _check_range("max_queue_events", self.max_queue_events, 1, 1 << 31)
        _check_range("max_pending_batches", self.max_pending_batches, 1, 1 << 31)
        _check_range("spool_max_bytes", self.spool_max_bytes, 1024, 1 << 50)
        for name in ("linger_s", "block_timeout_s", "exit_timeout_s", "failover_after_s"):
            _check_range(name, getattr(self, name), 0.0, 86_400.0)
        for name in ("request_timeout_s", "retry_deadline_s", "retry_base_s", "retry_max_s",
                     "retry_refused_max_s", "connection_max_age_s", "schema_refresh_s", "failback_probe_s"):
            _check_range(name, getattr(self, name), 0.001, 86_400.0 * 365)
        if self.wire_format == "avro" and self.registry_url is None:
            raise ConfigError("wire_format 'avro' needs registry_url (HEADWATER_REGISTRY_URL)")
        if self.durability == "sync" and self.spool_dir is None:
            raise ConfigError("durability 'sync' needs spool_dir (HEADWATER_SPOOL_DIR)")
        if self.spool_dir is not None and (not isinstance(self.spool_dir, str) or not self.spool_dir):
            raise ConfigError(f"spool_dir (HEADWATER_SPOOL_DIR) must be a non-empty path, got {self.spool_dir!r}")
        if self.queue_policy == "spill" and self.spool_dir is None:
            raise ConfigError("queue_policy 'spill' needs spool_dir (HEADWATER_SPOOL_DIR)")
        if not isinstance(self.node_id, str) or not self.node_id:
            raise ConfigError("node_id (HEADWATER_NODE_ID) must be a non-empty string")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in self.context.items()):
            raise ConfigError("context must map strings to strings")
        for name in ("on_delivery", "on_error"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise ConfigError(f"{name} must be callable")

    def _check_endpoints(self) -> None:
        """`endpoints` (ordered, primary first) or `endpoint`; afterwards both are set: `endpoint` is the first."""
        raw: object = self.endpoints
        if not isinstance(raw, (list, tuple)):
            raise ConfigError(f"endpoints (HEADWATER_ENDPOINTS) must be a list of URLs, got {self.endpoints!r}")
        urls = tuple(self.endpoints) or ((self.endpoint,) if self.endpoint is not None else ())
        if not urls:
            raise ConfigError("endpoint (HEADWATER_ENDPOINT or GATEWAY_URL) or endpoints (HEADWATER_ENDPOINTS) "
                              "is required")
        for url in urls:
            _check_url("endpoints" if self.endpoints else "endpoint", url)
        if len(urls) > MAX_ENDPOINTS or len({u.rstrip("/") for u in urls}) != len(urls):
            raise ConfigError(f"endpoints must be 1 to {MAX_ENDPOINTS} distinct URLs, got {list(urls)!r}")
        if len({u.split(":", 1)[0] for u in urls}) != 1:
            raise ConfigError(f"endpoints must all be http:// or all https://, got {list(urls)!r}")
        if self.endpoint is not None and self.endpoint != urls[0]:
            raise ConfigError(f"endpoint {self.endpoint!r} must be the first of endpoints {list(urls)!r} "
                              "(or be left out)")
        object.__setattr__(self, "endpoints", urls)
        object.__setattr__(self, "endpoint", urls[0])

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ClientConfig:
        """Build the config from `environ` (default `os.environ`); keyword arguments win over variables."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in _NOT_FROM_ENV:
                continue
            for var in ENV_ALIASES.get(f.name, (env_name(f.name),)):
                raw = env.get(var)
                if raw is not None and raw != "":
                    values[f.name] = _parse(var, raw, f.type)
                    break
        values.update(overrides)
        values.setdefault("endpoint", None)
        if values["endpoint"] is None and not values.get("endpoints"):
            raise ConfigError("HEADWATER_ENDPOINT or GATEWAY_URL (or HEADWATER_ENDPOINTS) is not set")
        for required in ("write_key",):
            if required not in values:
                names = " or ".join(ENV_ALIASES.get(required, (env_name(required),)))
                raise ConfigError(f"{names} is not set")
        return cls(**values)


def env_name(option: str) -> str:
    """The environment variable of an option: `HEADWATER_` + its name in upper case."""
    return "HEADWATER_" + option.upper()


def _parse(var: str, raw: str, annotation: str | Any) -> Any:
    kind = str(annotation)
    try:
        if kind == "int":
            return int(raw.replace("_", ""))
        if kind == "float":
            return float(raw)
        if kind.startswith("Sequence["):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        if kind == "bool":
            if raw.strip().lower() in _TRUE:
                return True
            if raw.strip().lower() in _FALSE:
                return False
            raise ValueError(raw)
    except ValueError:
        raise ConfigError(f"{var}={raw!r} is not a valid {kind}") from None
    return raw


def _check_url(name: str, value: object, *, credentials: bool = False) -> None:
    """An http(s) URL with a host and, if given, a numeric port in 1..65535; nothing else gets through.

    User-info (`user:password@`) is refused unless `credentials` (a proxy's login): the write key is the only
    credential a gateway or registry takes, and a password in a URL ends up in logs. No message repeats it.
    """
    shown = _without_userinfo(value) if isinstance(value, str) else value
    problem = f"{name} must be an http:// or https:// URL with a host, got {shown!r}"
    if not isinstance(value, str) or any(c.isspace() for c in value):
        raise ConfigError(problem)
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port  # ValueError for a non-numeric or out-of-range port
    except ValueError as exc:
        raise ConfigError(f"{problem} ({str(exc).replace(value, str(shown))})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0 or parts.query or parts.fragment:
        raise ConfigError(problem)
    if not credentials and "@" in parts.netloc:
        raise ConfigError(f"{name} must not carry credentials (user:password@), got {shown!r}: the write key is "
                          "the only credential (sent as Authorization: Bearer)")


def _without_userinfo(url: str) -> str:
    """`url` with any user-info replaced by `***` (for messages)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))  # as Go's and TypeScript's
    authority = rest[:end]
    if "@" not in authority:
        return url
    return f"{scheme}://***@{authority.rpartition('@')[2]}{rest[end:]}"


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} ({env_name(name)}) must be one of {', '.join(choices)}, got {value!r}")


def _check_readable(name: str, path: object) -> None:
    if not isinstance(path, str) or not path or not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise ConfigError(f"{name} ({env_name(name)}) must be a readable PEM file, got {path!r}")


def _check_range(name: str, value: object, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigError(f"{name} ({env_name(name)}) must be a number in [{low}, {high}], got {value!r}")
