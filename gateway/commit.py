"""Group commit: batches arriving within a short window share one Kafka transaction, run by one or more lanes.

A lane is a transactional producer and the thread that runs its transactions, one at a time (Kafka allows one
open transaction per transactional id). With one lane, a batch that arrives while a transaction commits waits
for that commit and then for its own, and the next transaction's first request meets the previous one's commit
markers still being written (the coordinator answers CONCURRENT_TRANSACTIONS, and librdkafka retries 20 ms
later). With two lanes a batch is taken by whichever lane is free, so it waits for one commit only; the lanes
take turns gathering the queue, so at full load each transaction still carries every batch that arrived while
the other lane committed (docs/gateway.md, "Tuning").

Each request awaits a future that is resolved only after `commit_transaction` returned; when anything fails
the transaction is aborted and every batch in it, and every batch queued behind it, gets `KafkaUnavailable`
(503) at once, so a batch is visible to read_committed consumers entirely or not at all and no client waits
for the recovery. A fenced or fatal producer, one whose commit is in doubt (timed out: an abort would fail
with _CONFLICT), or one whose abort failed, is dropped and a new one with the same transactional id is
initialised (which also fences any zombie and aborts its open transaction).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from common.kafka_produce import produce_all
from gateway.errors import GatewayError, KafkaUnavailable, ShuttingDown
from gateway.producer import ProducerFactory, TxProducer, commit_in_doubt, needs_new_producer
from gateway.records import KafkaRecord

log = logging.getLogger("gateway.commit")


class CommitObserver(Protocol):
    def transaction(self, seconds: float, batches: int, records: int, ok: bool) -> None: ...


class _NullObserver:
    def transaction(self, seconds: float, batches: int, records: int, ok: bool) -> None:
        return None


@dataclass
class _Pending:
    records: list[KafkaRecord]
    future: asyncio.Future[None]
    loop: asyncio.AbstractEventLoop


@dataclass(frozen=True)
class CommitSettings:
    window_s: float = 0.002
    max_records: int = 5000
    # Transactions begin at least min_interval / lanes apart (each lane's at least about min_interval apart):
    # below that rate nothing waits longer than `window_s`; above it each transaction carries more batches, so
    # the broker writes fewer commit markers and transaction-log records per event as load grows
    # (docs/gateway.md, "Tuning").
    min_interval_s: float = 0.0
    # While the worker is saturated the interval stretches to `busy_interval_s`, so each transaction carries
    # hundreds of batches' worth of events and the broker's cost per transaction (markers, transaction-log writes:
    # several ms of its CPU) and the worker's own are spread over them; once it is no longer saturated the
    # interval returns to `min_interval_s`. Saturated: the process used at least `busy_cpu` of a core over the
    # last `cpu_sample_s` (its CPU time, every thread), or at least `busy_waiting` batches wait for a commit.
    # Neither grows with the interval itself, unlike the size of the groups, the signal used before: a longer
    # interval makes larger groups, so the worker stayed "busy" at half its capacity (ack p99 67-88 ms there),
    # while at full load the lanes kept up and groups stayed small (3-5 batches, 160-210 transactions/s).
    busy_interval_s: float = 0.0
    busy_cpu: float = 0.85
    busy_waiting: int = 128
    cpu_sample_s: float = 0.1
    commit_timeout_s: float = 10.0
    init_timeout_s: float = 10.0
    reconnect_backoff_s: float = 1.0
    retry_after_s: int = 1
    # /readyz stays ready this long after the last failed transaction while the cluster still answers metadata:
    # a broker loss fails every gateway's transactions at once, and a load balancer that takes them all out
    # turns their quick 503s into closed connections and adds its own rise delay to the recovery.
    ready_grace_s: float = 30.0


class _Lane:
    """One transactional producer and its thread (the producer is None while it is being replaced)."""

    def __init__(self, index: int, factory: ProducerFactory) -> None:
        self.index = index
        self.factory = factory
        self.producer: TxProducer | None = None
        self.candidate: TxProducer | None = None  # the producer being replaced or initialised (for /readyz)
        self.healthy = False
        self.ever_ready = False
        self.failed_at = -1e9  # monotonic time of this lane's last failed transaction
        self.thread: threading.Thread | None = None


class GroupCommitter:
    """The lanes of one worker and the queue of batches they share."""

    def __init__(self, factory: ProducerFactory | Sequence[ProducerFactory], settings: CommitSettings,
                 observer: CommitObserver | None = None, cpu_clock: Callable[[], float] = time.process_time) -> None:
        factories = [factory] if callable(factory) else list(factory)
        if not factories:
            raise ValueError("group commit needs at least one producer factory")
        self._s = settings
        self._observer = observer or _NullObserver()
        self._pending: collections.deque[_Pending] = collections.deque()
        self._pending_records = 0  # records in _pending
        self._idle_lanes = 0  # lanes waiting for a first batch (under _cond)
        self._cond = threading.Condition()
        self._gather = threading.Lock()  # held by the lane gathering the next group: one at a time
        self._stopping = False
        self._last_begin = -1e9  # monotonic time the last group was closed, by any lane
        self._answered_at = -1e9  # monotonic time the cluster last answered /readyz's metadata request
        self._busy = False  # the worker was saturated when the last group closed
        self._cpu_clock = cpu_clock  # CPU seconds of this process, every thread
        self._cpu_sampled = (-1e9, 0.0)  # (monotonic time, CPU seconds) of the last sample
        self._cpu_share = 0.0  # cores this process used between the last two samples
        self._waiting = 0  # batches whose commit() has not returned (read by the lanes, written by the loop)
        self._lanes = [_Lane(i, f) for i, f in enumerate(factories)]
        for lane in self._lanes:
            lane.thread = threading.Thread(target=self._run, args=(lane,), name=f"kafka-commit-{lane.index}",
                                           daemon=True)

    @property
    def healthy(self) -> bool:
        """Whether any lane can take a batch (while none can, new batches get their 503 at once)."""
        return any(lane.healthy for lane in self._lanes)

    # -- event-loop side ------------------------------------------------------------------------------------
    def start(self) -> None:
        for lane in self._lanes:
            assert lane.thread is not None
            lane.thread.start()

    async def commit(self, records: list[KafkaRecord]) -> None:
        """Return once `records` are committed; raise KafkaUnavailable/ShuttingDown when they were not."""
        if self._stopping:
            raise ShuttingDown("shutting down", retry_after=self._s.retry_after_s)
        if not self.healthy:
            raise KafkaUnavailable("Kafka is unavailable", retry_after=self._s.retry_after_s)
        loop = asyncio.get_running_loop()
        pending = _Pending(records, loop.create_future(), loop)
        with self._cond:
            self._pending.append(pending)
            self._pending_records += len(records)
            # Only a lane waiting for a first batch, or one gathering when the group is full, needs waking: a
            # lane gathering until its deadline takes what came meanwhile at the deadline. Waking it for every
            # batch handed the GIL to its thread and back each time (9 % of a worker's samples on the Avro path).
            if self._idle_lanes or self._pending_records >= self._s.max_records:
                self._cond.notify()
        self._waiting += 1
        try:
            # Shielded: the outcome must be observed even if the client went away.
            await asyncio.shield(pending.future)
        finally:
            self._waiting -= 1

    def queued(self) -> int:
        in_producers = sum(len(p) for p in (lane.producer for lane in self._lanes) if p is not None)
        return len(self._pending) + in_producers

    def stop(self, timeout_s: float) -> None:
        """Finish what is queued (within `timeout_s`), then close the producers and end the threads."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout_s
        for lane in self._lanes:
            if lane.thread is not None and lane.thread.is_alive():
                lane.thread.join(max(0.0, deadline - time.monotonic()))
        self._fail(self._drain(), ShuttingDown("shutting down", retry_after=self._s.retry_after_s))

    def reachable(self, timeout_s: float) -> bool:
        """Whether a lane that is healthy, or failed a transaction less than `ready_grace_s` ago, has a producer
        whose cluster answers a metadata request within `timeout_s`, or answered one less than `ready_grace_s` ago
        (for /readyz; blocking). While a dead broker's partitions move, metadata answers can take seconds; had
        readiness failed then, HAProxy would cut the requests in flight on this gateway, whose transactions still
        commit, and resend them to another (written twice, seen in the cluster's leader-kill test)."""
        now = time.monotonic()
        for lane in self._lanes:
            producer = lane.producer or lane.candidate
            recent = lane.ever_ready and now - lane.failed_at < self._s.ready_grace_s
            if producer is None or not (lane.healthy or recent):
                continue
            try:
                producer.list_topics(timeout=timeout_s)
            except Exception:
                return now - self._answered_at < self._s.ready_grace_s
            self._answered_at = time.monotonic()
            return True
        return False

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until every lane is ready (or the timeout); True when at least one is."""
        deadline = time.monotonic() + timeout_s
        while (not all(lane.healthy for lane in self._lanes) and time.monotonic() < deadline
               and any(lane.thread is not None and lane.thread.is_alive() for lane in self._lanes)):
            time.sleep(0.05)
        return self.healthy

    # -- lane threads ---------------------------------------------------------------------------------------
    def _run(self, lane: _Lane) -> None:
        while True:
            if lane.producer is None:
                if self._stopping:
                    break
                self._connect(lane)
                continue
            group = self._take_group(lane)
            if group is None:
                break
            if group:
                self._transact(lane, lane.producer, group)
        if lane.producer is not None:
            lane.producer.poll(0)
        log.info("commit lane %d stopped", lane.index)

    def _take_group(self, lane: _Lane) -> list[_Pending] | None:
        """Block for the first batch, then gather more for up to the window; [] when nothing came yet."""
        producer = lane.producer
        assert producer is not None
        if not self._gather.acquire(timeout=0.5):  # another lane is gathering
            producer.poll(0)  # serves librdkafka's log and error callbacks while idle
            return None if self._stopping and not self._pending else []
        try:
            with self._cond:
                while not self._pending:
                    if self._stopping:
                        return None
                    self._idle_lanes += 1
                    try:
                        self._cond.wait(0.5)
                    finally:
                        self._idle_lanes -= 1
                    if not self._pending:
                        producer.poll(0)
                        return []  # let the lane check its producer between waits
                now = time.monotonic()
                interval = max(self._s.min_interval_s, self._s.busy_interval_s if self._busy else 0.0)
                spacing = interval / len(self._lanes)
                deadline = max(now + self._s.window_s, self._last_begin + spacing)
                while self._pending_records < self._s.max_records and not self._stopping:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                group: list[_Pending] = []
                count = 0
                while self._pending and count < self._s.max_records:
                    group.append(self._pending.popleft())
                    count += len(group[-1].records)
                self._pending_records -= count
            self._last_begin = time.monotonic()
            busy = self._saturated(self._last_begin)
            if busy != self._busy:
                log.debug("worker %s (%.2f cores, %d batches waiting): transactions %s apart",
                          "saturated" if busy else "no longer saturated", self._cpu_share, self._waiting,
                          f"{self._s.busy_interval_s * 1000:g} ms" if busy else f"{self._s.min_interval_s * 1000:g} ms")
            self._busy = busy
            return group
        finally:
            self._gather.release()

    def _saturated(self, now: float) -> bool:
        """Whether the process used at least `busy_cpu` of a core over the last sample (taken every cpu_sample_s),
        or at least `busy_waiting` batches wait for their commit."""
        at, cpu = self._cpu_sampled
        if now - at >= self._s.cpu_sample_s:
            spent = self._cpu_clock()
            self._cpu_share = (spent - cpu) / (now - at)
            self._cpu_sampled = (now, spent)
        return self._cpu_share >= self._s.busy_cpu or self._waiting >= self._s.busy_waiting

    def _connect(self, lane: _Lane) -> None:
        try:
            producer = lane.candidate = lane.factory()
            producer.init_transactions(self._s.init_timeout_s)
        except Exception as exc:
            log.warning("producer init failed (lane %d): %s", lane.index, exc)
            lane.healthy = False
            time.sleep(self._s.reconnect_backoff_s)
            return
        lane.producer = producer
        lane.healthy = lane.ever_ready = True
        log.info("transactional producer ready (lane %d)", lane.index)

    def _transact(self, lane: _Lane, producer: TxProducer, group: list[_Pending]) -> None:
        t0 = time.monotonic()
        records = sum(len(p.records) for p in group)
        try:
            producer.begin_transaction()
            deadline = t0 + self._s.commit_timeout_s
            for pending in group:  # a full queue past the deadline raises QueueFull, a BufferError
                produce_all(producer, pending.records, deadline=deadline)
            producer.commit_transaction(max(0.1, deadline - time.monotonic()))
        except Exception as exc:
            log.warning("transaction of %d batches failed (lane %d): %s", len(group), lane.index, exc)
            lane.healthy = False  # while no lane is healthy, new batches get their 503 at once
            lane.failed_at = time.monotonic()
            error = KafkaUnavailable("transaction aborted: Kafka is unavailable", retry_after=self._s.retry_after_s)
            queued = self._drain()
            if queued:
                log.warning("failing %d batches queued behind the failed transaction", len(queued))
            self._fail(group + queued, error)
            self._recover(lane, producer, exc)
            if not self.healthy:  # any that passed the health check before it changed
                self._fail(self._drain(), error)
            self._observer.transaction(time.monotonic() - t0, len(group), records, False)
            return
        producer.poll(0)
        for pending in group:
            pending.loop.call_soon_threadsafe(_resolve, pending.future, None)
        self._observer.transaction(time.monotonic() - t0, len(group), records, True)

    def _drain(self) -> list[_Pending]:
        with self._cond:
            queued = list(self._pending)
            self._pending.clear()
            self._pending_records = 0
        return queued

    def _recover(self, lane: _Lane, producer: TxProducer, exc: BaseException) -> None:
        if commit_in_doubt(exc):
            log.warning("commit in doubt; replacing the producer (an abort would conflict with the commit)")
        elif not needs_new_producer(exc):
            try:
                producer.abort_transaction(self._s.commit_timeout_s)
                lane.healthy = True
                return
            except Exception as abort_exc:
                log.warning("abort failed, replacing the producer: %s", abort_exc)
        # A new producer with the same transactional id fences this one and aborts its open transaction.
        lane.candidate, lane.producer = producer, None
        lane.healthy = False

    @staticmethod
    def _fail(group: list[_Pending], error: GatewayError) -> None:
        for pending in group:
            pending.loop.call_soon_threadsafe(_resolve, pending.future, error)


def _resolve(future: asyncio.Future[None], error: GatewayError | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
