"""The cluster profile's configuration: how many of each part, on which loopback ports; read once from the env."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from common.env import env_int
from stack.config import REPO_ROOT, ConfigError, StackConfig

BROKERS = 3
REGISTRIES = 2
# HAProxy connects to the gateways from this loopback address, the only one they trust for X-Forwarded-For.
HAPROXY_SOURCE = "127.0.0.2"


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    return env_int(env, name, default, lo, hi, error=ConfigError)


@dataclass(frozen=True)
class ClusterConfig:
    """Ports of every process of the profile and its sizes (docs/cluster.md, "Ports" and "Variables").

    Public ports (what SDKs, the load test and the demo use): HAProxy's gateway frontend (`gateway_port`,
    HEADWATER_GATEWAY_PORT, 8080 as in the single-node stack) and its registry frontend (`registry_port`,
    HEADWATER_REGISTRY_PORT, 8081). Internal ports start at HEADWATER_CLUSTER_PORT_BASE (19000): brokers
    base+1.., controllers base+11.., registries base+21.., gateways base+31.., HAProxy's stats base+99.
    """

    stack: StackConfig
    broker_ports: tuple[int, ...]
    controller_ports: tuple[int, ...]
    registry_ports: tuple[int, ...]
    gateway_ports: tuple[int, ...]
    gateway_port: int = 8080
    registry_port: int = 8081
    stats_port: int = 19099
    gateway_workers: int = 1
    replication_factor: int = 3
    min_insync_replicas: int = 2
    spark: bool = True
    spark_worker_cores: int = 1
    spark_worker_memory: str = "1g"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClusterConfig:
        env = os.environ if env is None else env
        stack = StackConfig.from_env({**env, "HEADWATER_KAFKA_HEAP_MB": env.get("HEADWATER_KAFKA_HEAP_MB", "384")})
        base = _int(env, "HEADWATER_CLUSTER_PORT_BASE", 19000, 1024, 65000)
        gateways = _int(env, "GATEWAYS", 3, 1, 16)
        return cls(
            stack=stack,
            broker_ports=tuple(base + 1 + i for i in range(BROKERS)),
            controller_ports=tuple(base + 11 + i for i in range(BROKERS)),
            registry_ports=tuple(base + 21 + i for i in range(REGISTRIES)),
            gateway_ports=tuple(base + 31 + i for i in range(gateways)),
            gateway_port=stack.gateway_port,
            registry_port=stack.registry_port,
            stats_port=base + 99,
            gateway_workers=_int(env, "HEADWATER_GATEWAY_WORKERS", 1, 1, 64),
            spark=_int(env, "HEADWATER_CLUSTER_SPARK", 1, 0, 1) == 1,
            spark_worker_cores=_int(env, "HEADWATER_SPARK_WORKER_CORES", 1, 1, 64),
            spark_worker_memory=f"{_int(env, 'HEADWATER_SPARK_WORKER_MEMORY_MB', 1024, 256, 65536)}m",
        )

    @classmethod
    def on_free_ports(cls, state_dir: Path, free_port: Callable[[], int], *, gateways: int = 3,
                      events_partitions: int = 6, heap_mb: int = 384) -> ClusterConfig:
        """A profile in its own state directory on free ports (the tests' and the benchmark's)."""
        stack = StackConfig.from_env({
            "HEADWATER_STATE_DIR": str(state_dir), "HEADWATER_KAFKA_PORT": str(free_port()),
            "HEADWATER_KAFKA_CONTROLLER_PORT": str(free_port()), "HEADWATER_REGISTRY_PORT": str(free_port()),
            "HEADWATER_GATEWAY_PORT": str(free_port()), "HEADWATER_EVENTS_PARTITIONS": str(events_partitions),
            "HEADWATER_KAFKA_HEAP_MB": str(heap_mb),
        })
        return cls(
            stack=stack,
            broker_ports=tuple(free_port() for _ in range(BROKERS)),
            controller_ports=tuple(free_port() for _ in range(BROKERS)),
            registry_ports=tuple(free_port() for _ in range(REGISTRIES)),
            gateway_ports=tuple(free_port() for _ in range(gateways)),
            gateway_port=stack.gateway_port, registry_port=stack.registry_port, stats_port=free_port(), spark=False,
        )

    def with_stack(self, **changes: object) -> ClusterConfig:
        return replace(self, stack=replace(self.stack, **changes))  # type: ignore[arg-type]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.broker_ports)

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    @property
    def state_dir(self) -> Path:
        return self.stack.state_dir

    @property
    def run_dir(self) -> Path:
        return self.stack.run_dir / "cluster"

    @property
    def logs_dir(self) -> Path:
        return self.stack.logs_dir / "cluster"

    @property
    def conf_dir(self) -> Path:
        return self.stack.state_dir / "conf" / "cluster"

    @property
    def data_dir(self) -> Path:
        return self.stack.state_dir / "data" / "cluster"

    @property
    def marker_file(self) -> Path:
        """Present while the cluster profile is up: `down` and `status` know which topology runs."""
        return self.stack.state_dir / "topology"


TEMPLATES = REPO_ROOT / "stack" / "conf"
