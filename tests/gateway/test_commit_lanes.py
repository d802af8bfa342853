"""Unit tests of group commit with several lanes (transactional producers taking turns), with fake producers."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from gateway.commit import CommitSettings, GroupCommitter
from gateway.errors import KafkaUnavailable, ShuttingDown
from gateway.records import KafkaRecord
from tests.gateway.helpers import FakeProducer

pytestmark = pytest.mark.unit


def _records(tag: str, n: int = 2) -> list[KafkaRecord]:
    return [KafkaRecord("t", tag.encode(), f"{tag}-{i}".encode(), []) for i in range(n)]


def _lanes(count: int, **settings: float) -> tuple[GroupCommitter, list[FakeProducer]]:
    producers = [FakeProducer() for _ in range(count)]
    factories = [lambda p=p: p for p in producers]
    s = CommitSettings(window_s=float(settings.get("window_s", 0.001)), commit_timeout_s=1.0, init_timeout_s=1.0,
                       reconnect_backoff_s=0.05, min_interval_s=float(settings.get("min_interval_s", 0.0)))
    c = GroupCommitter(factories, s)
    c.start()
    assert c.wait_ready(5)
    return c, producers


def test_a_batch_arriving_while_one_lane_commits_is_committed_by_the_other() -> None:
    c, (first, second) = _lanes(2)
    gate = threading.Event()
    first.commit_gate = second.commit_gate = gate  # whichever lane takes the first batch holds it there

    async def run() -> None:
        held = asyncio.ensure_future(c.commit(_records("held")))
        while not (first.open or second.open):
            await asyncio.sleep(0.005)
        busy, free = (first, second) if first.open else (second, first)
        free.commit_gate = None
        await asyncio.wait_for(c.commit(_records("quick")), 5)  # does not wait for the held commit
        assert [len(t) for t in free.committed] == [2] and not busy.committed
        gate.set()
        await held

    asyncio.run(run())
    c.stop(5)
    assert sorted(len(p.committed) for p in (first, second)) == [1, 1]


def test_under_load_lanes_take_turns_and_each_transaction_carries_the_queue() -> None:
    c, producers = _lanes(2, min_interval_s=0.05)

    async def run() -> None:
        await asyncio.gather(*(c.commit(_records(f"b{i}")) for i in range(40)))

    asyncio.run(run())
    c.stop(5)
    sizes = [len(t) for p in producers for t in p.committed]
    assert sum(sizes) == 80 and len(sizes) < 40  # grouped, not one transaction per batch


def test_a_failed_transaction_fails_its_group_then_the_lanes_commit_again() -> None:
    c, (first, second) = _lanes(2)
    first.fail_commit = KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out", retriable=True))
    second.fail_commit = first.fail_commit

    async def run() -> list[BaseException | None]:
        results = await asyncio.gather(c.commit(_records("a")), return_exceptions=True)
        return list(results)

    assert isinstance(asyncio.run(run())[0], KafkaUnavailable)
    first.fail_commit = second.fail_commit = None

    async def later() -> None:
        await asyncio.wait_for(c.commit(_records("b")), 5)

    for _ in range(100):  # the failed lane replaces its producer; the other serves meanwhile
        try:
            asyncio.run(later())
            break
        except KafkaUnavailable:
            threading.Event().wait(0.02)
    c.stop(5)
    assert sum(len(p.committed) for p in (first, second)) >= 1


def test_stop_fails_what_no_lane_took() -> None:
    c, (first, second) = _lanes(2)
    gate = threading.Event()
    first.commit_gate = second.commit_gate = gate

    async def run() -> list[BaseException | None]:
        tasks = [asyncio.ensure_future(c.commit(_records(f"b{i}"))) for i in range(3)]
        await asyncio.sleep(0.1)
        stopper = asyncio.get_running_loop().run_in_executor(None, c.stop, 0.3)
        await stopper
        gate.set()
        return list(await asyncio.gather(*tasks, return_exceptions=True))

    results = asyncio.run(run())
    assert all(r is None or isinstance(r, ShuttingDown) for r in results), results


class _Cpu:
    """A CPU clock running at `share` cores of wall time from the moment `share` is set (the worker's load)."""

    def __init__(self, share: float) -> None:
        self._share, self._at, self._spent = share, time.monotonic(), 0.0

    def __call__(self) -> float:
        now = time.monotonic()
        self._spent += (now - self._at) * self._share
        self._at = now
        return self._spent

    def set(self, share: float) -> None:
        self()
        self._share = share


def _piled_up(c: GroupCommitter, producer: FakeProducer, cpu: _Cpu) -> list[float]:
    """A held transaction with five batches piling up behind it, then one batch; then the load falls to 0.3 of a
    core, one batch settles, and one more: how long the first single batch and the last waited."""
    async def run() -> list[float]:
        loop = asyncio.get_running_loop()
        gate = threading.Event()
        producer.commit_gate = gate
        first = asyncio.ensure_future(c.commit(_records("first")))
        await asyncio.sleep(0.05)  # the first transaction is held: the next five pile up behind it
        pile = [asyncio.ensure_future(c.commit(_records(f"p{i}"))) for i in range(5)]
        await asyncio.sleep(0.05)
        gate.set()
        producer.commit_gate = None
        await asyncio.gather(first, *pile)  # one group of 5 batches
        t0 = loop.time()
        await c.commit(_records("after-pile"))
        waited = loop.time() - t0
        cpu.set(0.3)
        await asyncio.sleep(0.02)
        await c.commit(_records("settle"))  # its group samples the lower load
        t1 = loop.time()
        await c.commit(_records("calm"))
        return [waited, loop.time() - t1]

    return asyncio.run(run())


@pytest.mark.parametrize(("cpu_share", "spaced"), [(0.95, True), (0.5, False)])
def test_a_saturated_worker_spaces_transactions_by_the_busy_interval_then_returns_to_the_minimum(
        cpu_share: float, spaced: bool) -> None:
    """While the worker uses busy_cpu of a core or more, transactions begin busy_interval apart; at half its capacity,
    or once the load falls, they keep the minimum interval whatever the size of their groups."""
    producers = [FakeProducer()]
    s = CommitSettings(window_s=0.001, commit_timeout_s=1.0, init_timeout_s=1.0, min_interval_s=0.0,
                       busy_interval_s=0.3, busy_cpu=0.85, busy_waiting=1000, cpu_sample_s=0.01)
    cpu = _Cpu(cpu_share)
    c = GroupCommitter(lambda: producers[0], s, cpu_clock=cpu)
    c.start()
    assert c.wait_ready(5)
    busy_wait, calm_wait = _piled_up(c, producers[0], cpu)
    c.stop(5)
    assert [len(t) for t in producers[0].committed] == [2, 10, 2, 2, 2]
    assert (busy_wait >= 0.2) is spaced and calm_wait < 0.2


def test_batches_waiting_for_a_commit_count_as_saturation() -> None:
    """An idle CPU with busy_waiting batches or more waiting for their commit spaces transactions too."""
    producers = [FakeProducer()]
    s = CommitSettings(window_s=0.001, commit_timeout_s=1.0, init_timeout_s=1.0, min_interval_s=0.0,
                       busy_interval_s=0.3, busy_cpu=0.85, busy_waiting=4, cpu_sample_s=0.01)
    c = GroupCommitter(lambda: producers[0], s, cpu_clock=_Cpu(0.0))
    c.start()
    assert c.wait_ready(5)
    busy_wait, _ = _piled_up(c, producers[0], _Cpu(0.0))
    c.stop(5)
    assert busy_wait >= 0.2


@pytest.mark.parametrize(("grace_s", "ready"), [(30.0, True), (0.0, False)])
def test_readiness_outlasts_a_failed_transaction_for_the_grace_while_the_cluster_answers(grace_s: float,
                                                                                      ready: bool) -> None:
    made: list[FakeProducer] = []
    hung = threading.Event()

    def factory() -> FakeProducer:
        p = FakeProducer()
        if made:
            p.init_gate = hung  # the replacement hangs in init_transactions (the coordinator is moving)
        made.append(p)
        return p

    s = CommitSettings(window_s=0.001, commit_timeout_s=1.0, init_timeout_s=1.0, reconnect_backoff_s=0.05,
                       ready_grace_s=grace_s)
    c = GroupCommitter(factory, s)
    c.start()
    assert c.wait_ready(5) and c.reachable(1.0)
    made[0].fail_commit = KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))

    async def run() -> None:
        with pytest.raises(KafkaUnavailable):
            await c.commit(_records("lost-leader"))

    asyncio.run(run())
    for _ in range(100):  # the lane replaces its producer: the new one waits in init_transactions
        if len(made) == 2:
            break
        threading.Event().wait(0.02)
    assert not c.healthy and c.reachable(1.0) is ready
    made[1].unreachable = True
    assert c.reachable(1.0) is ready  # it answered a moment ago: within the grace, a slow answer is not a verdict
    hung.set()
    c.stop(5)


def test_readiness_ends_when_the_cluster_has_not_answered_for_the_grace() -> None:
    made: list[FakeProducer] = []

    def factory() -> FakeProducer:
        made.append(FakeProducer())
        return made[-1]

    s = CommitSettings(window_s=0.001, commit_timeout_s=1.0, init_timeout_s=1.0, reconnect_backoff_s=0.05,
                       ready_grace_s=0.3)
    c = GroupCommitter(factory, s)
    c.start()
    assert c.wait_ready(5) and c.reachable(1.0)
    made[0].unreachable = True  # the cluster stops answering metadata (a broker's partitions are moving)
    assert c.reachable(0.05)  # answered less than the grace ago: still ready
    threading.Event().wait(0.35)
    assert not c.reachable(0.05)  # no answer for longer than the grace: not ready
    made[0].unreachable = False
    assert c.reachable(0.05)
    c.stop(5)


def test_a_gateway_whose_cluster_never_answered_is_not_ready() -> None:
    made: list[FakeProducer] = []

    def factory() -> FakeProducer:
        made.append(FakeProducer())
        made[-1].unreachable = True
        return made[-1]

    c = GroupCommitter(factory, CommitSettings(window_s=0.001, commit_timeout_s=1.0, init_timeout_s=1.0,
                                               reconnect_backoff_s=0.05, ready_grace_s=30.0))
    c.start()
    assert c.wait_ready(5) and not c.reachable(0.05)
    c.stop(5)
