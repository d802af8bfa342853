"""Group commit under a hung or failing broker: queued batches fail at once, a commit in doubt replaces the
producer without an abort (issue 14 item 12), and librdkafka's own log lines go through our logger (item 16)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from gateway.commit import CommitSettings, GroupCommitter
from gateway.errors import KafkaUnavailable
from gateway.producer import confluent_factory, kafka_config
from gateway.records import KafkaRecord
from stack.topics import EVENTS_TOPIC
from tests.gateway.helpers import FakeProducer
from tests.support.kafka import consume_all, end_offsets
from tests.support.ports import refused_port
from tests.support.wait import wait_for, wait_until

TIMED_OUT = KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True))


def _records(tag: str) -> list[KafkaRecord]:
    return [KafkaRecord("t", tag.encode(), tag.encode(), [])]


def _committer(producers: list[FakeProducer], hung_init: threading.Event) -> GroupCommitter:
    """Producers after the first one hang in init_transactions until `hung_init` is set."""
    def factory() -> FakeProducer:
        p = FakeProducer()
        if producers:
            p.init_gate = hung_init
        producers.append(p)
        return p

    c = GroupCommitter(factory, CommitSettings(window_s=0.01, commit_timeout_s=1.0, init_timeout_s=30.0,
                                               reconnect_backoff_s=0.05))
    c.start()
    assert c.wait_ready(10)
    return c


@pytest.mark.unit
def test_batches_queued_behind_a_failed_transaction_get_503_before_the_new_producer_is_ready() -> None:
    producers: list[FakeProducer] = []
    hung_init = threading.Event()
    c = _committer(producers, hung_init)
    first = producers[0]
    gate = first.commit_gate = threading.Event()
    first.fail_commit = TIMED_OUT

    async def run() -> list[BaseException | None]:
        head = asyncio.create_task(c.commit(_records("head")))
        await wait_until("the head batch's transaction", lambda: first.open)
        queued = [asyncio.create_task(c.commit(_records(f"q{i}"))) for i in range(3)]
        await asyncio.sleep(0)  # one pass of the loop: each task has queued its batch (before its first await)
        gate.set()  # the commit now fails (timed out)
        # Every batch is answered while the replacement producer still hangs in init_transactions.
        return await asyncio.wait_for(asyncio.gather(head, *queued, return_exceptions=True), 20)

    try:
        results = asyncio.run(run())
        assert len(results) == 4 and all(isinstance(r, KafkaUnavailable) for r in results), results
        wait_for("the replacement producer", lambda: len(producers) >= 2, 10)
        assert len(producers) == 2 and producers[1].inits == 0  # the replacement still hangs in its init
        with pytest.raises(KafkaUnavailable):  # while recovering, new batches are refused at once
            asyncio.run(c.commit(_records("late")))
    finally:
        hung_init.set()
    assert c.wait_ready(10)
    asyncio.run(c.commit(_records("after")))
    c.stop(5)
    assert producers[1].committed and not first.committed


@pytest.mark.unit
def test_a_commit_in_doubt_replaces_the_producer_without_trying_an_abort() -> None:
    producers: list[FakeProducer] = []
    ready = threading.Event()
    ready.set()
    c = _committer(producers, ready)
    producers[0].fail_commit = TIMED_OUT
    producers[0].fail_abort = KafkaException(KafkaError(KafkaError._CONFLICT, "conflicting commit in progress"))
    with pytest.raises(KafkaUnavailable):
        asyncio.run(c.commit(_records("x")))
    wait_for("the replacement producer", lambda: len(producers) >= 2, 10)
    assert c.wait_ready(10) and len(producers) == 2
    assert producers[0].abort_attempts == 0  # no doomed abort (it would fail with _CONFLICT)
    asyncio.run(c.commit(_records("y")))
    c.stop(5)
    assert producers[1].committed


@pytest.mark.integration
def test_librdkafka_logs_go_through_the_python_logger(caplog: pytest.LogCaptureFixture) -> None:
    """A producer aimed at a closed port: librdkafka's FAIL lines arrive as records of `gateway.librdkafka`."""
    with refused_port() as port:  # bound, never listening: connections are refused
        config = kafka_config(f"127.0.0.1:{port}", "log-test", 2.0, 4.0)
        assert isinstance(config["logger"], logging.Logger)
        producer = Producer(config)
        caplog.set_level(logging.INFO, logger="gateway.librdkafka")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(r.name == "gateway.librdkafka" for r in caplog.records):
            producer.poll(0.2)
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.librdkafka"]
    assert lines and any("FAIL" in line or "refused" in line.lower() for line in lines), lines


@pytest.mark.integration
def test_a_commit_sends_its_records_without_waiting_for_the_linger(bootstrap: str) -> None:
    """Records wait in librdkafka for the commit (linger.ms 100 by default); the commit's flush must send them at
    once. With a linger of 20 s, a transaction committed in under 10 s can only have been sent by the flush."""
    config = {**kafka_config(bootstrap, f"linger-test-{uuid.uuid4()}", 30.0, 60.0, linger_ms=20_000.0),
              "logger": logging.getLogger("gateway.librdkafka")}
    c = GroupCommitter(confluent_factory(config), CommitSettings(commit_timeout_s=10.0, init_timeout_s=10.0))
    c.start()
    assert c.wait_ready(30)
    marker = uuid.uuid4().hex
    start = end_offsets(bootstrap, EVENTS_TOPIC)
    records = [KafkaRecord(EVENTS_TOPIC, f"node-{i}".encode(), marker.encode(), []) for i in range(12)]

    async def run() -> float:
        t0 = time.monotonic()
        await c.commit(records)
        return time.monotonic() - t0

    try:
        elapsed = asyncio.run(run())
    finally:
        c.stop(10)
    assert elapsed < 10.0
    found = [r for r in consume_all(bootstrap, EVENTS_TOPIC, "read_committed", 12, start=start)
             if r.value() is not None and r.value() == marker.encode()]
    assert len(found) == 12
