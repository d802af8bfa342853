"""The stack's configuration: one frozen dataclass, read once from the environment and validated, that says how
many of each part run (the topology) and on which loopback ports."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from common.env import env_int
from common.envfile import state_dir
from common.ports import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
# The name of HAProxy's client certificate: the gateways believe X-Forwarded-For only from a connection showing it.
HAPROXY_CLIENT_NAME = "haproxy.headwater"


class ConfigError(ValueError):
    """A stack environment variable has a value that cannot be used; the message names it."""


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    return env_int(env, name, default, lo, hi, error=ConfigError)


@dataclass(frozen=True)
class Topology:
    """How many of each part run. Two presets (HEADWATER_TOPOLOGY): `single` (the default: one of each, no load
    balancer) and `cluster` (docs/cluster.md: three brokers, two registries, three gateways behind HAProxy and a
    Spark standalone master and worker). Several gateways or registries always sit behind HAProxy."""

    brokers: int = 1
    registries: int = 1
    gateways: int = 1
    haproxy: bool = False
    console: bool = True
    spark: bool = False
    # TLS on every hop, SASL/SCRAM + ACLs on Kafka (docs/security.md); off: PLAINTEXT Kafka and HTTP on loopback.
    secure: bool = False
    subscribe: int = 1  # subscription server instances (`subscribe/`); 0: none

    @property
    def name(self) -> str:
        return "single" if self == SINGLE else "cluster" if self == CLUSTER else "custom"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Topology:
        """What `to_json` wrote (or `cluster`, which earlier versions wrote for the cluster profile)."""
        if text.strip() == "cluster":
            return CLUSTER
        return cls(**json.loads(text))


SINGLE = Topology()
CLUSTER = Topology(brokers=3, registries=2, gateways=3, haproxy=True, console=True, spark=True, secure=True,
                   subscribe=2)
PRESETS = {"single": SINGLE, "cluster": CLUSTER}


def topology_from_env(env: Mapping[str, str]) -> Topology:
    """HEADWATER_TOPOLOGY's preset, then each count from its own variable (docs/local-stack.md, "Topology")."""
    name = (env.get("HEADWATER_TOPOLOGY") or "single").strip().lower()
    if name not in PRESETS:
        raise ConfigError(f"HEADWATER_TOPOLOGY={name!r} is not one of {', '.join(PRESETS)}")
    preset = PRESETS[name]
    gateways = _int(env, "GATEWAYS", preset.gateways, 1, 16)
    registries = _int(env, "HEADWATER_REGISTRIES", preset.registries, 1, 2)
    subscribe = _int(env, "HEADWATER_SUBSCRIBE_INSTANCES", preset.subscribe, 0, 8)
    several = gateways > 1 or registries > 1 or subscribe > 1
    haproxy = _int(env, "HEADWATER_HAPROXY", int(preset.haproxy or several), 0, 1) == 1
    if not haproxy and several:
        raise ConfigError("HEADWATER_HAPROXY=0 needs GATEWAYS=1, HEADWATER_REGISTRIES=1 and "
                          "HEADWATER_SUBSCRIBE_INSTANCES<=1 (several instances of a service sit behind HAProxy)")
    return Topology(
        brokers=_int(env, "HEADWATER_BROKERS", preset.brokers, 1, 9), registries=registries, gateways=gateways,
        haproxy=haproxy, console=_int(env, "HEADWATER_CONSOLES", int(preset.console), 0, 1) == 1,
        spark=_int(env, "HEADWATER_CLUSTER_SPARK", int(preset.spark), 0, 1) == 1, subscribe=subscribe,
        secure=_int(env, "HEADWATER_SECURE", int(preset.secure), 0, 1) == 1,
    )


def instance_name(role: str, index: int, count: int) -> str:
    """`kafka` for the only broker, `kafka-2` for the second of three: pid files, logs and status use it."""
    return role if count == 1 else f"{role}-{index}"


@dataclass(frozen=True)
class StackConfig:
    """Where the stack keeps its state, how many of each part run, and their ports.

    Every field has an environment variable (documented in docs/local-stack.md and docs/cluster.md):
    HEADWATER_STATE_DIR, HEADWATER_TOPOLOGY (and the counts: HEADWATER_BROKERS, HEADWATER_REGISTRIES, GATEWAYS,
    HEADWATER_HAPROXY, HEADWATER_CONSOLES, HEADWATER_CLUSTER_SPARK, HEADWATER_SUBSCRIBE_INSTANCES),
    HEADWATER_KAFKA_PORT, HEADWATER_KAFKA_CONTROLLER_PORT, HEADWATER_REGISTRY_PORT, HEADWATER_GATEWAY_PORT,
    HEADWATER_CONSOLE_PORT, HEADWATER_SUBSCRIBE_PORT, HEADWATER_CLUSTER_PORT_BASE, HEADWATER_EVENTS_PARTITIONS,
    HEADWATER_DEADLETTER_PARTITIONS,
    HEADWATER_AGGREGATES_PARTITIONS, HEADWATER_KAFKA_HEAP_MB, HEADWATER_KAFKA_FLUSH_MESSAGES,
    HEADWATER_START_TIMEOUT_S, HEADWATER_GATEWAY_WORKERS, HEADWATER_SPARK_WORKER_CORES,
    HEADWATER_SPARK_WORKER_MEMORY_MB.

    The public ports (`gateway_port`, `registry_port`) are what clients use: the only instance's, or HAProxy's
    frontends. One broker listens on HEADWATER_KAFKA_PORT; several, and instances behind HAProxy, on ports from
    HEADWATER_CLUSTER_PORT_BASE (brokers base+1.., controllers base+11.., registries base+21.., gateways base+31..,
    subscription servers base+41.., the brokers' internal listeners base+51.. (secure), HAProxy's stats base+99).
    """

    state_dir: Path
    topology: Topology = SINGLE
    broker_ports: tuple[int, ...] = (9092,)
    controller_ports: tuple[int, ...] = (9093,)
    internal_ports: tuple[int, ...] = (9094,)  # the brokers' own listener (secure topologies only)
    registry_ports: tuple[int, ...] = (8081,)
    gateway_ports: tuple[int, ...] = (8080,)
    subscribe_ports: tuple[int, ...] = (8082,)
    registry_port: int = 8081
    gateway_port: int = 8080
    subscribe_port: int = 8082
    console_port: int = 8090
    stats_port: int = 19099
    events_partitions: int = 6
    deadletter_partitions: int = 2
    aggregates_partitions: int = 2
    kafka_heap_mb: int = 1024
    # 0 = leave flushing to the OS (page cache); N = fsync every N messages on every topic (costly).
    kafka_flush_messages: int = 0
    start_timeout_s: int = 90
    gateway_workers: int = 2
    spark_worker_cores: int = 1
    spark_worker_memory: str = "1g"
    # HAProxy's limits per source address (docs/security.md): open connections, requests in 10 s.
    haproxy_max_conn_per_source: int = 256
    haproxy_max_requests_per_source: int = 20_000

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, topology: Topology | None = None) -> StackConfig:
        """Every value from `env` (default: the process's environment), never from anywhere else; `topology`, when
        given, instead of the counts the environment asks for (`down` stops what `up` recorded)."""
        env = os.environ if env is None else env
        topo = topology_from_env(env) if topology is None else topology
        state = state_dir(env)
        base = _int(env, "HEADWATER_CLUSTER_PORT_BASE", 19000, 1024, 65000)
        kafka_port = _int(env, "HEADWATER_KAFKA_PORT", 9092, 1, 65535)
        controller_port = _int(env, "HEADWATER_KAFKA_CONTROLLER_PORT", 9093, 1, 65535)
        registry_port = _int(env, "HEADWATER_REGISTRY_PORT", 8081, 1, 65535)
        gateway_port = _int(env, "HEADWATER_GATEWAY_PORT", 8080, 1, 65535)
        # like the console's: 8082 beside the default gateway port, else a free port kept in the state directory
        subscribe_port = _kept_port(env, "HEADWATER_SUBSCRIBE_PORT", 8082, state / "subscribe" / "port", gateway_port)
        several = topo.brokers > 1
        cfg = cls(
            state_dir=state, topology=topo,
            broker_ports=tuple(base + 1 + i for i in range(topo.brokers)) if several else (kafka_port,),
            controller_ports=tuple(base + 11 + i for i in range(topo.brokers)) if several else (controller_port,),
            internal_ports=(tuple(base + 51 + i for i in range(topo.brokers)) if several
                            else (_int(env, "HEADWATER_KAFKA_INTERNAL_PORT", 9094, 1, 65535),)),
            registry_ports=(tuple(base + 21 + i for i in range(topo.registries)) if topo.haproxy
                            else (registry_port,)),
            gateway_ports=tuple(base + 31 + i for i in range(topo.gateways)) if topo.haproxy else (gateway_port,),
            subscribe_ports=(tuple(base + 41 + i for i in range(topo.subscribe)) if topo.haproxy
                             else (subscribe_port,)),
            registry_port=registry_port, gateway_port=gateway_port, subscribe_port=subscribe_port,
            console_port=_console_port(env, state, gateway_port), stats_port=base + 99,
            events_partitions=_int(env, "HEADWATER_EVENTS_PARTITIONS", 6, 1, 1000),
            deadletter_partitions=_int(env, "HEADWATER_DEADLETTER_PARTITIONS", 2, 1, 1000),
            aggregates_partitions=_int(env, "HEADWATER_AGGREGATES_PARTITIONS", 2, 1, 1000),
            # Several brokers share one host: a smaller heap each.
            kafka_heap_mb=_int(env, "HEADWATER_KAFKA_HEAP_MB", 384 if several else 1024, 256, 65536),
            kafka_flush_messages=_int(env, "HEADWATER_KAFKA_FLUSH_MESSAGES", 0, 0, 1_000_000_000),
            start_timeout_s=_int(env, "HEADWATER_START_TIMEOUT_S", 90, 5, 3600),
            gateway_workers=_int(env, "HEADWATER_GATEWAY_WORKERS", 1 if topo.gateways > 1 else 2, 1, 64),
            spark_worker_cores=_int(env, "HEADWATER_SPARK_WORKER_CORES", 1, 1, 64),
            spark_worker_memory=f"{_int(env, 'HEADWATER_SPARK_WORKER_MEMORY_MB', 1024, 256, 65536)}m",
            haproxy_max_conn_per_source=_int(env, "HEADWATER_HAPROXY_MAX_CONN_PER_SOURCE", 256, 1, 100_000),
            haproxy_max_requests_per_source=_int(env, "HEADWATER_HAPROXY_MAX_REQUESTS_PER_SOURCE", 20_000, 1,
                                                 10_000_000),
        )
        cfg.check_ports()
        return cfg

    @classmethod
    def on_free_ports(cls, state_dir: Path, free_port: Callable[[], int], topology: Topology = SINGLE, *,
                      events_partitions: int = 6, heap_mb: int | None = None) -> StackConfig:
        """A stack in its own state directory on free ports, every one of them (the tests' and the benchmarks')."""
        def ports(n: int) -> tuple[int, ...]:
            return tuple(free_port() for _ in range(n))

        several = topology.brokers > 1
        brokers = ports(topology.brokers)
        registries = ports(topology.registries)
        gateways = ports(topology.gateways)
        subscribe = ports(max(1, topology.subscribe))
        public = (free_port(), free_port(), free_port()) if topology.haproxy else (registries[0], gateways[0],
                                                                                   subscribe[0])
        cfg = cls(
            state_dir=state_dir.resolve(), topology=topology, broker_ports=brokers,
            controller_ports=ports(topology.brokers), internal_ports=ports(topology.brokers),
            registry_ports=registries, gateway_ports=gateways, subscribe_ports=subscribe,
            registry_port=public[0], gateway_port=public[1], subscribe_port=public[2],
            console_port=free_port(), stats_port=free_port(),
            events_partitions=events_partitions, kafka_heap_mb=heap_mb or (384 if several else 1024),
            gateway_workers=1 if topology.gateways > 1 else 2,
        )
        cfg.check_ports()
        return cfg

    def check_ports(self) -> None:
        ports = [*self.broker_ports, *self.controller_ports, *self.registry_ports, *self.gateway_ports]
        if self.topology.secure:
            ports += self.internal_ports
        if self.topology.haproxy:
            ports += [self.registry_port, self.gateway_port, self.stats_port]
        if self.topology.console:
            ports.append(self.console_port)
        if self.topology.subscribe:
            ports += self.subscribe_ports[:self.topology.subscribe]
            if self.topology.haproxy:
                ports.append(self.subscribe_port)
        if len(set(ports)) != len(ports):
            raise ConfigError("HEADWATER_KAFKA_PORT, HEADWATER_KAFKA_CONTROLLER_PORT, HEADWATER_REGISTRY_PORT, "
                              "HEADWATER_GATEWAY_PORT, HEADWATER_CONSOLE_PORT, HEADWATER_SUBSCRIBE_PORT and the "
                              "instance ports from HEADWATER_CLUSTER_PORT_BASE must all differ")

    @property
    def replication_factor(self) -> int:
        return min(3, self.topology.brokers)

    @property
    def min_insync_replicas(self) -> int:
        """An acknowledged write is on two brokers when there are three (one alone never acknowledges)."""
        return min(2, self.replication_factor)

    @property
    def kafka_port(self) -> int:
        return self.broker_ports[0]

    @property
    def controller_port(self) -> int:
        return self.controller_ports[0]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.broker_ports)

    @property
    def scheme(self) -> str:
        return "https" if self.topology.secure else "http"

    @property
    def gateway_url(self) -> str:
        """`localhost` when secure: the name the certificates carry (and every client verifies)."""
        return f"{self.scheme}://{'localhost' if self.topology.secure else '127.0.0.1'}:{self.gateway_port}"

    @property
    def subscribe_url(self) -> str:
        """https through HAProxy in a secure topology (HAProxy terminates TLS; the servers listen on loopback)."""
        if self.topology.secure and self.topology.haproxy:
            return f"https://localhost:{self.subscribe_port}"
        return f"http://127.0.0.1:{self.subscribe_port}"

    @property
    def registry_url(self) -> str:
        return f"{self.scheme}://{'localhost' if self.topology.secure else '127.0.0.1'}:{self.registry_port}"

    @property
    def secrets_dir(self) -> Path:
        """Credentials (stack/secrets.py) and certificates (stack/certs.py), 0700."""
        return self.state_dir / "secrets"

    @property
    def tls_dir(self) -> Path:
        return self.secrets_dir / "tls"

    @property
    def jars_dir(self) -> Path:
        """Set-up puts Maven's copies here; shared by every state dir of this checkout."""
        return REPO_ROOT / ".headwater" / "jars"

    @property
    def data_dir(self) -> Path:
        return self.state_dir / "data"

    @property
    def conf_dir(self) -> Path:
        return self.state_dir / "conf"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def env_file(self) -> Path:
        return self.state_dir / "stack.env"

    @property
    def topology_file(self) -> Path:
        """Written by `up`, removed by `down`: what runs, so that `down` and `status` stop and show exactly that."""
        return self.state_dir / "topology"


def _console_port(env: Mapping[str, str], state: Path, gateway_port: int) -> int:
    """HEADWATER_CONSOLE_PORT; else 8090 beside the default gateway port; else (a stack on chosen ports) a free
    port, kept in <state>/console/port so that every later `up` finds the same one."""
    return _kept_port(env, "HEADWATER_CONSOLE_PORT", 8090, state / "console" / "port", gateway_port)


def _kept_port(env: Mapping[str, str], name: str, default: int, path: Path, gateway_port: int) -> int:
    """`name`; else `default` beside the default gateway port; else a free port kept in `path`."""
    if env.get(name) or gateway_port == 8080:
        return _int(env, name, default, 1, 65535)
    if path.exists():
        return int(path.read_text())
    port = free_port()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(port))
    return port
