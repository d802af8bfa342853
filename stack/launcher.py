"""Starts the stack of any topology in order (brokers, topics, registries, HAProxy, schemas, gateways, subscription
servers, console, Spark), records its endpoints in stack.env, and stops it in reverse; also the rolling restart of
the gateways."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from common.envfile import write_env
from common.registry_client import RegistryClient, RegistryClientError
from schemas.catalog import CatalogError, load_catalog
from schemas.register import register_catalog
from stack.config import ConfigError, StackConfig, Topology
from stack.haproxy import HAProxy
from stack.kafka import Brokers, admin_settings
from stack.process import ManagedProcess
from stack.secrets import StackSecrets
from stack.security import provision
from stack.services import (
    ServiceError,
    console_service,
    dev_read_key,
    dev_write_key,
    gateway_service,
    registry_service,
    subscribe_service,
)
from stack.topics import (
    AGGREGATES_TOPIC,
    DEADLETTER_TOPIC,
    EVENTS_TOPIC,
    SCHEMAS_TOPIC,
    TopicSpec,
    ensure_topics,
    topic_specs,
)

if TYPE_CHECKING:
    from stack.spark_standalone import SparkStandalone

T = TypeVar("T")


@dataclass
class UpReport:
    env: dict[str, str]
    started: list[str]
    created_topics: list[str]
    seconds: float


def running_topology(cfg: StackConfig) -> Topology | None:
    """The topology `up` recorded in this state directory, or None when nothing was started."""
    try:
        return Topology.from_json(cfg.topology_file.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{cfg.topology_file} is unreadable ({exc}); delete it if nothing runs") from None


def _parallel(fn: Callable[[int], T], indexes: Sequence[int]) -> list[T]:
    """`fn` of every index at once (each instance's start is mostly waiting: a JVM, a replay of `_schemas`)."""
    with concurrent.futures.ThreadPoolExecutor(max(1, len(indexes))) as pool:
        return list(pool.map(fn, indexes))


class Stack:
    """Every process of one state directory; `gateway_env` adds settings to every gateway (the tests' timeouts)."""

    def __init__(self, cfg: StackConfig, gateway_env: Mapping[str, str] | None = None) -> None:
        self.cfg = cfg
        self.kafka = Brokers(cfg)
        self.haproxy = HAProxy(cfg)
        self.secrets = StackSecrets(cfg.secrets_dir)
        self.gateway_env = dict(gateway_env or {})

    def spark(self) -> SparkStandalone:
        """The Spark standalone master and worker of this state directory (stack/spark_standalone.py; imported here:
        it imports pyspark, which nothing else of `python -m stack` needs)."""
        from stack.spark_standalone import SparkStandalone  # noqa: PLC0415

        return SparkStandalone(self.cfg.state_dir, worker_cores=self.cfg.spark_worker_cores,
                               worker_memory=self.cfg.spark_worker_memory)

    def registry_process(self, index: int) -> ManagedProcess:
        return registry_service(self.cfg, index).process(self.cfg)

    def gateway_process(self, index: int) -> ManagedProcess:
        return gateway_service(self.cfg, index).process(self.cfg)

    def endpoints(self) -> dict[str, str]:
        env = {} if self.cfg.topology.name == "single" else {"HEADWATER_TOPOLOGY": self.cfg.topology.name}
        return {**env, "KAFKA_BOOTSTRAP": self.cfg.bootstrap, "EVENTS_TOPIC": EVENTS_TOPIC,
                "DEADLETTER_TOPIC": DEADLETTER_TOPIC, "SCHEMAS_TOPIC": SCHEMAS_TOPIC,
                "AGGREGATES_TOPIC": AGGREGATES_TOPIC, "REGISTRY_URL": self.cfg.registry_url}

    def topics(self) -> list[TopicSpec]:
        """The topics `up` creates (a follower region of the `regions` profile leaves out `_schemas`)."""
        return topic_specs(self.cfg)

    # --- up / down / status ----------------------------------------------------------------------------------
    def up(self) -> UpReport:
        t0 = time.monotonic()
        topo = self.cfg.topology
        self.cfg.topology_file.parent.mkdir(parents=True, exist_ok=True)
        self.cfg.topology_file.write_text(topo.to_json() + "\n")
        started = self.kafka.start()
        if topo.secure:  # every component's SCRAM user and ACLs, as the administrator (idempotent)
            provision(self.cfg.bootstrap, self.secrets, self.cfg.tls_dir / "ca.pem")
        created = ensure_topics(self.cfg.bootstrap, self.topics(), timeout_s=60,
                                replication_factor=self.cfg.replication_factor, client=admin_settings(self.cfg))
        self.kafka.warm_up_transactions()
        env = self.endpoints()
        indexes = range(1, topo.registries + 1)
        fresh = _parallel(lambda i: registry_service(self.cfg, i).start(self.cfg, env), indexes)
        started += [registry_service(self.cfg, i).name for i, new in zip(indexes, fresh, strict=True) if new]
        if topo.haproxy:
            if self.haproxy.start():
                started.append("haproxy")
            self.haproxy.wait_servers_up("registries", topo.registries)
        self.register_schemas()
        started += self.start_gateways(env)
        env.update({"GATEWAY_URL": self.cfg.gateway_url, "HEADWATER_WRITE_KEY": dev_write_key(self.cfg)})
        if topo.haproxy:
            env["HAPROXY_STATS_URL"] = f"http://127.0.0.1:{self.cfg.stats_port}/stats"
        if topo.subscribe:
            started += self.start_subscribers(env)
            env.update({"SUBSCRIBE_URL": self.cfg.subscribe_url, "HEADWATER_READ_KEY": dev_read_key(self.cfg)})
        if topo.console:
            console = console_service(self.cfg)
            if console.start(self.cfg, env):
                started.append(console.name)
            env["CONSOLE_URL"] = f"http://127.0.0.1:{self.cfg.console_port}"
        env.update(self.start_spark())
        env.update(self.tools_env())
        write_env(self.cfg.env_file, env)  # mode 0600: it holds the write key
        return UpReport(env, started, created, time.monotonic() - t0)

    def tools_env(self) -> dict[str, str]:
        """stack.env's credentials for the commands run from a shell (file paths, each tool its own principal) and,
        when secure, the CA every client checks the stack's certificates with."""
        if not self.cfg.topology.secure:
            return self.secrets.tools_env(None)
        ca = str(self.cfg.tls_dir / "ca.pem")
        return {**self.secrets.tools_env(self.cfg.tls_dir / "ca.pem"), "HEADWATER_CA_BUNDLE": ca,
                "REGISTRY_SSL_CA_LOCATION": ca, "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SSL_CA_LOCATION": ca}

    def registry_admin(self) -> RegistryClient:
        """The registry as the stack's administrator (the only registry user that may change levels)."""
        ca = str(self.cfg.tls_dir / "ca.pem") if self.cfg.topology.secure else ""
        return RegistryClient(self.cfg.registry_url, 60.0, credentials=self.secrets.admin_registry_credentials(),
                              ca_file=ca)

    def register_schemas(self) -> None:
        """Set each subject's compatibility and register every schema of schemas/ (idempotent), so the gateways
        find them."""
        try:
            register_catalog(self.registry_admin(), load_catalog())
        except (RegistryClientError, CatalogError) as exc:
            raise ServiceError(f"registering schemas/ at {self.cfg.registry_url} failed: {exc}") from exc

    def start_gateways(self, env: Mapping[str, str]) -> list[str]:
        """Start every gateway not running (in parallel: each waits for its producer and schemas)."""
        todo = [i for i in range(1, self.cfg.topology.gateways + 1) if self.gateway_process(i).pid() is None]
        dev_write_key(self.cfg)  # created once here, not by the parallel starts below
        _parallel(lambda i: self.start_gateway(i, env), todo)
        if self.cfg.topology.haproxy:
            self.haproxy.wait_servers_up("gateways", self.cfg.topology.gateways)
        return [gateway_service(self.cfg, i).name for i in todo]

    def start_subscribers(self, env: Mapping[str, str]) -> list[str]:
        """Start every subscription server not running (each needs Kafka and the registry only)."""
        todo = [i for i in range(1, self.cfg.topology.subscribe + 1)
                if subscribe_service(self.cfg, i).process(self.cfg).pid() is None]
        dev_read_key(self.cfg)  # created once here, not by the parallel starts below
        _parallel(lambda i: subscribe_service(self.cfg, i).start(self.cfg, env), todo)
        if self.cfg.topology.haproxy:
            self.haproxy.wait_servers_up("subscribers", self.cfg.topology.subscribe)
        return [subscribe_service(self.cfg, i).name for i in todo]

    def start_registry(self, index: int) -> None:
        registry_service(self.cfg, index).start(self.cfg, self.endpoints())
        if self.cfg.topology.haproxy:
            self.haproxy.wait_servers_up("registries", self.cfg.topology.registries)

    def start_gateway(self, index: int, env: Mapping[str, str] | None = None) -> None:
        gateway_service(self.cfg, index, self.gateway_env).start(self.cfg, dict(env or self.endpoints()))

    def start_spark(self) -> dict[str, str]:
        """Start the Spark master and worker (if the topology has them); their URLs for stack.env."""
        if not self.cfg.topology.spark:
            return {}
        from stack.spark_standalone import SparkClusterError  # noqa: PLC0415

        spark = self.spark()
        try:
            spark.start()
        except SparkClusterError as exc:
            raise ServiceError(f"spark standalone: {exc}") from exc
        return {"SPARK_MASTER_URL": spark.master_url, "SPARK_MASTER_UI_URL": spark.master_ui_url}

    def down(self) -> list[str]:
        topo = self.cfg.topology
        stopped: list[str] = []
        if topo.spark:
            spark = self.spark()
            stopped += [name for name, up in spark.running().items() if up]
            spark.stop()
        if topo.console:
            stopped += ["console"] if console_service(self.cfg).process(self.cfg).stop() else []
        stopped += [subscribe_service(self.cfg, i).name for i in range(topo.subscribe, 0, -1)
                    if subscribe_service(self.cfg, i).process(self.cfg).stop(15)]
        stopped += [gateway_service(self.cfg, i).name for i in range(topo.gateways, 0, -1)
                    if self.gateway_process(i).stop(30)]
        if self.haproxy.stop():
            stopped.append("haproxy")
        stopped += [registry_service(self.cfg, i).name for i in range(topo.registries, 0, -1)
                    if self.registry_process(i).stop(15 if topo.haproxy else 30)]
        stopped += self.kafka.stop(60 if topo.brokers == 1 else 20)
        self.cfg.topology_file.unlink(missing_ok=True)
        self.cfg.env_file.unlink(missing_ok=True)
        return stopped

    def status(self) -> dict[str, bool]:
        topo = self.cfg.topology
        status = {n.name: n.running() for n in self.kafka.nodes}
        status.update({registry_service(self.cfg, i).name: self.registry_process(i).pid() is not None
                       for i in range(1, topo.registries + 1)})
        status.update({gateway_service(self.cfg, i).name: self.gateway_process(i).pid() is not None
                       for i in range(1, topo.gateways + 1)})
        status.update({subscribe_service(self.cfg, i).name: subscribe_service(self.cfg, i).process(self.cfg).pid()
                       is not None for i in range(1, topo.subscribe + 1)})
        if topo.haproxy:
            status["haproxy"] = self.haproxy.running()
        if topo.console:
            status["console"] = console_service(self.cfg).process(self.cfg).pid() is not None
        if topo.spark:
            status.update(self.spark().running())
        return status

    # --- operations --------------------------------------------------------------------------------------------
    def restart_gateway(self, index: int, drain_timeout_s: float = 30.0) -> None:
        """Take gateway `index` out of HAProxy (drain: no new connections), SIGTERM it (it finishes what it holds),
        start it again, and put it back once its health check passes."""
        server = f"gateways/gateway-{index}"
        self.haproxy.set_state(server, "drain")
        self.haproxy.wait_idle(server, drain_timeout_s)
        self.gateway_process(index).stop(drain_timeout_s + 30)
        self.start_gateway(index)
        self.haproxy.set_state(server, "ready")
        self.haproxy.wait_servers_up("gateways", self.cfg.topology.gateways)

    def rolling_restart(self) -> None:
        for i in range(1, self.cfg.topology.gateways + 1):
            self.restart_gateway(i)
