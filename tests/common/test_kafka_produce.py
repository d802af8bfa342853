"""common/kafka_produce.py with real librdkafka: a full queue is waited out on the real broker, a queue that
stays full (no broker) ends in QueueFull at the deadline, other errors come through, callbacks are passed on."""

from __future__ import annotations

import time
import uuid
from typing import Any, NamedTuple

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from common.kafka_produce import QueueFull, produce, produce_all
from common.kafka_read import read_to_end
from tests.support.ports import free_port


class Rec(NamedTuple):
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Any


def small_queue_producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 5, "linger.ms": 20,
                     "message.timeout.ms": 10_000, "log_level": 0, **extra})


@pytest.mark.integration
def test_a_full_queue_is_waited_out_and_every_record_arrives(bootstrap: str) -> None:
    topic = f"test.produce.{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        fut.result(30)
    producer = small_queue_producer(bootstrap)
    delivered: list[bytes] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        assert err is None
        delivered.append(msg.value())

    records = [Rec(topic, str(i).encode(), f"v{i}".encode(), [("h", b"1")]) for i in range(300)]
    assert produce_all(producer, records, deadline=time.monotonic() + 60, on_delivery=on_delivery) == 300
    assert producer.flush(30) == 0
    assert delivered == [r.value for r in records]  # one partition: in order, none lost, none twice
    got = list(read_to_end(bootstrap, topic, timeout_s=20))
    assert [m.value() for m in got] == [r.value for r in records]
    assert got[0].headers() == [("h", b"1")]


@pytest.mark.unit
def test_a_queue_that_stays_full_raises_queue_full_at_the_deadline() -> None:
    producer = small_queue_producer(f"127.0.0.1:{free_port()}")  # nothing listens: nothing is ever delivered
    for i in range(5):
        produce(producer, "t", f"{i}".encode(), deadline=time.monotonic() + 1)
    t0 = time.monotonic()
    with pytest.raises(QueueFull, match="stayed full") as caught:
        produce(producer, "t", b"one too many", deadline=t0 + 0.3)
    assert 0.25 < time.monotonic() - t0 < 3
    assert isinstance(caught.value, BufferError)  # callers treating a full queue as "slow, not broken" still do
    producer.purge()


@pytest.mark.unit
def test_errors_other_than_a_full_queue_are_raised_at_once() -> None:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}", "message.max.bytes": 1000, "log_level": 0})
    t0 = time.monotonic()
    with pytest.raises(KafkaException) as caught:
        produce(producer, "t", b"x" * 5000, deadline=time.monotonic() + 30)
    assert caught.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert time.monotonic() - t0 < 1
