"""Group commit: batches arriving within a short window share one Kafka transaction, run on a dedicated thread.

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
from dataclasses import dataclass
from typing import Protocol

from gateway.errors import GatewayError, KafkaUnavailable, ShuttingDown
from gateway.producer import ProducerFactory, TxProducer, commit_in_doubt, needs_new_producer, produce_record
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
    # Transactions begin at least this far apart: below 1/min_interval batches per second nothing waits longer
    # than `window_s`; above it each transaction carries more batches, so the broker writes fewer commit markers
    # and transaction-log records per event as load grows (docs/gateway.md, "Tuning").
    min_interval_s: float = 0.0
    commit_timeout_s: float = 10.0
    init_timeout_s: float = 10.0
    reconnect_backoff_s: float = 1.0
    retry_after_s: int = 1


class GroupCommitter:
    """One transactional producer and the thread that runs its transactions."""

    def __init__(self, factory: ProducerFactory, settings: CommitSettings,
                 observer: CommitObserver | None = None) -> None:
        self._factory = factory
        self._s = settings
        self._observer = observer or _NullObserver()
        self._pending: collections.deque[_Pending] = collections.deque()
        self._cond = threading.Condition()
        self._producer: TxProducer | None = None
        self._stopping = False
        self._last_begin = -1e9  # monotonic time the last transaction's group was closed
        self._thread = threading.Thread(target=self._run, name="kafka-commit", daemon=True)
        self.healthy = False

    # -- event-loop side ------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

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
            self._cond.notify()
        # Shielded: the outcome must be observed even if the client went away.
        await asyncio.shield(pending.future)

    def queued(self) -> int:
        producer = self._producer
        return len(self._pending) + (len(producer) if producer is not None else 0)

    def stop(self, timeout_s: float) -> None:
        """Finish what is queued (within `timeout_s`), then close the producer and end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout_s)

    def reachable(self, timeout_s: float) -> bool:
        """Whether the producer is healthy and its cluster answers a metadata request (for /readyz; blocking)."""
        producer = self._producer
        if producer is None or not self.healthy:
            return False
        try:
            producer.list_topics(timeout=timeout_s)
        except Exception:
            return False
        return True

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.healthy and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.05)
        return self.healthy

    # -- commit thread ------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            group = self._take_group()
            if group is None:
                break
            if not group:
                continue
            if self._producer is None:
                self._fail(group, KafkaUnavailable("Kafka is unavailable", retry_after=self._s.retry_after_s))
                continue
            self._transact(self._producer, group)
        with self._cond:
            leftover = list(self._pending)
            self._pending.clear()
        self._fail(leftover, ShuttingDown("shutting down", retry_after=self._s.retry_after_s))
        if self._producer is not None:
            self._producer.poll(0)
        log.info("commit thread stopped")

    def _take_group(self) -> list[_Pending] | None:
        """Block for the first batch (reconnecting while idle), then gather more for up to the window."""
        with self._cond:
            while not self._pending:
                if self._stopping:
                    return None
                if self._producer is None:
                    break
                self._cond.wait(0.5)
                if not self._pending:
                    self._producer.poll(0)  # serves librdkafka's log and error callbacks while idle
        if self._producer is None:
            self._connect()
            with self._cond:
                if not self._pending:
                    return []
        now = time.monotonic()
        deadline = max(now + self._s.window_s, self._last_begin + self._s.min_interval_s)
        with self._cond:
            group = [self._pending.popleft()]
            count = len(group[0].records)
            while count < self._s.max_records:
                if not self._pending:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._stopping:
                        break
                    self._cond.wait(remaining)
                    continue
                group.append(self._pending.popleft())
                count += len(group[-1].records)
        self._last_begin = time.monotonic()
        return group

    def _connect(self) -> None:
        try:
            producer = self._factory()
            producer.init_transactions(self._s.init_timeout_s)
        except Exception as exc:
            log.warning("producer init failed: %s", exc)
            self.healthy = False
            time.sleep(self._s.reconnect_backoff_s)
            return
        self._producer = producer
        self.healthy = True
        log.info("transactional producer ready")

    def _transact(self, producer: TxProducer, group: list[_Pending]) -> None:
        t0 = time.monotonic()
        records = sum(len(p.records) for p in group)
        try:
            producer.begin_transaction()
            deadline = t0 + self._s.commit_timeout_s
            for pending in group:
                for record in pending.records:
                    self._produce(producer, record, deadline)
            producer.commit_transaction(max(0.1, deadline - time.monotonic()))
        except Exception as exc:
            log.warning("transaction of %d batches failed: %s", len(group), exc)
            self.healthy = False  # new batches get their 503 at once while the producer recovers
            error = KafkaUnavailable("transaction aborted: Kafka is unavailable", retry_after=self._s.retry_after_s)
            queued = self._drain()
            if queued:
                log.warning("failing %d batches queued behind the failed transaction", len(queued))
            self._fail(group + queued, error)
            self._recover(producer, exc)
            self._fail(self._drain(), error)  # any that passed the health check before it changed
            self._observer.transaction(time.monotonic() - t0, len(group), records, False)
            return
        producer.poll(0)
        for pending in group:
            pending.loop.call_soon_threadsafe(_resolve, pending.future, None)
        self._observer.transaction(time.monotonic() - t0, len(group), records, True)

    @staticmethod
    def _produce(producer: TxProducer, record: KafkaRecord, deadline: float) -> None:
        while True:
            try:
                produce_record(producer, record)
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise
                producer.poll(0.01)

    def _drain(self) -> list[_Pending]:
        with self._cond:
            queued = list(self._pending)
            self._pending.clear()
        return queued

    def _recover(self, producer: TxProducer, exc: BaseException) -> None:
        if commit_in_doubt(exc):
            log.warning("commit in doubt; replacing the producer (an abort would conflict with the commit)")
        elif not needs_new_producer(exc):
            try:
                producer.abort_transaction(self._s.commit_timeout_s)
                self.healthy = True
                return
            except Exception as abort_exc:
                log.warning("abort failed, replacing the producer: %s", abort_exc)
        # A new producer with the same transactional id fences this one and aborts its open transaction.
        self._producer = None
        self.healthy = False

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
