"""Integration tests against the real KRaft broker: transactions, idempotence, topic configs, stop/start."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from common.envfile import read_env
from stack.config import REPO_ROOT
from stack.topics import AGGREGATES_TOPIC, DEADLETTER_TOPIC, EVENTS_TOPIC, SCHEMAS_TOPIC
from tests.support.kafka import consume_all, values
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


def _tx_producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"test-{uuid.uuid4()}",
                         "enable.idempotence": True, "acks": "all"})
    producer.init_transactions(30)
    return producer


def test_committed_transaction_is_visible_and_aborted_one_is_not(bootstrap: str) -> None:
    run = uuid.uuid4().hex
    producer = _tx_producer(bootstrap)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(DEADLETTER_TOPIC, key=b"k", value=f"{run}-aborted-{i}".encode())
    producer.flush(10)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(DEADLETTER_TOPIC, key=b"k", value=f"{run}-committed-{i}".encode())
    producer.commit_transaction(30)

    committed = values(consume_all(bootstrap, DEADLETTER_TOPIC, "read_committed", 5), run)
    uncommitted = values(consume_all(bootstrap, DEADLETTER_TOPIC, "read_uncommitted", 10), run)
    assert committed == [f"{run}-committed-{i}".encode() for i in range(5)]
    assert len(uncommitted) == 10  # the aborted records are in the log, hidden only by read_committed


def test_open_transaction_is_invisible_until_commit(bootstrap: str) -> None:
    run = uuid.uuid4().hex
    producer = _tx_producer(bootstrap)
    producer.begin_transaction()
    producer.produce(DEADLETTER_TOPIC, key=b"k", value=f"{run}-pending".encode())
    producer.flush(10)
    assert not values(consume_all(bootstrap, DEADLETTER_TOPIC, "read_committed", 0, 5), run)
    producer.commit_transaction(30)
    assert values(consume_all(bootstrap, DEADLETTER_TOPIC, "read_committed", 1), run)


def test_idempotent_producer_with_acks_all_delivers_in_order(bootstrap: str) -> None:
    run = uuid.uuid4().hex
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "delivery.timeout.ms": 10000})
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        delivered.append((msg.partition() or 0, msg.offset() or 0))

    for i in range(200):
        producer.produce(AGGREGATES_TOPIC, key=run.encode(), value=f"{run}-{i}".encode(), on_delivery=on_delivery)
    assert producer.flush(20) == 0
    assert len(delivered) == 200
    assert len({p for p, _ in delivered}) == 1  # one key, one partition
    offsets = [o for _, o in delivered]
    assert offsets == sorted(offsets) and len(set(offsets)) == 200
    read = values(consume_all(bootstrap, AGGREGATES_TOPIC, "read_committed", 200), run)
    assert read == [f"{run}-{i}".encode() for i in range(200)]


def test_topics_exist_with_documented_configs(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert {EVENTS_TOPIC, DEADLETTER_TOPIC, SCHEMAS_TOPIC, AGGREGATES_TOPIC} <= set(topics)
    assert len(topics[SCHEMAS_TOPIC].partitions) == 1
    assert len(topics[EVENTS_TOPIC].partitions) == 3  # the test stack sets HEADWATER_EVENTS_PARTITIONS=3
    resources = [ConfigResource("topic", t) for t in (EVENTS_TOPIC, SCHEMAS_TOPIC, DEADLETTER_TOPIC)]
    configs = {r.name: {k: v.value for k, v in f.result(10).items()}
               for r, f in admin.describe_configs(resources).items()}
    assert configs[SCHEMAS_TOPIC]["cleanup.policy"] == "compact"
    assert configs[SCHEMAS_TOPIC]["retention.ms"] == "-1"
    assert configs[EVENTS_TOPIC]["cleanup.policy"] == "delete"
    assert configs[EVENTS_TOPIC]["retention.ms"] == str(7 * 24 * 3600 * 1000)
    assert configs[DEADLETTER_TOPIC]["retention.ms"] == str(30 * 24 * 3600 * 1000)
    assert configs[EVENTS_TOPIC]["compression.type"] == "producer"
    assert configs[EVENTS_TOPIC]["min.insync.replicas"] == "1"


def test_auto_topic_creation_is_off(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 3000})
    errors: list[KafkaError | None] = []
    producer.produce(f"not-a-topic-{uuid.uuid4().hex}", value=b"x", on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    assert len(errors) == 1
    error = errors[0]
    assert error is not None
    assert error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._MSG_TIMED_OUT)


def _cli(state: Path, *args: str, ports: tuple[int, int, int, int],
         extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # Nothing of the shell's stack settings (a console port exported for `make up`, say) reaches the private stack.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_") and k != "GATEWAYS"}
    # What this test checks is the command line: no console, one gateway worker (two full starts on a busy host).
    env = {**clean, "HEADWATER_CONSOLES": "0", "HEADWATER_GATEWAY_WORKERS": "1",
           "HEADWATER_STATE_DIR": str(state), "HEADWATER_KAFKA_PORT": str(ports[0]),
           "HEADWATER_KAFKA_CONTROLLER_PORT": str(ports[1]), "HEADWATER_REGISTRY_PORT": str(ports[2]),
           "HEADWATER_GATEWAY_PORT": str(ports[3]), **(extra or {})}
    return subprocess.run([sys.executable, "-m", "stack", *args], check=False, cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=180)


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                found.append(cmd)
    return found


def test_cli_up_writes_env_is_idempotent_and_down_leaves_no_process(tmp_path: Path) -> None:
    ports = (free_port(), free_port(), free_port(), free_port())
    try:
        up = _cli(tmp_path, "up", ports=ports)
        assert up.returncode == 0, up.stderr
        env = read_env(tmp_path / "stack.env")
        assert env["KAFKA_BOOTSTRAP"] == f"127.0.0.1:{ports[0]}"
        assert f"KAFKA_BOOTSTRAP=127.0.0.1:{ports[0]}" in up.stdout
        admin = AdminClient({"bootstrap.servers": env["KAFKA_BOOTSTRAP"]})
        listed = set(admin.list_topics(timeout=10).topics)
        assert {EVENTS_TOPIC, DEADLETTER_TOPIC, SCHEMAS_TOPIC, AGGREGATES_TOPIC} <= listed

        again = _cli(tmp_path, "up", ports=ports)  # already running: reuses the broker, creates nothing
        assert again.returncode == 0, again.stderr
        assert "started: nothing new" in again.stdout and "topics created: none" in again.stdout
        assert "running" in _cli(tmp_path, "status", ports=ports).stdout
        other = _cli(tmp_path, "up", ports=ports, extra={"HEADWATER_TOPOLOGY": "cluster"})  # one topology at a time
        assert other.returncode == 1 and "topology is up" in other.stderr
        # `down` stops what runs, whatever the environment asks for
        assert "kafka-1" not in _cli(tmp_path, "status", ports=ports, extra={"HEADWATER_TOPOLOGY": "cluster"}).stdout

        down = _cli(tmp_path, "down", ports=ports)
        assert down.returncode == 0 and down.stdout.startswith("stopped: ")
        assert "kafka" in down.stdout  # after the services
        assert _processes_mentioning(str(tmp_path)) == []
        assert not (tmp_path / "stack.env").exists()

        restarted = _cli(tmp_path, "up", ports=ports)  # data survives a restart: topics are not created again
        assert restarted.returncode == 0, restarted.stderr
        assert "topics created: none" in restarted.stdout
        assert _cli(tmp_path, "down", ports=ports).returncode == 0
        assert _processes_mentioning(str(tmp_path)) == []
    finally:  # a failed or timed-out step must not leave the stack running
        if _processes_mentioning(str(tmp_path)):
            _cli(tmp_path, "down", ports=ports)
