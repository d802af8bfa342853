"""Starts the cluster profile in order (brokers, topics, registries, schemas, gateways, HAProxy), writes stack.env
pointing at HAProxy and all three brokers, and stops it in reverse; also the rolling restart of the gateways."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from common.envfile import write_env
from common.registry_client import RegistryClient, RegistryClientError
from schemas.catalog import CatalogError, load_catalog
from schemas.register import register_catalog
from stack.cluster.brokers import Brokers
from stack.cluster.config import ClusterConfig
from stack.cluster.haproxy import HAProxy
from stack.cluster.services import gateway_instance, registry_instance
from stack.process import ManagedProcess
from stack.services import ServiceError, dev_write_key
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


@dataclass
class ClusterReport:
    env: dict[str, str]
    started: list[str]
    created_topics: list[str]
    seconds: float


def replicated_specs(cfg: ClusterConfig, replication_factor: int | None = None) -> list[TopicSpec]:
    """The single-node topics with the cluster's min.insync.replicas (RF comes with the creation call)."""
    rf = cfg.replication_factor if replication_factor is None else replication_factor
    isr = str(min(cfg.min_insync_replicas, rf))
    return [TopicSpec(s.name, s.partitions, {**s.config, "min.insync.replicas": isr}) for s in topic_specs(cfg.stack)]


class Cluster:
    """Every process of one cluster profile; `gateway_env` adds settings to every gateway (the tests' timeouts)."""

    def __init__(self, cfg: ClusterConfig, gateway_env: Mapping[str, str] | None = None, *,
                 with_spark: bool = False) -> None:
        self.cfg = cfg
        self.brokers = Brokers(cfg)
        self.haproxy = HAProxy(cfg)
        self.gateway_env = dict(gateway_env or {})
        self.with_spark = with_spark

    def spark(self) -> SparkStandalone:
        """The Spark standalone master and worker of this state directory (stack/spark_standalone.py; imported here:
        it imports pyspark, which nothing else of `python -m stack` needs)."""
        from stack.spark_standalone import SparkStandalone  # noqa: PLC0415

        return SparkStandalone(self.cfg.state_dir, worker_cores=self.cfg.spark_worker_cores,
                               worker_memory=self.cfg.spark_worker_memory)

    # --- processes -------------------------------------------------------------------------------------------
    def registry_process(self, index: int) -> ManagedProcess:
        return ManagedProcess(f"cluster-registry-{index}", self.cfg.stack.run_dir / f"cluster-registry-{index}.pid",
                              "-m registry")

    def gateway_process(self, index: int) -> ManagedProcess:
        return ManagedProcess(f"cluster-gateway-{index}", self.cfg.stack.run_dir / f"cluster-gateway-{index}.pid",
                              "-m gateway")

    def endpoints(self) -> dict[str, str]:
        return {
            "HEADWATER_TOPOLOGY": "cluster",
            "KAFKA_BOOTSTRAP": self.cfg.bootstrap,
            "EVENTS_TOPIC": EVENTS_TOPIC,
            "DEADLETTER_TOPIC": DEADLETTER_TOPIC,
            "SCHEMAS_TOPIC": SCHEMAS_TOPIC,
            "AGGREGATES_TOPIC": AGGREGATES_TOPIC,
            "REGISTRY_URL": self.cfg.registry_url,
        }

    # --- up / down / status ----------------------------------------------------------------------------------
    def up(self) -> ClusterReport:
        t0 = time.monotonic()
        self.cfg.marker_file.parent.mkdir(parents=True, exist_ok=True)
        self.cfg.marker_file.write_text("cluster\n")
        started = self.brokers.start()
        created = ensure_topics(self.cfg.bootstrap, replicated_specs(self.cfg), timeout_s=60,
                                replication_factor=self.cfg.replication_factor)
        self.brokers.warm_up_transactions()
        env = self.endpoints()
        indexes = range(1, len(self.cfg.registry_ports) + 1)
        with concurrent.futures.ThreadPoolExecutor(len(indexes)) as pool:  # each replays _schemas: in parallel
            fresh = list(pool.map(lambda i: registry_instance(self.cfg, i).start(self.cfg.stack, env), indexes))
        started += [f"registry-{i}" for i, new in zip(indexes, fresh, strict=True) if new]
        if self.haproxy.start():
            started.append("haproxy")
        self.haproxy.wait_servers_up("registries", len(self.cfg.registry_ports))
        try:
            register_catalog(RegistryClient(self.cfg.registry_url), load_catalog())
        except (RegistryClientError, CatalogError) as exc:
            raise ServiceError(f"registering schemas/ at {self.cfg.registry_url} failed: {exc}") from exc
        started += self.start_gateways(env)
        self.haproxy.wait_servers_up("gateways", len(self.cfg.gateway_ports))
        env.update({"GATEWAY_URL": self.cfg.gateway_url, "HEADWATER_WRITE_KEY": dev_write_key(self.cfg.stack),
                    "HAPROXY_STATS_URL": f"http://127.0.0.1:{self.cfg.stats_port}/stats"})
        env.update(self.start_spark())
        write_env(self.cfg.stack.env_file, env)
        return ClusterReport(env, started, created, time.monotonic() - t0)

    def start_gateways(self, env: Mapping[str, str]) -> list[str]:
        """Start every gateway not running (in parallel: each waits for its producer and schemas)."""
        todo = [i for i in range(1, len(self.cfg.gateway_ports) + 1) if self.gateway_process(i).pid() is None]
        dev_write_key(self.cfg.stack)  # created once here, not by the parallel starts below
        with concurrent.futures.ThreadPoolExecutor(max(1, len(todo))) as pool:
            list(pool.map(lambda i: self.start_gateway(i, env), todo))
        return [f"gateway-{i}" for i in todo]

    def start_registry(self, index: int) -> None:
        registry_instance(self.cfg, index).start(self.cfg.stack, self.endpoints())
        self.haproxy.wait_servers_up("registries", len(self.cfg.registry_ports))

    def start_gateway(self, index: int, env: Mapping[str, str] | None = None) -> None:
        gateway_instance(self.cfg, index, self.gateway_env).start(self.cfg.stack, dict(env or self.endpoints()))

    def start_spark(self) -> dict[str, str]:
        """Start the Spark master and worker (unless `with_spark` is off); their URLs for stack.env."""
        if not self.with_spark:
            return {}
        from stack.spark_standalone import SparkClusterError  # noqa: PLC0415

        spark = self.spark()
        try:
            spark.start()
        except SparkClusterError as exc:
            raise ServiceError(f"spark standalone: {exc}") from exc
        return {"SPARK_MASTER_URL": spark.master_url, "SPARK_MASTER_UI_URL": spark.master_ui_url}

    def stop_spark(self) -> list[str]:
        spark = self.spark()
        running = [name for name, up in spark.running().items() if up]
        spark.stop()
        return running

    def down(self) -> list[str]:
        stopped = self.stop_spark()
        stopped += [f"gateway-{i}" for i in range(len(self.cfg.gateway_ports), 0, -1)
                    if self.gateway_process(i).stop(30)]
        if self.haproxy.stop():
            stopped.append("haproxy")
        stopped += [f"registry-{i}" for i in range(len(self.cfg.registry_ports), 0, -1)
                    if self.registry_process(i).stop(15)]
        # In parallel: the last node's controlled shutdown would wait for a quorum that the others left.
        with concurrent.futures.ThreadPoolExecutor(len(self.brokers.nodes)) as pool:
            stopped += [n.name for n, s in zip(self.brokers.nodes, pool.map(lambda n: n.stop(20), self.brokers.nodes),
                                               strict=True) if s]
        self.cfg.marker_file.unlink(missing_ok=True)
        self.cfg.stack.env_file.unlink(missing_ok=True)
        return stopped

    def status(self) -> dict[str, bool]:
        status = {n.name: n.running() for n in self.brokers.nodes}
        status.update({f"registry-{i}": self.registry_process(i).pid() is not None
                       for i in range(1, len(self.cfg.registry_ports) + 1)})
        status.update({f"gateway-{i}": self.gateway_process(i).pid() is not None
                       for i in range(1, len(self.cfg.gateway_ports) + 1)})
        status["haproxy"] = self.haproxy.running()
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
        self.haproxy.wait_servers_up("gateways", len(self.cfg.gateway_ports))

    def rolling_restart(self) -> None:
        for i in range(1, len(self.cfg.gateway_ports) + 1):
            self.restart_gateway(i)
