"""common/kafka_read.py against the real broker: ends taken once, empty, transactional (markers, aborted, open),
compacted and deleted-from partitions, time starts, single records, and the errors it raises."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from common.kafka_read import (
    OFFSET_BEGINNING,
    ReadTimeout,
    TopicMissing,
    consumer_config,
    drain,
    end_offsets,
    read_at,
    read_to_end,
    topic_end_offsets,
)

pytestmark = pytest.mark.integration


def new_topic(bootstrap: str, partitions: int = 3, **config: str) -> str:
    name = f"test.read.{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                             config=config)]).values():
        fut.result(30)
    return name


def plain_producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 1})


def tx_producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"test-read-{uuid.uuid4()}",
                         "enable.idempotence": True, "acks": "all", "linger.ms": 1})
    producer.init_transactions(30)
    return producer


def write(bootstrap: str, topic: str, values: list[tuple[int, bytes]]) -> None:
    producer = plain_producer(bootstrap)
    for partition, value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


def read_values(bootstrap: str, topic: str, **kwargs: object) -> list[bytes]:
    return [bytes(m.value() or b"") for m in read_to_end(bootstrap, topic, **kwargs)]  # type: ignore[arg-type]


@pytest.fixture
def topic(bootstrap: str) -> str:
    return new_topic(bootstrap)


def test_an_empty_topic_reads_as_nothing_at_once(bootstrap: str, topic: str) -> None:
    t0 = time.monotonic()
    assert read_values(bootstrap, topic, timeout_s=10) == []
    assert time.monotonic() - t0 < 5  # no partition is waited for: nothing is there to reach


def test_every_record_in_partition_order_empty_partitions_included(bootstrap: str, topic: str) -> None:
    write(bootstrap, topic, [(0, b"a0"), (0, b"a1"), (2, b"c0"), (0, b"a2")])  # partition 1 stays empty
    got = list(read_to_end(bootstrap, topic, timeout_s=20))
    assert sorted(bytes(m.value() or b"") for m in got) == [b"a0", b"a1", b"a2", b"c0"]
    assert [m.value() for m in got if m.partition() == 0] == [b"a0", b"a1", b"a2"]


def test_the_end_is_taken_once_so_a_read_ends_while_a_producer_keeps_writing(bootstrap: str, topic: str) -> None:
    write(bootstrap, topic, [(p, f"before-{p}".encode()) for p in range(3)])
    stop = threading.Event()

    def keep_writing() -> None:
        producer = plain_producer(bootstrap)
        n = 0
        while not stop.is_set():
            producer.produce(topic, value=f"during-{n}".encode(), partition=n % 3)
            producer.poll(0.005)
            n += 1
        producer.flush(10)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        ends = topic_end_offsets(bootstrap, topic)
        got = list(read_to_end(bootstrap, topic, timeout_s=30))
    finally:
        stop.set()
        writer.join()
    per_partition = {p: sum(1 for m in got if m.partition() == p) for p in range(3)}
    assert all(per_partition[p] >= ends[p] for p in range(3))  # at least what was there before the read began
    assert all((m.offset() or 0) < topic_end_offsets(bootstrap, topic)[m.partition() or 0] for m in got)


def test_transaction_markers_and_aborted_records_end_the_read_without_waiting(bootstrap: str, topic: str) -> None:
    producer = tx_producer(bootstrap)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(10)
    producer.abort_transaction(30)
    t0 = time.monotonic()
    got = read_values(bootstrap, topic, timeout_s=30, stall_s=20)
    assert sorted(got) == [f"committed-{i}".encode() for i in range(4)]
    assert time.monotonic() - t0 < 10  # the markers and aborted records at the end are not waited for
    uncommitted = read_values(bootstrap, topic, committed=False, timeout_s=30)
    assert sorted(uncommitted) == sorted([f"committed-{i}".encode() for i in range(4)]
                                         + [f"aborted-{i}".encode() for i in range(4)])


def test_an_open_transaction_neither_shows_nor_holds_the_read_up(bootstrap: str, topic: str) -> None:
    write(bootstrap, topic, [(0, b"visible")])
    producer = tx_producer(bootstrap)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    producer.produce(topic, value=b"open", partition=1)
    producer.flush(10)
    try:
        t0 = time.monotonic()
        assert read_values(bootstrap, topic, timeout_s=30, stall_s=20) == [b"visible"]
        assert time.monotonic() - t0 < 10
    finally:
        producer.abort_transaction(30)


def test_a_start_offset_reads_only_what_came_after_it(bootstrap: str, topic: str) -> None:
    write(bootstrap, topic, [(0, b"old"), (1, b"old")])
    start = topic_end_offsets(bootstrap, topic)
    write(bootstrap, topic, [(0, b"new"), (2, b"new")])
    assert read_values(bootstrap, topic, start=start, timeout_s=20) == [b"new", b"new"]


def test_since_a_time_reads_from_the_first_record_at_or_after_it(bootstrap: str, topic: str) -> None:
    producer = plain_producer(bootstrap)
    for i, ts in enumerate((1_000_000, 2_000_000, 3_000_000)):
        producer.produce(topic, value=f"t{i}".encode(), partition=0, timestamp=ts)
    producer.produce(topic, value=b"old", partition=1, timestamp=1_000_000)
    assert producer.flush(30) == 0
    assert read_values(bootstrap, topic, since_ms=2_000_000, timeout_s=20) == [b"t1", b"t2"]
    assert read_values(bootstrap, topic, since_ms=4_000_000, timeout_s=20) == []


def test_records_deleted_from_the_front_start_the_read_at_the_first_one_left(bootstrap: str, topic: str) -> None:
    write(bootstrap, topic, [(0, f"r{i}".encode()) for i in range(5)])
    from confluent_kafka import TopicPartition

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, 0, 3)]).values():
        fut.result(30)
    assert read_values(bootstrap, topic, timeout_s=20) == [b"r3", b"r4"]
    assert read_values(bootstrap, topic, start={0: 1}, timeout_s=20) == [b"r3", b"r4"]


def test_a_compacted_topic_reads_to_its_end_across_the_gaps(bootstrap: str) -> None:
    topic = new_topic(bootstrap, 1, **{"cleanup.policy": "compact", "segment.ms": "100",
                                       "min.cleanable.dirty.ratio": "0.0001", "min.compaction.lag.ms": "0",
                                       "delete.retention.ms": "0", "max.compaction.lag.ms": "100"})
    producer = plain_producer(bootstrap)
    deadline = time.monotonic() + 90
    n = 0
    while True:  # rewrite the same keys until the cleaner has removed older values (it wakes every 15 s)
        for key in (b"a", b"b"):
            producer.produce(topic, key=key, value=f"{key.decode()}{n}".encode(), partition=0)
        n += 1
        assert producer.flush(10) == 0
        got = list(read_to_end(bootstrap, topic, timeout_s=20))
        offsets = [m.offset() or 0 for m in got]
        if len(offsets) < topic_end_offsets(bootstrap, topic)[0]:
            break  # some offsets were compacted away
        assert time.monotonic() < deadline, "the log cleaner did not compact the topic in 90 s"
    assert {bytes(m.key() or b"") for m in got} == {b"a", b"b"}
    assert [m.value() for m in got[-2:]] == [f"a{n - 1}".encode(), f"b{n - 1}".encode()]  # the newest of each key


def test_a_partition_that_cannot_reach_its_end_raises_read_timeout(bootstrap: str, topic: str) -> None:
    write(bootstrap, topic, [(0, b"only")])
    consumer = Consumer({**consumer_config(bootstrap), "enable.partition.eof": False})  # no end event to end it
    try:
        ends = end_offsets(consumer, topic)
        with pytest.raises(ReadTimeout, match=r"partitions \[0\]"):
            list(drain(consumer, topic, {0: OFFSET_BEGINNING}, {0: ends[0] + 5}, timeout_s=30, stall_s=1.5))
        t0 = time.monotonic()
        with pytest.raises(ReadTimeout, match="in 1 s"):
            list(drain(consumer, topic, {0: OFFSET_BEGINNING}, {0: ends[0] + 5}, timeout_s=1, stall_s=60))
        assert time.monotonic() - t0 < 5
    finally:
        consumer.close()


def test_a_missing_topic_is_an_error_unless_allowed(bootstrap: str) -> None:
    missing = f"test.read.missing.{uuid.uuid4().hex[:8]}"
    with pytest.raises(TopicMissing, match=missing):
        list(read_to_end(bootstrap, missing, timeout_s=10))
    assert list(read_to_end(bootstrap, missing, timeout_s=10, missing_ok=True)) == []


def test_read_at_returns_the_record_there_or_none(bootstrap: str, topic: str) -> None:
    producer = tx_producer(bootstrap)
    producer.begin_transaction()
    producer.produce(topic, value=b"first", partition=0)
    producer.produce(topic, value=b"second", partition=0)
    producer.commit_transaction(30)
    got = read_at(bootstrap, topic, 0, 1)
    assert got is not None and got.value() == b"second"
    assert read_at(bootstrap, topic, 0, 2) is None  # the commit marker
    assert read_at(bootstrap, topic, 0, 99) is None
    assert read_at(bootstrap, topic, 1, 0) is None
    with pytest.raises(TopicMissing, match="no partition 7"):
        read_at(bootstrap, topic, 7, 0)


@pytest.fixture
def many(bootstrap: str) -> Iterator[str]:
    topic = new_topic(bootstrap, 2)
    write(bootstrap, topic, [(i % 2, str(i).encode()) for i in range(2000)])
    yield topic


def test_a_read_stopped_early_closes_its_consumer(bootstrap: str, many: str) -> None:
    reader = read_to_end(bootstrap, many, timeout_s=20)
    assert next(reader).value() is not None
    reader.close()  # the generator's finally closes the consumer
    assert len(read_values(bootstrap, many, timeout_s=20)) == 2000


def test_an_audit_reads_through_an_open_transaction_when_it_ends(bootstrap: str) -> None:
    """A producer killed mid-transaction holds the last stable offset below the end until the broker aborts its
    transaction. An audit (through_open_transactions) waits for the committed records behind it: a fault test's
    reconciliation once counted them as lost."""
    topic = new_topic(bootstrap, partitions=1)
    write(bootstrap, topic, [(0, b"before")])
    hanging = tx_producer(bootstrap)
    hanging.begin_transaction()
    hanging.produce(topic, value=b"aborted", partition=0)
    assert hanging.flush(30) == 0
    write(bootstrap, topic, [(0, b"after")])  # committed, but behind the open transaction
    timer = threading.Timer(2.0, lambda: hanging.abort_transaction(30))
    timer.start()
    try:
        assert read_values(bootstrap, topic, timeout_s=60, through_open_transactions=True) == [b"before", b"after"]
    finally:
        timer.join()
