"""The single-node KRaft Kafka broker: its server.properties, storage format, start, readiness and stop."""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import time
import uuid

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from stack.config import REPO_ROOT, StackConfig
from stack.process import ManagedProcess

LOG4J_CONFIG = REPO_ROOT / "stack" / "conf" / "log4j2.properties"


class BrokerError(RuntimeError):
    """The broker could not be set up, started or reached; the message says where to look."""


def server_properties(cfg: StackConfig) -> dict[str, str]:
    """The broker's settings; docs/local-stack.md ("Broker settings") explains each choice."""
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:{cfg.kafka_port},CONTROLLER://127.0.0.1:{cfg.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{cfg.kafka_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{cfg.controller_port}",
        "log.dirs": str(cfg.kafka_data_dir),
        # Topics exist only when the launcher creates them with their documented configs.
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "false",
        # Internal topics on one node: replication factor 1; fewer partitions than the default 50
        # make the first transaction and the first consumer group start in well under a second.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
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
    if cfg.kafka_flush_messages > 0:
        props["log.flush.interval.messages"] = str(cfg.kafka_flush_messages)
    return props


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


class KafkaBroker:
    """Starts and stops the broker of one state directory."""

    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.props_file = cfg.state_dir / "conf" / "server.properties"
        self.process = ManagedProcess("kafka", cfg.run_dir / "kafka.pid", str(self.props_file))

    def classpath(self) -> str:
        jars = self.cfg.jars_dir / "kafka"
        if not any(jars.glob("kafka_2.13-*.jar")):
            raise BrokerError(f"no Kafka jars in {jars}: run `make setup` first")
        return f"{jars}/*"

    def _java(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerError("java not found on PATH: run `make setup` (it installs OpenJDK 17)")
        heap = self.cfg.kafka_heap_mb
        return [
            java, f"-Xms{min(512, heap)}m", f"-Xmx{heap}m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            f"-Dkafka.logs.dir={self.cfg.logs_dir / 'kafka'}", "-cp", self.classpath(),
        ]

    def _format_storage(self) -> None:
        if (self.cfg.kafka_data_dir / "meta.properties").exists():
            return
        self.cfg.kafka_data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [*self._java(), "kafka.tools.StorageTool", "format", "-t", kafka_cluster_id(),
               "-c", str(self.props_file), "--standalone"]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise BrokerError(f"formatting {self.cfg.kafka_data_dir} failed:\n{done.stdout}{done.stderr}")

    def start(self) -> bool:
        """Start the broker unless it already runs; wait until it is ready. True if it was started now."""
        if self.process.pid() is not None:
            self.wait_ready()
            return False
        self.props_file.parent.mkdir(parents=True, exist_ok=True)
        self.props_file.write_text(render_properties(server_properties(self.cfg)))
        self._format_storage()
        log = self.cfg.logs_dir / "kafka" / "stdout.log"
        self.process.start([*self._java(), "kafka.Kafka", str(self.props_file)], log)
        try:
            self.wait_ready()
        except BrokerError:
            self.process.stop(timeout_s=10)
            raise
        return True

    def wait_ready(self) -> None:
        """Block until the broker answers metadata requests with itself as a live broker."""
        deadline = time.monotonic() + self.cfg.start_timeout_s
        # Wait for the listener first: librdkafka logs every refused connection at error level.
        while not _port_open(self.cfg.kafka_port):
            if self.process.pid() is None:
                raise BrokerError(f"the broker exited during start-up; see {self.cfg.logs_dir / 'kafka'}")
            if time.monotonic() > deadline:
                raise BrokerError(f"port {self.cfg.kafka_port} not open after {self.cfg.start_timeout_s}s; "
                                  f"see {self.cfg.logs_dir / 'kafka'}")
            time.sleep(0.1)
        admin = AdminClient({"bootstrap.servers": self.cfg.bootstrap, "socket.connection.setup.timeout.ms": 1000})
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.pid() is None:
                raise BrokerError(f"the broker exited during start-up; see {self.cfg.logs_dir / 'kafka'}")
            try:
                md = admin.list_topics(timeout=2)
                if md.brokers:
                    return
            except KafkaException as exc:
                last = exc
            time.sleep(0.2)
        raise BrokerError(f"broker not ready after {self.cfg.start_timeout_s}s ({last}); "
                          f"see {self.cfg.logs_dir / 'kafka'}")

    def warm_up_transactions(self, timeout_s: float = 60.0) -> None:
        """Run one empty transaction so the transaction coordinator exists before the first real one."""
        producer = Producer({"bootstrap.servers": self.cfg.bootstrap, "transactional.id": "headwater-stack-warmup",
                             "enable.idempotence": True, "acks": "all"})
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        producer.commit_transaction(timeout_s)

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Controlled shutdown (SIGTERM), SIGKILL after `timeout_s`. True if a broker was running."""
        return self.process.stop(timeout_s)

    def kill(self) -> None:
        self.process.kill()

    def running(self) -> bool:
        return self.process.pid() is not None


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0
