"""The stack's Kafka: one KRaft node or several (combined broker+controller roles), their server.properties,
storage format, start, readiness, stop and kill -9, each node its own process, ports and log dir."""

from __future__ import annotations

import base64
import concurrent.futures
import shutil
import socket
import time
import uuid
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from stack.config import REPO_ROOT, StackConfig, instance_name
from stack.kafka_acls import ADMIN
from stack.process import ManagedProcess, StartWatch, run_while_busy
from stack.secrets import StackSecrets
from stack.security import KafkaTls, client_config, format_arguments, listener_properties

LOG4J_CONFIG = REPO_ROOT / "stack" / "conf" / "log4j2.properties"


class BrokerError(RuntimeError):
    """A broker could not be set up, started or reached; the message says where to look."""


def node_properties(cfg: StackConfig, node: int) -> dict[str, str]:
    """Node `node`'s settings (1-based); docs/local-stack.md ("Broker settings") and docs/cluster.md explain them."""
    port, cport = cfg.broker_ports[node - 1], cfg.controller_ports[node - 1]
    rf, isr = str(cfg.replication_factor), str(cfg.min_insync_replicas)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node),
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        **quorum_properties(cfg),
        "log.dirs": str(KafkaNode(cfg, node).data_dir),
        # Topics exist only when the launcher creates them with their documented configs.
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        # Never elect a replica that missed acknowledged writes: a partition waits for an in-sync one instead.
        "unclean.leader.election.enable": "false",
        # Internal topics replicated like the others; fewer partitions than the default 50 make the first
        # transaction and the first consumer group start in well under a second.
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        "group.initial.rebalance.delay.ms": "0",
        # Transactions: a producer that dies mid-transaction is aborted by the coordinator after the
        # producer's transaction.timeout.ms (the gateway uses seconds); the broker's ceiling stays 15 min.
        "transaction.max.timeout.ms": "900000",
        # Records up to 1 MiB (topics say the same); requests may carry a whole group-committed batch.
        "message.max.bytes": str(1024 * 1024),
        "socket.request.max.bytes": str(100 * 1024 * 1024),
        "log.retention.hours": "168",
        "log.segment.bytes": str(256 * 1024 * 1024),
        "num.network.threads": "2",
        "num.io.threads": "4",
    }
    if cfg.topology.brokers > 1:
        props.update({
            "replica.fetch.max.bytes": str(1024 * 1024),
            # A follower that stops fetching leaves the ISR after 10 s (the default 30 s would stall acks=all longer).
            "replica.lag.time.max.ms": "10000",
            # A node that dies is fenced by the active controller, and its partitions get new leaders from the
            # in-sync replicas, 4 s after its last heartbeat (defaults: 9 s, heartbeats every 2 s): producers see
            # a broker loss as a few seconds of 503s (docs/cluster.md, "What a broker loss costs").
            "broker.session.timeout.ms": "4000",
            "broker.heartbeat.interval.ms": "500",
            # When the active controller dies, the others elect a new one once they have not heard from it for
            # 1 s (default 2 s); the new one then gives every broker a fresh session, so a dead node that also led
            # partitions is fenced about 1 s + 4 s after the kill.
            "controller.quorum.fetch.timeout.ms": "1000",
            "controller.quorum.election.timeout.ms": "500",
            # Several nodes share one host: fewer threads each.
            "num.io.threads": "2",
            "num.replica.fetchers": "1",
            "background.threads": "2",
        })
    if cfg.kafka_flush_messages > 0:
        props["log.flush.interval.messages"] = str(cfg.kafka_flush_messages)
    if cfg.topology.secure:  # SASL/SCRAM over TLS for clients, mutual TLS between nodes, ACLs (stack/security.py)
        props |= listener_properties(port, cfg.internal_ports[node - 1], cport, KafkaTls.make(cfg.tls_dir))
    return props


def admin_settings(cfg: StackConfig) -> dict[str, Any]:
    """librdkafka settings of the stack's own calls (readiness, topics, warm-up): the administrator when secure."""
    if not cfg.topology.secure:
        return {"bootstrap.servers": cfg.bootstrap}
    return client_config(cfg.bootstrap, ADMIN, StackSecrets(cfg.secrets_dir), cfg.tls_dir / "ca.pem")


def quorum_properties(cfg: StackConfig) -> dict[str, str]:
    """One node: a dynamic quorum of itself (formatted `--standalone`). Several: a static quorum of every
    controller, where any majority elects a leader and a minority alone cannot."""
    if cfg.topology.brokers == 1:
        return {"controller.quorum.bootstrap.servers": f"127.0.0.1:{cfg.controller_port}"}
    return {"controller.quorum.voters": ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(cfg.controller_ports))}


def render_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def kafka_cluster_id() -> str:
    """A cluster id in Kafka's own format (Uuid.toString: url-safe base64 of 16 bytes, no padding).

    Like Kafka's Uuid.randomUuid, never one starting with '-': the storage tool would read it as an option
    (1 start in 64 failed to format before this rule).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaNode:
    """One node: its process, properties file, data and log dirs (`kafka` when alone, `kafka-N` among several)."""

    def __init__(self, cfg: StackConfig, node: int) -> None:
        self.cfg = cfg
        self.node = node
        self.alone = cfg.topology.brokers == 1
        self.name = instance_name("kafka", node, cfg.topology.brokers)
        self.port = cfg.broker_ports[node - 1]
        self.props_file = cfg.conf_dir / ("server.properties" if self.alone else f"{self.name}.properties")
        self.data_dir = cfg.data_dir / self.name
        self.log_dir = cfg.logs_dir / self.name
        self.process = ManagedProcess(self.name, cfg.run_dir / f"{self.name}.pid", str(self.props_file))

    def _java(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerError("java not found on PATH: run `make setup` (it installs OpenJDK 17)")
        jars = self.cfg.jars_dir / "kafka"
        if not any(jars.glob("kafka_2.13-*.jar")):
            raise BrokerError(f"no Kafka jars in {jars}: run `make setup` first")
        heap = self.cfg.kafka_heap_mb
        # Several JVMs on one host: a smaller initial heap and fewer GC and compiler threads each.
        shared = [] if self.alone else ["-XX:ParallelGCThreads=1", "-XX:CICompilerCount=2"]
        return [java, f"-Xms{min(512 if self.alone else 256, heap)}m", f"-Xmx{heap}m", "-XX:+UseG1GC",
                "-XX:MaxGCPauseMillis=20", *shared, "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={LOG4J_CONFIG}", f"-Dkafka.logs.dir={self.log_dir}", "-cp", f"{jars}/*"]

    def write_config(self) -> None:
        self.props_file.parent.mkdir(parents=True, exist_ok=True)
        self.props_file.touch(mode=0o600)
        self.props_file.chmod(0o600)  # a secure node's file holds its keystore's password
        self.props_file.write_text(render_properties(node_properties(self.cfg, self.node)))

    def format_storage(self, cluster_id: str, scram: list[str]) -> None:
        """Format the node's log dir unless it is; `scram`: the SCRAM credentials to create (secure stacks)."""
        if (self.data_dir / "meta.properties").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [*self._java(), "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.props_file),
               *(["--standalone"] if self.alone else []), *scram]
        try:  # three formats at once on a loaded host can take minutes: waited for while the JVM works
            done = run_while_busy(cmd, self.cfg.start_timeout_s)
        except TimeoutError as exc:
            raise BrokerError(f"formatting {self.data_dir}: {exc}") from None
        if done.returncode != 0:
            # Never stdout: with --add-scram it lists the administrator's salted credential.
            raise BrokerError(f"formatting {self.data_dir} failed:\n{done.stderr}")

    def start_process(self) -> bool:
        """Start the JVM unless it runs (readiness is the quorum's: see `Brokers.wait_ready`). True if started."""
        if self.process.pid() is not None:
            return False
        self.write_config()
        self.process.start([*self._java(), "kafka.Kafka", str(self.props_file)], self.log_dir / "stdout.log")
        return True

    def wait_listening(self, quiet_s: float) -> None:
        """Wait for the listener first (librdkafka logs every refused connection at error level), as long as the
        JVM's log grows: on a busy host a start can take minutes; a hung one fails after `quiet_s` of silence."""
        watch = StartWatch(quiet_s, [self.log_dir])
        while not port_open(self.port):
            if self.process.pid() is None:
                raise BrokerError(f"{self.name} exited during start-up; see {self.log_dir}")
            if watch.expired():
                raise BrokerError(f"{self.name}: port {self.port} not open, and nothing logged for {quiet_s:.0f}s; "
                                  f"see {self.log_dir}")
            time.sleep(0.1)

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Controlled shutdown (SIGTERM), SIGKILL after `timeout_s`. True if it was running."""
        return self.process.stop(timeout_s)

    def kill(self) -> None:
        """kill -9 (fault injection)."""
        self.process.kill()

    def running(self) -> bool:
        return self.process.pid() is not None


class Brokers:
    """Every node together: one cluster id, started together, ready when every running node is registered."""

    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.nodes = [KafkaNode(cfg, i + 1) for i in range(cfg.topology.brokers)]

    def start(self) -> list[str]:
        """Start the nodes that do not run; wait until all are registered. The names of those started now."""
        cluster_id = None
        for node in self.nodes:
            node.write_config()
            if not (node.data_dir / "meta.properties").exists():
                cluster_id = cluster_id or self._cluster_id()
        if cluster_id is not None:
            # The secrets are made once, here: made by the parallel formats, their files raced each other.
            scram = format_arguments(StackSecrets(self.cfg.secrets_dir)) if self.cfg.topology.secure else []
            with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:  # JVM starts: in parallel
                list(pool.map(lambda node: node.format_storage(cluster_id, scram), self.nodes))
        started = [n for n in self.nodes if n.start_process()]
        try:
            self.wait_ready(len(self.nodes))
        except BrokerError:
            for node in started:
                node.stop(10)
            raise
        return [n.name for n in started]

    def _cluster_id(self) -> str:
        path = self.cfg.data_dir / "cluster-id"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(kafka_cluster_id())
        return path.read_text().strip()

    def wait_ready(self, brokers: int | None = None, quiet_s: float | None = None) -> None:
        """Block until `brokers` (default: all) nodes are registered with the quorum (metadata lists them), for as
        long as the running nodes' logs show progress (`quiet_s` of silence is a failed start)."""
        count = len(self.nodes) if brokers is None else brokers
        timeout = quiet_s or float(self.cfg.start_timeout_s)
        running = [n for n in self.nodes if n.running()]
        for node in running:
            node.wait_listening(timeout)
        admin = AdminClient({**admin_settings(self.cfg), "socket.connection.setup.timeout.ms": 1000})
        watch = StartWatch(timeout, [n.log_dir for n in running])
        last = "no metadata"
        while not watch.expired():
            if dead := [n.name for n in running if not n.running()]:
                raise BrokerError(f"{', '.join(dead)} exited during start-up; see {self.cfg.logs_dir}")
            try:
                md = admin.list_topics(timeout=2)
                if len(md.brokers) >= count:
                    return
                last = f"{len(md.brokers)} of {count} brokers registered"
            except KafkaException as exc:
                last = str(exc)
            time.sleep(0.2)
        raise BrokerError(f"Kafka not ready, and nothing logged for {timeout:.0f}s ({last}); see {self.cfg.logs_dir}")

    def warm_up_transactions(self, timeout_s: float = 90.0) -> None:
        """One empty transaction, so the transaction coordinator (and its replicated topic) exists before the first
        real one."""
        producer = Producer({**admin_settings(self.cfg), "transactional.id": "headwater-stack-warmup",
                             "enable.idempotence": True, "acks": "all"})
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        producer.commit_transaction(timeout_s)

    def stop(self, timeout_s: float = 60.0) -> list[str]:
        """Stop every node, in parallel: the last one's controlled shutdown would wait for a quorum the others left."""
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            stopped = list(pool.map(lambda n: n.stop(timeout_s), self.nodes))
        return [n.name for n, s in zip(self.nodes, stopped, strict=True) if s]

    def kill(self) -> None:
        """kill -9 every node (fault injection)."""
        for node in self.nodes:
            node.kill()

    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    def running(self) -> bool:
        return any(n.running() for n in self.nodes)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
