"""Produces to Kafka within a deadline: while librdkafka's local queue is full, serve delivery reports and retry.

confluent-kafka's `produce()` raises `BufferError` when the local queue is full; only `poll()` (or `flush()`)
empties it, by serving delivery reports. Every producer loop of the project does the same thing here: try,
poll briefly while the queue is full, and give up with `QueueFull` (a `BufferError`, so callers that treat a
full queue as "Kafka is slow, not broken" keep doing so) once the deadline has passed.

Made for hot paths: plain functions, no closure or object per call; the optional delivery callback is passed
through as it is (build it once, not per record).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast

POLL_S = 0.01  # how long one wait for delivery reports lasts while the queue is full


class QueueFull(BufferError):
    """librdkafka's local queue stayed full until the deadline (Kafka slower than the producer, or down)."""


class Producing(Protocol):
    """What the helpers need of a producer (confluent-kafka's `Producer` has it; so has the gateway's TxProducer).
    A producer given with `on_delivery` must also take that keyword, as confluent-kafka's does."""

    def produce(self, topic: str, *, value: Any = ..., key: Any = ..., headers: Any = ...) -> None: ...
    def poll(self, timeout: float) -> int: ...


class Record(Protocol):
    """A record to produce (the gateway's `KafkaRecord` is one)."""

    @property
    def topic(self) -> str: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Any: ...


DeliveryCallback = Callable[[Any, Any], None]


def produce(producer: Producing, topic: str, value: bytes | None, key: bytes | None = None, headers: Any = None,
            *, deadline: float, on_delivery: DeliveryCallback | None = None) -> None:
    """Enqueue one record; while the queue is full, poll and retry until `deadline` (time.monotonic()), then
    raise QueueFull. Other errors of `produce()` (record too large, unknown topic...) are raised as they come."""
    while True:
        try:
            if on_delivery is None:
                producer.produce(topic, value=value, key=key, headers=headers)
            else:
                cast(Any, producer).produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery)
            return
        except BufferError:
            if time.monotonic() >= deadline:
                raise QueueFull(f"the producer's local queue stayed full until the deadline ({topic})") from None
            producer.poll(POLL_S)


def produce_all(producer: Producing, records: Iterable[Record], *, deadline: float,
                on_delivery: DeliveryCallback | None = None) -> int:
    """Enqueue every record (see `produce`); the number enqueued."""
    n = 0
    for r in records:
        produce(producer, r.topic, r.value, r.key, r.headers, deadline=deadline, on_delivery=on_delivery)
        n += 1
    return n
