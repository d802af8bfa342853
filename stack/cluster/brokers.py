"""The cluster's three KRaft Kafka nodes (combined broker+controller roles, a 3-voter quorum): settings, format,
start, readiness, stop and kill -9, each node its own process, ports and log dir."""

from __future__ import annotations

import concurrent.futures
import shutil
import socket
import subprocess
import time
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from stack.cluster.config import ClusterConfig
from stack.kafka import LOG4J_CONFIG, BrokerError, kafka_cluster_id, render_properties
from stack.process import ManagedProcess


def node_properties(cfg: ClusterConfig, node: int) -> dict[str, str]:
    """Node `node` (1-based): the single-node settings of docs/local-stack.md, replicated (docs/cluster.md)."""
    port, cport = cfg.broker_ports[node - 1], cfg.controller_ports[node - 1]
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(cfg.controller_ports))
    rf, isr = str(cfg.replication_factor), str(cfg.min_insync_replicas)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node),
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        # A static quorum of the three controllers: any two elect a leader, one alone cannot.
        "controller.quorum.voters": voters,
        "log.dirs": str(cfg.data_dir / f"kafka-{node}"),
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        # Never elect a replica that missed acknowledged writes: a partition waits for an in-sync one instead.
        "unclean.leader.election.enable": "false",
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        "group.initial.rebalance.delay.ms": "0",
        "transaction.max.timeout.ms": "900000",
        "message.max.bytes": str(1024 * 1024),
        "replica.fetch.max.bytes": str(1024 * 1024),
        "socket.request.max.bytes": str(100 * 1024 * 1024),
        # A follower that stops fetching leaves the ISR after 10 s (the default 30 s would stall acks=all longer).
        "replica.lag.time.max.ms": "10000",
        "log.retention.hours": "168",
        "log.segment.bytes": str(256 * 1024 * 1024),
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.replica.fetchers": "1",
        "background.threads": "2",
    }
    if cfg.stack.kafka_flush_messages > 0:
        props["log.flush.interval.messages"] = str(cfg.stack.kafka_flush_messages)
    return props


class ClusterBroker:
    """One node of the cluster: its process, properties file and log dir."""

    def __init__(self, cfg: ClusterConfig, node: int) -> None:
        self.cfg = cfg
        self.node = node
        self.name = f"kafka-{node}"
        self.port = cfg.broker_ports[node - 1]
        self.props_file = cfg.conf_dir / f"{self.name}.properties"
        self.log_dir = cfg.logs_dir / self.name
        self.process = ManagedProcess(self.name, cfg.run_dir / f"{self.name}.pid", str(self.props_file))

    def _java(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerError("java not found on PATH: run `make setup` (it installs OpenJDK 17)")
        jars = self.cfg.stack.jars_dir / "kafka"
        if not any(jars.glob("kafka_2.13-*.jar")):
            raise BrokerError(f"no Kafka jars in {jars}: run `make setup` first")
        heap = self.cfg.stack.kafka_heap_mb
        return [java, f"-Xms{min(256, heap)}m", f"-Xmx{heap}m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-XX:ParallelGCThreads=1", "-XX:CICompilerCount=2", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={LOG4J_CONFIG}", f"-Dkafka.logs.dir={self.log_dir}",
                "-cp", f"{jars}/*"]

    def write_config(self) -> None:
        self.props_file.parent.mkdir(parents=True, exist_ok=True)
        self.props_file.write_text(render_properties(node_properties(self.cfg, self.node)))

    def format_storage(self, cluster_id: str) -> None:
        data = Path(node_properties(self.cfg, self.node)["log.dirs"])
        if (data / "meta.properties").exists():
            return
        data.mkdir(parents=True, exist_ok=True)
        cmd = [*self._java(), "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.props_file)]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise BrokerError(f"formatting {data} failed:\n{done.stdout}{done.stderr}")

    def start_process(self) -> bool:
        """Start the JVM unless it runs (readiness is the cluster's: a node waits for the quorum)."""
        if self.process.pid() is not None:
            return False
        self.write_config()
        self.process.start([*self._java(), "kafka.Kafka", str(self.props_file)], self.log_dir / "stdout.log")
        return True

    def wait_listening(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not port_open(self.port):
            if self.process.pid() is None:
                raise BrokerError(f"{self.name} exited during start-up; see {self.log_dir}")
            if time.monotonic() > deadline:
                raise BrokerError(f"{self.name}: port {self.port} not open after {timeout_s:.0f}s; see {self.log_dir}")
            time.sleep(0.2)

    def stop(self, timeout_s: float = 60.0) -> bool:
        return self.process.stop(timeout_s)

    def kill(self) -> None:
        """kill -9 (fault injection)."""
        self.process.kill()

    def running(self) -> bool:
        return self.process.pid() is not None


class Brokers:
    """The three nodes together: one cluster id, started together, ready when every node is registered."""

    def __init__(self, cfg: ClusterConfig) -> None:
        self.cfg = cfg
        self.nodes = [ClusterBroker(cfg, i + 1) for i in range(len(cfg.broker_ports))]

    def start(self) -> list[str]:
        cluster_id_file = self.cfg.data_dir / "cluster-id"
        if not cluster_id_file.exists():
            cluster_id_file.parent.mkdir(parents=True, exist_ok=True)
            cluster_id_file.write_text(kafka_cluster_id())
        cluster_id = cluster_id_file.read_text().strip()
        for node in self.nodes:
            node.write_config()
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:  # three JVM starts: in parallel
            list(pool.map(lambda node: node.format_storage(cluster_id), self.nodes))
        started = [n.name for n in self.nodes if n.start_process()]
        self.wait_ready(len(self.nodes))
        return started

    def wait_ready(self, brokers: int, timeout_s: float | None = None) -> None:
        """Block until `brokers` nodes are registered with the quorum (metadata lists them)."""
        timeout = timeout_s or float(self.cfg.stack.start_timeout_s)
        running = [n for n in self.nodes if n.running()]
        for node in running:
            node.wait_listening(timeout)
        admin = AdminClient({"bootstrap.servers": self.cfg.bootstrap, "socket.connection.setup.timeout.ms": 1000})
        deadline = time.monotonic() + timeout
        last = "no metadata"
        while time.monotonic() < deadline:
            try:
                md = admin.list_topics(timeout=2)
                if len(md.brokers) >= brokers:
                    return
                last = f"{len(md.brokers)} of {brokers} brokers registered"
            except KafkaException as exc:
                last = str(exc)
            time.sleep(0.3)
        raise BrokerError(f"cluster not ready after {timeout:.0f}s ({last}); see {self.cfg.logs_dir}")

    def warm_up_transactions(self, timeout_s: float = 90.0) -> None:
        """One empty transaction, so the replicated transaction-state topic exists before the gateways start."""
        producer = Producer({"bootstrap.servers": self.cfg.bootstrap, "transactional.id": "headwater-cluster-warmup",
                             "enable.idempotence": True, "acks": "all"})
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        producer.commit_transaction(timeout_s)

    def stop(self) -> list[str]:
        return [n.name for n in reversed(self.nodes) if n.stop()]

    def node(self, node_id: int) -> ClusterBroker:
        return self.nodes[node_id - 1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
