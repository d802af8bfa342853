"""Unit tests of group commit with a fake transactional producer."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from gateway.commit import CommitSettings, GroupCommitter
from gateway.errors import KafkaUnavailable, ShuttingDown
from gateway.records import KafkaRecord
from tests.gateway.helpers import FakeProducer
from tests.support.wait import wait_for

pytestmark = pytest.mark.unit


def _records(tag: str, n: int = 2) -> list[KafkaRecord]:
    return [KafkaRecord("t", tag.encode(), f"{tag}-{i}".encode(), []) for i in range(n)]


def _committer(producers: list[FakeProducer], **settings: float) -> GroupCommitter:
    def factory() -> FakeProducer:
        p = FakeProducer()
        producers.append(p)
        return p

    s = CommitSettings(window_s=float(settings.get("window_s", 0.05)), max_records=int(settings.get("max", 1000)),
                       commit_timeout_s=1.0, init_timeout_s=1.0, reconnect_backoff_s=0.05,
                       min_interval_s=float(settings.get("min_interval_s", 0.0)))
    c = GroupCommitter(factory, s)
    c.start()
    assert c.wait_ready(5)
    return c


def test_batches_within_the_window_share_one_transaction() -> None:
    producers: list[FakeProducer] = []
    c = _committer(producers, window_s=0.2)

    async def run() -> None:
        await asyncio.gather(*(c.commit(_records(f"b{i}")) for i in range(5)))

    asyncio.run(run())
    c.stop(5)
    (p,) = producers
    assert len(p.committed) == 1 and len(p.committed[0]) == 10


def test_under_load_transactions_begin_min_interval_apart_and_carry_more_batches() -> None:
    """Adaptive transactions: a batch arriving soon after a transaction began waits for the interval, with every
    batch arriving meanwhile, so a busy worker commits fewer, larger transactions."""
    producers: list[FakeProducer] = []
    c = _committer(producers, window_s=0.001, min_interval_s=1.0)

    async def run() -> None:
        await c.commit(_records("first"))  # nothing before it: committed after the window only

        async def later(i: int) -> None:
            await asyncio.sleep(0.02 * i)  # arrivals 20 ms apart, within the interval: the test's input
            await c.commit(_records(f"b{i}"))

        await asyncio.gather(*(later(i) for i in range(5)))

    asyncio.run(run())
    c.stop(5)
    assert [len(t) for t in producers[0].committed] == [2, 10]


def test_at_light_load_the_interval_adds_no_wait() -> None:
    """Batches further apart than the interval are committed after the window, not after the interval."""
    producers: list[FakeProducer] = []
    c = _committer(producers, window_s=0.001, min_interval_s=0.5)
    waits: list[float] = []

    async def run() -> None:
        for i in range(2):
            await asyncio.sleep(0.6)  # batches further apart than the interval: the test's input
            t0 = time.monotonic()
            await c.commit(_records(f"b{i}"))
            waits.append(time.monotonic() - t0)

    asyncio.run(run())
    c.stop(5)
    assert [len(t) for t in producers[0].committed] == [2, 2]
    assert waits[1] < 0.45  # the interval (0.5 s) had passed: no wait for it


def test_record_cap_splits_transactions() -> None:
    producers: list[FakeProducer] = []
    c = _committer(producers, window_s=0.2, max=4)

    async def run() -> None:
        await asyncio.gather(*(c.commit(_records(f"b{i}")) for i in range(4)))

    asyncio.run(run())
    c.stop(5)
    assert [len(t) for t in producers[0].committed] == [4, 4]


def test_failed_commit_aborts_and_fails_every_batch_of_the_group() -> None:
    producers: list[FakeProducer] = []
    c = _committer(producers, window_s=0.2)
    producers[0].fail_commit = KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "delivery timed out"))

    async def run() -> list[BaseException | None]:
        return await asyncio.gather(*(c.commit(_records(f"b{i}")) for i in range(3)), return_exceptions=True)

    results = asyncio.run(run())
    assert all(isinstance(r, KafkaUnavailable) and r.retry_after for r in results)
    wait_for("the abort", lambda: producers[0].aborted == 1, 5)  # the batches are answered before the abort
    assert not producers[0].committed
    wait_for("the lane healthy again", lambda: c.healthy, 5)  # the abort worked: the same producer goes on
    producers[0].fail_commit = None
    asyncio.run(c.commit(_records("after")))
    c.stop(5)
    assert len(producers) == 1 and len(producers[0].committed) == 1


def test_fenced_producer_is_replaced() -> None:
    producers: list[FakeProducer] = []
    c = _committer(producers)
    producers[0].fail_commit = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    with pytest.raises(KafkaUnavailable):
        asyncio.run(c.commit(_records("x")))
    assert c.wait_ready(5)
    asyncio.run(c.commit(_records("y")))
    c.stop(5)
    assert len(producers) == 2 and producers[1].committed and producers[0].aborted == 0


def test_failed_abort_replaces_the_producer_and_unhealthy_fails_fast() -> None:
    producers: list[FakeProducer] = []
    c = _committer(producers)
    producers[0].fail_commit = KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "delivery timed out"))
    producers[0].fail_abort = KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out"))
    with pytest.raises(KafkaUnavailable):
        asyncio.run(c.commit(_records("x")))
    wait_for("a new producer", lambda: len(producers) >= 2, 5)  # the batch is answered before the abort is tried
    assert c.wait_ready(5) and len(producers) == 2
    asyncio.run(c.commit(_records("y")))
    c.stop(5)
    assert producers[1].committed


def test_stop_finishes_queued_work_then_refuses() -> None:
    producers: list[FakeProducer] = []
    c = _committer(producers, window_s=0.01)
    producers[0].commit_delay = 0.2

    async def run() -> None:
        tasks = [asyncio.create_task(c.commit(_records(f"b{i}"))) for i in range(3)]
        await asyncio.sleep(0)  # one pass of the loop: each task has queued its batch (before its first await)
        await asyncio.get_running_loop().run_in_executor(None, c.stop, 5)
        await asyncio.gather(*tasks)
        with pytest.raises(ShuttingDown):
            await c.commit(_records("late"))

    asyncio.run(run())
    assert sum(len(t) for t in producers[0].committed) == 6


def test_buffer_error_is_retried_until_the_queue_drains() -> None:
    producers: list[FakeProducer] = []
    c = _committer(producers)
    p = producers[0]
    original = p.produce
    calls = {"n": 0}

    def flaky(topic: str, **kw: object) -> None:
        calls["n"] += 1
        if calls["n"] % 2:
            raise BufferError("queue full")
        original(topic, **kw)

    p.produce = flaky  # type: ignore[method-assign]
    asyncio.run(c.commit(_records("x", 3)))
    c.stop(5)
    assert len(p.committed[0]) == 3
