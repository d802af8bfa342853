"""The stack's Python HTTP services (registries, gateways, subscription servers, the console): how each instance
starts, when it is ready, what it publishes."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from common.tls import client_context
from stack.certs import CertificateAuthority
from stack.config import HAPROXY_CLIENT_NAME, REPO_ROOT, StackConfig, instance_name
from stack.process import ManagedProcess, StartWatch
from stack.secrets import StackSecrets, kept_secret


class ServiceError(RuntimeError):
    """A service did not start or become ready; the message names its log file."""


@dataclass(frozen=True)
class HttpService:
    """A `python -m <module>` process listening on 127.0.0.1:<port>, ready when GET <ready_path> answers 200.

    `env` is added to the process's environment (on top of the stack's endpoints so far).
    """

    name: str
    module: str
    port: int
    ready_path: str
    env: Mapping[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    ca_file: str = ""  # set: the service serves HTTPS for `localhost`, checked against this CA

    def process(self, cfg: StackConfig) -> ManagedProcess:
        return ManagedProcess(self.name, cfg.run_dir / f"{self.name}.pid", f"-m {self.module}")

    def start(self, cfg: StackConfig, stack_env: Mapping[str, str]) -> bool:
        """Start unless running; wait until ready. True if started now."""
        proc = self.process(cfg)
        started = False
        if proc.pid() is None:
            env = {**_base_env(cfg), **stack_env, **self.env}
            proc.start([sys.executable, "-m", self.module, *self.args], cfg.logs_dir / f"{self.name}.log",
                       env=env, cwd=REPO_ROOT)
            started = True
        self.wait_ready(cfg, proc)
        return started

    def wait_ready(self, cfg: StackConfig, proc: ManagedProcess) -> None:
        """Until GET <ready_path> answers 200, as long as the service's log grows (HEADWATER_START_TIMEOUT_S of
        silence is a failed start)."""
        url = f"{'https://localhost' if self.ca_file else 'http://127.0.0.1'}:{self.port}{self.ready_path}"
        context = client_context(self.ca_file) if self.ca_file else None
        log = cfg.logs_dir / f"{self.name}.log"
        watch = StartWatch(cfg.start_timeout_s, [log])
        last = "no answer"
        while not watch.expired():
            if proc.pid() is None:
                raise ServiceError(f"{self.name} exited during start-up; see {cfg.logs_dir / (self.name + '.log')}")
            try:
                with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                    if resp.status == 200:
                        return
                    last = f"HTTP {resp.status}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.2)
        proc.stop(10)
        raise ServiceError(f"{self.name} not ready at {url}, and nothing logged for {cfg.start_timeout_s}s ({last}); "
                           f"see {log}")


def _base_env(cfg: StackConfig) -> dict[str, str]:
    """The caller's environment, with this stack's state directory (a service that reads it reads this stack's)."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", "HEADWATER_STATE_DIR": str(cfg.state_dir)}


def registry_service(cfg: StackConfig, index: int = 1) -> HttpService:
    """Registry `index` (`registry/`): stores schemas in the _schemas topic, ready once it has replayed it.

    Several instances share the `_schemas` topic and its transactional id, so writes through either are serialised
    by the log (a write fences the other instance's writer, which re-acquires it on its next write) and each
    instance serves reads from its own replay of the topic."""
    port = cfg.registry_ports[index - 1]
    name = instance_name("registry", index, cfg.topology.registries)

    def env() -> dict[str, str]:  # made when the instance starts (`down` and `status` create no secret)
        secrets = StackSecrets(cfg.secrets_dir)
        values = {"REGISTRY_HOST": "127.0.0.1", "REGISTRY_PORT": str(port)}
        if cfg.topology.secure:  # writes need credentials; HTTPS; its own Kafka principal
            values |= {"REGISTRY_USERS_FILE": str(secrets.registry_users_file()),
                       **_serving_tls(cfg, name, "REGISTRY_"), **secrets.kafka_env("registry", cfg.tls_dir / "ca.pem")}
        return values

    return HttpService(name=name, module="registry", port=port, ready_path="/ready", env=_Lazy(env),
                       ca_file=str(cfg.tls_dir / "ca.pem") if cfg.topology.secure else "")


def _serving_tls(cfg: StackConfig, name: str, prefix: str) -> dict[str, str]:
    """`<prefix>TLS_CERT` / `_KEY`: a certificate of the stack's CA for `localhost` (stack/certs.py)."""
    issued = CertificateAuthority(cfg.tls_dir).issue(name)
    return {f"{prefix}TLS_CERT": str(issued.cert), f"{prefix}TLS_KEY": str(issued.key)}


def client_env(cfg: StackConfig, principal: str) -> dict[str, str]:
    """A component's credentials: its registry user always, and in a secure topology its Kafka user and the CA."""
    secrets = StackSecrets(cfg.secrets_dir)
    env = secrets.registry_env(principal)
    if cfg.topology.secure:
        ca = cfg.tls_dir / "ca.pem"
        env |= {**secrets.kafka_env(principal, ca), "REGISTRY_SSL_CA_LOCATION": str(ca)}
    return env


def dev_write_key(cfg: StackConfig) -> str:
    """The stack's development write key, created once in <state>/gateway/dev-write-key (mode 0600).

    Only its SHA-256 reaches the gateway (HEADWATER_GATEWAY_WRITE_KEYS); the key itself goes to stack.env.
    """
    return kept_secret(cfg.state_dir / "gateway" / "dev-write-key", "hw_" + secrets.token_urlsafe(32))


def dev_read_key(cfg: StackConfig) -> str:
    """The stack's development read key (every stream), created once in <state>/subscribe/dev-read-key (mode 0600);
    only its SHA-256 reaches the subscription servers, the key itself goes to stack.env (HEADWATER_READ_KEY)."""
    return kept_secret(cfg.state_dir / "subscribe" / "dev-read-key", "hwr_" + secrets.token_urlsafe(32))


class _Lazy(Mapping[str, str]):
    """A mapping computed on first use, so that `down` and `status` (which never read a service's env or
    endpoints) do not create the development key as a side effect."""

    def __init__(self, make: Callable[[], dict[str, str]]) -> None:
        self._make = make
        self._value: dict[str, str] | None = None

    def _get(self) -> dict[str, str]:
        if self._value is None:
            self._value = self._make()
        return self._value

    def __getitem__(self, key: str) -> str:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def gateway_env(cfg: StackConfig, index: int = 1) -> dict[str, str]:
    """Instance `index`'s settings; behind HAProxy, HAProxy is its only trusted proxy, and among several instances
    each has its own transactional ids (or one instance's producers would fence another's) and its own
    committed-batch cache, as on separate hosts (a retry HAProxy sends to another instance is written again and
    removed downstream by event_id)."""
    digest = hashlib.sha256(dev_write_key(cfg).encode()).hexdigest()
    env = {"HEADWATER_GATEWAY_HOST": "127.0.0.1", "HEADWATER_GATEWAY_PORT": str(cfg.gateway_ports[index - 1]),
           "HEADWATER_GATEWAY_WRITE_KEYS": f"dev:{digest}", "HEADWATER_GATEWAY_WORKERS": str(cfg.gateway_workers),
           **client_env(cfg, "gateway")}
    if cfg.topology.secure:
        env |= _serving_tls(cfg, instance_name("gateway", index, cfg.topology.gateways), "HEADWATER_GATEWAY_")
        if cfg.topology.haproxy:  # X-Forwarded-For believed from HAProxy's client certificate only
            env |= {"HEADWATER_GATEWAY_TLS_CLIENT_CA": str(cfg.tls_dir / "ca.pem"),
                    "HEADWATER_GATEWAY_TRUSTED_PROXY_NAMES": HAPROXY_CLIENT_NAME}
    if cfg.topology.gateways > 1:
        env["HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX"] = f"headwater-gateway-{socket.gethostname()}-g{index}"
        env["HEADWATER_GATEWAY_SHARED_DIR"] = str(cfg.state_dir / "gateway" / f"instance-{index}")
    return env


def gateway_service(cfg: StackConfig, index: int = 1, extra_env: Mapping[str, str] | None = None) -> HttpService:
    """Gateway `index` (`gateway/`): ready once its producer and schema cache are; `extra_env` overrides settings
    (the tests' timeouts)."""
    def env() -> dict[str, str]:
        values = {**gateway_env(cfg, index), **(extra_env or {})}
        if "HEADWATER_GATEWAY_SHARED_DIR" in values:
            os.makedirs(values["HEADWATER_GATEWAY_SHARED_DIR"], exist_ok=True)
        return values

    return HttpService(name=instance_name("gateway", index, cfg.topology.gateways), module="gateway",
                       port=cfg.gateway_ports[index - 1], ready_path="/readyz",
                       env=_Lazy(env), ca_file=str(cfg.tls_dir / "ca.pem") if cfg.topology.secure else "")


def console_service(cfg: StackConfig) -> HttpService:
    """The operator's console (`console/`): a read-only page on loopback, ready once it serves /healthz; it reads
    every gateway instance's /metrics (behind HAProxy, one scrape of the frontend would see one instance)."""
    host = "https://localhost" if cfg.topology.secure else "http://127.0.0.1"
    gateways = ",".join(f"{host}:{p}" for p in cfg.gateway_ports)
    secure = {"HEADWATER_CONSOLE_CA_BUNDLE": str(cfg.tls_dir / "ca.pem")} if cfg.topology.secure else {}
    return HttpService(name="console", module="console", port=cfg.console_port, ready_path="/healthz",
                       env=_Lazy(lambda: {"HEADWATER_CONSOLE_HOST": "127.0.0.1",
                                          "HEADWATER_CONSOLE_PORT": str(cfg.console_port),
                                          "HEADWATER_CONSOLE_GATEWAYS": gateways,
                                          "HEADWATER_PIPELINE_DIR": str(cfg.state_dir / "pipeline"), **secure,
                                          **client_env(cfg, "console")}))


def subscribe_service(cfg: StackConfig, index: int = 1) -> HttpService:
    """Subscription server `index` (`subscribe/`): pushes streams to HTTP clients; ready once Kafka answers."""
    def env() -> dict[str, str]:
        digest = hashlib.sha256(dev_read_key(cfg).encode()).hexdigest()
        return {"HEADWATER_SUBSCRIBE_HOST": "127.0.0.1",
                "HEADWATER_SUBSCRIBE_PORT": str(cfg.subscribe_ports[index - 1]),
                "HEADWATER_SUBSCRIBE_READ_KEYS": f"dev:{digest}:*", **client_env(cfg, "subscribe")}

    return HttpService(name=instance_name("subscribe", index, cfg.topology.subscribe), module="subscribe",
                       port=cfg.subscribe_ports[index - 1], ready_path="/readyz", env=_Lazy(env))


def subscribers(cfg: StackConfig) -> list[HttpService]:
    return [subscribe_service(cfg, i + 1) for i in range(cfg.topology.subscribe)]


def registries(cfg: StackConfig) -> list[HttpService]:
    return [registry_service(cfg, i + 1) for i in range(cfg.topology.registries)]


def gateways(cfg: StackConfig, extra_env: Mapping[str, str] | None = None) -> list[HttpService]:
    return [gateway_service(cfg, i + 1, extra_env) for i in range(cfg.topology.gateways)]


def services(cfg: StackConfig) -> list[HttpService]:
    """Every service instance `up` starts after Kafka, in order (`down` stops them in reverse order)."""
    return [*registries(cfg), *gateways(cfg), *subscribers(cfg),
            *([console_service(cfg)] if cfg.topology.console else [])]
