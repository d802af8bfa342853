"""Test helpers that read real Kafka topics: everything up to the current end, with a chosen isolation level."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition


def consume_all(bootstrap: str, topic: str, isolation: str = "read_committed", expected_at_least: int = 0,
                timeout_s: float = 20.0, *, start: Mapping[int, int] | None = None) -> list[Message]:
    """Every record of `topic` from `start` (partition -> offset; default 0) to the end, and at least
    `expected_at_least` records, within the timeout. Tests pass `start=end_offsets(...)` taken before they
    write, so they read only their own era of a topic that other tests fill too."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4()}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True,
    })
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, (start or {}).get(p, 0)) for p in partitions])
        records: list[Message] = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and (len(eof) < len(partitions) or len(records) < expected_at_least):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition() or 0)
                    continue
                raise RuntimeError(err)
            eof.discard(msg.partition() or 0)
            records.append(msg)
        return records
    finally:
        consumer.close()


def values(records: list[Message], marker: str | bytes = b"") -> list[bytes]:
    """The values of `records` that contain `marker` (a test run's unique id)."""
    needle = marker.encode() if isinstance(marker, str) else marker
    return [v for v in (r.value() for r in records) if v is not None and needle in v]


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The high watermark of every partition: unchanged offsets prove nothing was written."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4()}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()
