"""Reads the dead-letter topic (read_committed) up to the end it had when the read began."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from common.kafka_security import KafkaSecurity
from deadletter.records import BadRecord, Letter, parse

# librdkafka's "no committed offset" (OFFSET_INVALID) and "the beginning" (OFFSET_BEGINNING).
OFFSET_INVALID = -1001
OFFSET_BEGINNING = -2


class ReadError(RuntimeError):
    """The topic could not be read (Kafka unreachable, topic missing); the message says which."""


def consumer_config(bootstrap: str, group_id: str | None = None,
                    security: KafkaSecurity | None = None) -> dict[str, Any]:
    """read_committed: dead letters of aborted gateway transactions were never dead letters."""
    return {
        "bootstrap.servers": bootstrap,
        **(security or KafkaSecurity()).librdkafka(),
        "group.id": group_id or f"headwater.deadletter.read.{uuid.uuid4()}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
    }


def partitions_of(consumer: Consumer, topic: str, timeout_s: float = 10.0) -> list[int]:
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    except KafkaException as exc:
        raise ReadError(f"Kafka unreachable: {exc}") from None
    if meta is None or meta.error is not None or not meta.partitions:
        raise ReadError(f"topic {topic} does not exist")
    return sorted(meta.partitions)


def end_offsets(consumer: Consumer, topic: str, partitions: list[int], timeout_s: float = 10.0) -> dict[int, int]:
    """The high watermark of each partition now: reads stop there, so they terminate while producers write."""
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1] for p in partitions}


def start_offsets(consumer: Consumer, topic: str, partitions: list[int], since_ms: int | None) -> dict[int, int]:
    """The first offset per partition with a timestamp at or after `since_ms` (a minute earlier, for the gap
    between a record's create time and its received_at), or the beginning."""
    if since_ms is None:
        return dict.fromkeys(partitions, OFFSET_BEGINNING)
    wanted = [TopicPartition(topic, p, max(0, since_ms - 60_000)) for p in partitions]
    found = consumer.offsets_for_times(wanted, timeout=10)
    return {tp.partition: (tp.offset if tp.offset >= 0 else OFFSET_BEGINNING) for tp in found}


def drain(consumer: Consumer, ends: dict[int, int], idle_timeout_s: float = 30.0) -> Iterator[Message]:
    """The assigned partitions' records until each reaches its end offset (or its last stable offset)."""
    pending = {p for p, end in ends.items() if end > 0}
    positions = {tp.partition: tp.offset for tp in consumer.assignment()}
    pending = {p for p in pending if not (positions.get(p, 0) >= ends[p])}
    last_progress = time.monotonic()
    while pending:
        msg = consumer.poll(0.5)
        if msg is None:
            if time.monotonic() - last_progress > idle_timeout_s:
                raise ReadError(f"no progress reading partitions {sorted(pending)} for {idle_timeout_s:.0f}s")
            continue
        last_progress = time.monotonic()
        err = msg.error()
        partition = msg.partition() or 0
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                pending.discard(partition)
                continue
            raise ReadError(f"reading partition {partition}: {err}")
        if partition not in pending:
            continue
        yield msg
        if (msg.offset() or 0) + 1 >= ends[partition]:
            pending.discard(partition)


def to_letter(msg: Message) -> Letter:
    return parse(msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value(), msg.headers())


def scan(bootstrap: str, topic: str, since_ms: int | None = None,
         security: KafkaSecurity | None = None) -> Iterator[Letter | BadRecord]:
    """Every dead letter from `since_ms` (or the beginning) to the current end; unreadable records as BadRecord."""
    consumer = Consumer(consumer_config(bootstrap, security=security))
    try:
        parts = partitions_of(consumer, topic)
        ends = end_offsets(consumer, topic, parts)
        starts = start_offsets(consumer, topic, parts, since_ms)
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in parts])
        for msg in drain(consumer, ends):
            try:
                yield to_letter(msg)
            except BadRecord as exc:
                yield exc
    finally:
        consumer.close()


def read_one(bootstrap: str, topic: str, partition: int, offset: int,
             security: KafkaSecurity | None = None) -> Letter:
    """The dead letter at partition:offset; ReadError when there is none."""
    consumer = Consumer(consumer_config(bootstrap, security=security))
    try:
        if partition not in partitions_of(consumer, topic):
            raise ReadError(f"topic {topic} has no partition {partition}")
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                raise ReadError(str(err))
            if msg.offset() == offset:
                return to_letter(msg)
            break
        raise ReadError(f"no record at {topic} {partition}:{offset}")
    finally:
        consumer.close()
