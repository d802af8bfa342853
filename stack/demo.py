"""Demo of the platform: a transactional produce, one aborted transaction, and a read_committed read-back."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from stack.config import StackConfig
from stack.envfile import read_env


def main() -> None:
    cfg = StackConfig.from_env()
    env = read_env(cfg.env_file)
    bootstrap, topic = env["KAFKA_BOOTSTRAP"], env["EVENTS_TOPIC"]
    run = uuid.uuid4().hex[:8]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"demo-{run}",
                         "enable.idempotence": True, "acks": "all"})
    producer.init_transactions(30)
    for tx, outcome in enumerate(("committed", "aborted", "committed"), start=1):
        producer.begin_transaction()
        for i in range(3):
            value = f"demo {run} transaction {tx} ({outcome}) record {i}"
            producer.produce(topic, key=f"node-{i}".encode(), value=value.encode())
        if outcome == "committed":
            producer.commit_transaction(30)
        else:
            producer.flush(10)
            producer.abort_transaction(30)
        print(f"transaction {tx}: produced 3 records, then {'committed' if outcome == 'committed' else 'aborted'}")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-{run}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    seen: list[str] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 20
    while len(eof) < len(parts) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                eof.add(msg.partition() or 0)
            continue
        value = (msg.value() or b"").decode()
        if run in value:
            seen.append(value)
    consumer.close()
    print(f"a read_committed consumer of {topic} at {bootstrap} sees {len(seen)} of this run's records:")
    for value in sorted(seen):
        print(f"  {value}")
    print("(the aborted transaction's 3 records are in the log but hidden)")
    print(f"stop the stack with `make down`; endpoints are in {cfg.env_file}")


if __name__ == "__main__":
    main()
