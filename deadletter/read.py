"""Reads the dead-letter topic (read_committed) up to the end it had when the read began, as dead letters."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Message

from common import kafka_read
from common.kafka_read import KafkaReadError as ReadError
from common.kafka_security import KafkaSecurity
from deadletter.records import BadRecord, Letter, parse

__all__ = ["ReadError", "consumer_config", "read_one", "scan", "to_letter"]
STALL_S = 30.0  # a read that makes no progress for this long fails (Kafka gone); a long one may take any time
CLOCK_SKEW_MS = 60_000  # a record's create time may precede its received_at by this much


def consumer_config(bootstrap: str, group_id: str | None = None,
                    security: KafkaSecurity | None = None) -> dict[str, Any]:
    """read_committed: dead letters of aborted gateway transactions were never dead letters."""
    return {**kafka_read.consumer_config(bootstrap, group_id=group_id or f"headwater.deadletter.read.{uuid.uuid4()}"),
            **(security or KafkaSecurity()).librdkafka()}


def to_letter(msg: Message) -> Letter:
    return parse(msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value(), msg.headers())


def scan(bootstrap: str, topic: str, since_ms: int | None = None,
         security: KafkaSecurity | None = None) -> Iterator[Letter | BadRecord]:
    """Every dead letter from `since_ms` (or the beginning) to the current end; unreadable records as BadRecord."""
    since = None if since_ms is None else max(0, since_ms - CLOCK_SKEW_MS)
    for msg in kafka_read.read_to_end(bootstrap, topic, since_ms=since, timeout_s=None, stall_s=STALL_S,
                                      security=security):
        try:
            yield to_letter(msg)
        except BadRecord as exc:
            yield exc


def read_one(bootstrap: str, topic: str, partition: int, offset: int,
             security: KafkaSecurity | None = None) -> Letter:
    """The dead letter at partition:offset; ReadError when there is none, BadRecord when it is not a dead letter."""
    msg = kafka_read.read_at(bootstrap, topic, partition, offset, security=security)
    if msg is None:
        raise ReadError(f"no record at {topic} {partition}:{offset}")
    return to_letter(msg)
