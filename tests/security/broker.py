"""One secured KRaft node for the tests (stack/security.py's listeners, users and ACLs) in a temporary folder."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from stack.kafka_acls import ADMIN, Names
from stack.secrets import StackSecrets
from stack.security import KafkaTls, client_config, format_arguments, listener_properties, provision
from tests.support import processes
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
N = Names()
TOPICS = {N.events_topic: 3, N.deadletter_topic: 1, N.aggregates_topic: 1, N.schemas_topic: 1, N.rules_topic: 1,
          N.status_topic: 1, N.rule_output_prefix + "top_pages": 1}


@dataclass
class SecureKafka:
    bootstrap: str
    ca: Path
    secrets: StackSecrets
    process: subprocess.Popen[bytes]
    log: Path

    def config(self, principal: str, **extra: Any) -> dict[str, Any]:
        return {**client_config(self.bootstrap, principal, self.secrets, self.ca), **extra}

    def env(self, principal: str) -> dict[str, str]:
        """A component's KAFKA_* settings for `principal` (what the stack gives each process)."""
        return {"KAFKA_BOOTSTRAP": self.bootstrap, **self.secrets.kafka_env(principal, self.ca)}


def start(folder: Path, timeout_s: float = 300.0) -> SecureKafka:
    port, internal, controller = free_port(), free_port(), free_port()
    secrets = StackSecrets(folder / "secrets")
    tls = KafkaTls.make(folder / "tls")
    props = {"process.roles": "broker,controller", "node.id": "1", "controller.listener.names": "CONTROLLER",
             "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}", "log.dirs": str(folder / "data"),
             "auto.create.topics.enable": "false", "offsets.topic.replication.factor": "1",
             "offsets.topic.num.partitions": "2", "transaction.state.log.replication.factor": "1",
             "transaction.state.log.min.isr": "1", "transaction.state.log.num.partitions": "2",
             "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
             "group.initial.rebalance.delay.ms": "0", "num.network.threads": "2", "num.io.threads": "2",
             **listener_properties(port, internal, controller, tls)}
    conf = folder / "server.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    jars = REPO / ".headwater" / "jars" / "kafka"
    java = [shutil.which("java") or "java", "-Xms256m", "-Xmx512m", "-XX:+UseG1GC",
            f"-Dlog4j2.configurationFile={REPO / 'stack' / 'conf' / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={folder / 'logs'}", "-cp", f"{jars}/*"]
    formatted = subprocess.run([*java, "kafka.tools.StorageTool", "format", "-t", "Aq2Tbnb1QjWr7nX0b5n2zA", "-c",
                                str(conf), "--standalone", *format_arguments(secrets)],
                               capture_output=True, text=True, check=False, timeout=300)
    if formatted.returncode != 0:
        raise RuntimeError(f"format failed: {formatted.stderr[-2000:]}")
    log = folder / "kafka.log"
    process = subprocess.Popen([*java, "kafka.Kafka", str(conf)], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    kafka = SecureKafka(f"127.0.0.1:{port}", tls.ca, secrets, process, log)
    admin = AdminClient(kafka.config(ADMIN, **{"socket.connection.setup.timeout.ms": 5000}))
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the secured broker exited; see {log}")
        try:
            if admin.list_topics(timeout=5).brokers:
                break
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            stop(kafka)
            raise RuntimeError(f"the secured broker did not start; see {log}")
        time.sleep(0.5)
    provision(kafka.bootstrap, secrets, tls.ca)
    futures = admin.create_topics([NewTopic(t, n, 1, config={"cleanup.policy": "compact"} if t.startswith("_") else {})
                                   for t, n in TOPICS.items()], operation_timeout=60)
    for future in futures.values():
        future.result(60)
    return kafka


def stop(kafka: SecureKafka) -> None:
    processes.stop(kafka.process, 60)
