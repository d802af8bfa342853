"""Blocking Kafka look-ups (run in executor threads) and the consumer settings every reader uses: read_committed,
no consumer group (partitions are assigned, offsets are the subscribers'), small prefetch buffers."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from subscribe.errors import Unavailable
from subscribe.position import MAX_PARTITIONS, Cursor


def consumer_config(bootstrap: str, extra: Mapping[str, str], *, prefetch_kb: int) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"headwater-subscribe-{uuid.uuid4().hex}",  # required by the client; never joined (assign only)
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",  # a position below the log start (retention) reads from the start
        "queued.max.messages.kbytes": prefetch_kb,
        # With a small prefetch, a reader that was held back (its subscribers' loop busy) finds its queue full and
        # librdkafka postpones the next fetch by this much (default 1 s: a second-long hole in a live stream).
        "fetch.queue.backoff.ms": 20,
        "fetch.wait.max.ms": 100,
        "socket.nagle.disable": True,
        **extra,
    }


class KafkaMeta:
    """Partitions, watermarks and offsets by time, through one consumer handle (librdkafka is thread-safe)."""

    def __init__(self, conf: dict[str, Any], timeout_s: float) -> None:
        self._consumer = Consumer(conf)
        self._timeout = timeout_s

    def partitions(self, topic: str) -> int | None:
        """The topic's partition count; None when it does not exist."""
        try:
            meta = self._consumer.list_topics(topic, timeout=self._timeout).topics.get(topic)
        except KafkaException as exc:
            raise Unavailable(f"Kafka did not answer: {exc}", code="kafka_unavailable", retry_after=2) from None
        if meta is None or meta.error is not None or not meta.partitions:
            return None
        return min(len(meta.partitions), MAX_PARTITIONS + 1)

    def watermarks(self, topic: str, partitions: int) -> tuple[Cursor, Cursor]:
        """(low, high) of every partition; high is the last stable offset (read_committed)."""
        low, high = [], []
        try:
            for p in range(partitions):
                lo, hi = self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=self._timeout)
                low.append(max(0, lo))
                high.append(max(0, hi))
        except KafkaException as exc:
            raise Unavailable(f"Kafka did not answer: {exc}", code="kafka_unavailable", retry_after=2) from None
        return tuple(low), tuple(high)

    def offsets_at(self, topic: str, partitions: int, ms: int, high: Cursor) -> Cursor:
        """The first offset at or after time `ms` in each partition (the end where there is none)."""
        try:
            got = self._consumer.offsets_for_times([TopicPartition(topic, p, ms) for p in range(partitions)],
                                                   timeout=self._timeout)
        except KafkaException as exc:
            raise Unavailable(f"Kafka did not answer: {exc}", code="kafka_unavailable", retry_after=2) from None
        by_partition = sorted(got, key=lambda t: t.partition)
        return tuple(tp.offset if tp.offset >= 0 else high[tp.partition] for tp in by_partition)

    def close(self) -> None:
        self._consumer.close()
