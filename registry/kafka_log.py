"""The `_schemas` topic as the registry's SchemaLog: a follower thread that applies records, a fenced writer.

Ordering of writes across instances: every instance writes with the same Kafka `transactional.id`, so at
most one of them can commit at a time. An instance becomes the writer with `init_transactions()` (which
fences the previous writer and aborts its open transaction), then reads the topic up to its end before
deciding anything; it writes each change in one transaction and answers only once its own follower has read
the committed records back. A writer that was fenced in the meantime fails to commit, so nothing of its
decision becomes visible; it re-acquires, catches up and decides again. Followers read `read_committed`, so
every instance applies the same records in the same order and agrees on ids and versions.

A follower registry (another region's, on the primary's topic as mirrored there) opens the log read-only: no
producer is ever created, so it starts with a principal that may only read the topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_delay, wait_fixed

from common.kafka_security import KafkaSecurity
from registry.errors import StoreUnavailable
from registry.schema_log import Apply, ReadOnlyLog, Record, WriterFenced

log = logging.getLogger(__name__)
# librdkafka's own log lines go through Python logging (JSON lines), not raw to stderr.
rdkafka_log = logging.getLogger("registry.rdkafka")


_LEADER_MOVED = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)


def _leader_moved(exc: BaseException) -> bool:
    return isinstance(exc, KafkaException) and bool(exc.args) and exc.args[0].code() in _LEADER_MOVED


class KafkaLog:
    """Follows partition 0 of `topic` from the beginning; writes through a transactional producer unless
    `writable` is False (a follower's log: any write raises ReadOnlyLog and no producer is created)."""

    def __init__(self, bootstrap: str, topic: str, transactional_id: str, timeout_s: float,
                 security: KafkaSecurity | None = None, *, writable: bool = True) -> None:
        self.bootstrap = bootstrap
        self.writable = writable
        self.last_lag_s: float | None = None
        self.security = security or KafkaSecurity()
        self.topic = topic
        self.transactional_id = transactional_id
        self.timeout_s = timeout_s
        self._producer: Any = None
        self._position = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._apply: Apply | None = None
        group = f"headwater-registry-{uuid.uuid4()}"  # never committed: each instance reads everything
        common = {"bootstrap.servers": bootstrap, **self.security.librdkafka(), "group.id": group,
                  "enable.auto.commit": False, "logger": rdkafka_log}
        self._consumer = Consumer({**common, "isolation.level": "read_committed", "enable.partition.eof": True,
                                   "auto.offset.reset": "earliest",
                                   # A write waits until its record is read back: do not idle 500 ms per fetch.
                                   "fetch.wait.max.ms": 50})
        self._meta = Consumer(common)

    async def start(self, apply: Apply) -> None:
        self._loop = asyncio.get_running_loop()
        self._apply = apply
        try:
            topics = await asyncio.to_thread(self._meta.list_topics, self.topic, self.timeout_s)
        except KafkaException as exc:
            raise StoreUnavailable(f"cannot reach Kafka at {self.bootstrap}: {exc}") from None
        meta = topics.topics.get(self.topic)
        if meta is not None and meta.error is not None and meta.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise StoreUnavailable(f"not authorized to read topic {self.topic!r} on {self.bootstrap} "
                                   "(TOPIC_AUTHORIZATION_FAILED: is this the registry's own principal?)")
        if meta is None or meta.error is not None or 0 not in meta.partitions:
            reason = f" ({meta.error.name()})" if meta is not None and meta.error is not None else ""
            who = ("MirrorMaker 2 creates it when it first mirrors the primary's topic, or create it beforehand: "
                   "compacted, one partition" if not self.writable else "the stack creates it")
            raise StoreUnavailable(f"topic {self.topic!r} does not exist on {self.bootstrap}{reason} ({who})")
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._follow, name="schemas-follower", daemon=True)
        self._thread.start()
        await self.catch_up()

    def _follow(self) -> None:
        assert self._loop is not None
        while not self._stop.is_set():
            msg = self._consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self._loop.call_soon_threadsafe(self._advance, msg.offset() or 0)
                else:
                    log.warning("schemas follower error", extra={"error": str(err)})
                continue
            _, timestamp_ms = msg.timestamp()
            self._loop.call_soon_threadsafe(self._on_record, msg.key(), msg.value(), msg.offset() or 0, timestamp_ms)

    def _on_record(self, key: bytes | None, value: bytes | None, offset: int, timestamp_ms: int) -> None:
        assert self._apply is not None
        self._apply(key, value)
        if timestamp_ms > 0:  # the record's create time, which MirrorMaker 2 keeps: lag since the primary wrote it
            self.last_lag_s = round(max(0.0, time.time() - timestamp_ms / 1000), 3)
        self._advance(offset + 1)

    def _advance(self, position: int) -> None:
        self._position = max(self._position, position)
        still: list[tuple[int, asyncio.Future[None]]] = []
        for target, fut in self._waiters:
            if target <= self._position:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((target, fut))
        self._waiters = still

    async def _wait_position(self, target: int) -> None:
        if target <= self._position:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, fut))
        try:
            await asyncio.wait_for(fut, self.timeout_s)
        except TimeoutError:
            raise StoreUnavailable(f"{self.topic}: not read up to offset {target} within {self.timeout_s}s "
                                   f"(at {self._position})") from None

    async def catch_up(self) -> None:
        """Wait until every record written so far (the high watermark now) has been applied.

        After a leader change (a broker of a cluster restarted or killed) the first query may reach the old leader
        and get NOT_LEADER; the client refreshes its metadata meanwhile, so the query is retried within the timeout.
        """
        async def refresh_leaders(_: RetryCallState) -> None:  # now, rather than on librdkafka's metadata timer
            with contextlib.suppress(KafkaException):
                await asyncio.to_thread(self._meta.list_topics, self.topic, 5.0)

        try:
            async for attempt in AsyncRetrying(stop=stop_after_delay(self.timeout_s), wait=wait_fixed(0.2),
                                               retry=retry_if_exception(_leader_moved), before_sleep=refresh_leaders,
                                               reraise=True):
                with attempt:
                    _, high = await asyncio.to_thread(self._meta.get_watermark_offsets,
                                                      TopicPartition(self.topic, 0), self.timeout_s, False)
        except KafkaException as exc:
            raise StoreUnavailable(f"{self.topic}: {exc}") from None
        await self._wait_position(int(high))

    async def acquire_writer(self) -> None:
        if not self.writable:
            raise ReadOnlyLog(f"{self.topic} is a follower's log: writes go to the primary registry")
        if self._producer is None:
            producer = Producer({
                "bootstrap.servers": self.bootstrap, **self.security.librdkafka(),
                "transactional.id": self.transactional_id,
                "enable.idempotence": True, "acks": "all", "linger.ms": 0,
                "transaction.timeout.ms": int(self.timeout_s * 1000), "logger": rdkafka_log,
            })
            try:
                await asyncio.to_thread(producer.init_transactions, self.timeout_s)
            except KafkaException as exc:
                raise StoreUnavailable(f"{self.topic}: cannot become the writer: {exc}") from None
            self._producer = producer
            log.info("became the _schemas writer", extra={"transactional_id": self.transactional_id})
            # Whatever the previous writer committed is now below the high watermark: read it before deciding.
            # While no one fences us, nobody else can commit, so our view stays complete between writes.
            await self.catch_up()

    async def append(self, records: Sequence[Record]) -> None:
        if self._producer is None:
            await self.acquire_writer()
        last = await asyncio.to_thread(self._write, list(records))
        await self._wait_position(last + 1)

    def _write(self, records: list[Record]) -> int:
        producer = self._producer
        offsets: list[int] = []
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                offsets.append(int(msg.offset()))

        try:
            producer.begin_transaction()
            for key, value in records:
                producer.produce(self.topic, key=key, value=value, partition=0, on_delivery=delivered)
            producer.flush(self.timeout_s)
            if errors or len(offsets) != len(records):
                raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, f"not delivered: {errors}"))
            producer.commit_transaction(self.timeout_s)
        except KafkaException as exc:
            raise self._failed(producer, exc) from None
        except SystemError as exc:
            # A fatal error (fencing) raised inside flush() surfaces as SystemError caused by the KafkaException.
            if isinstance(exc.__cause__, KafkaException):
                raise self._failed(producer, exc.__cause__) from None
            raise
        return max(offsets)

    def _failed(self, producer: Any, exc: KafkaException) -> Exception:
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is not None and err.fatal():
            self._producer = None  # fenced (or otherwise unusable): a new producer re-acquires
            return WriterFenced(str(err))
        try:
            producer.abort_transaction(self.timeout_s)
        except KafkaException:
            self._producer = None
        return StoreUnavailable(f"{self.topic}: write failed: {exc}")

    async def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)
        self._consumer.close()
        self._meta.close()
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, 5)
        log.info("closed the _schemas log", extra={"position": self._position})
