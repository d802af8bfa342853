"""The instance's shared state: one live reader and ring per topic in use, the subscription limits, the pool of
log readers (catch-up), and a ticker that wakes idle subscribers for heartbeats, cuts off those that fell too far
behind while blocked on a full socket, and stops readers nobody uses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from subscribe import metrics as m
from subscribe.config import SubscribeConfig
from subscribe.decode import RecordDecoder, SchemaSource
from subscribe.errors import NotFound, TooManyForKey, Unavailable
from subscribe.kafka import KafkaMeta, consumer_config
from subscribe.position import MAX_PARTITIONS, Cursor
from subscribe.reader import TopicReader
from subscribe.ring import Ring
from subscribe.streams import Stream

log = logging.getLogger("subscribe.hub")
T = TypeVar("T")
TICK_S = 0.1
PARTITIONS_TTL_S = 5.0


class Cuttable(Protocol):
    """What the ticker needs of a subscriber in ring mode (subscriber.py)."""

    ring: Ring | None

    def check_lag(self) -> None: ...


@dataclass
class Slot:
    key: str
    released: bool = False


class Hub:
    def __init__(self, cfg: SubscribeConfig, schemas: SchemaSource, meta: KafkaMeta | None = None) -> None:
        self.cfg = cfg
        self.schemas = schemas
        self.rings: dict[str, Ring] = {}
        self.readers: dict[str, TopicReader] = {}
        self.decoders: dict[str, RecordDecoder] = {}
        self.users: Counter[str] = Counter()  # subscribers per topic
        self.idle_since: dict[str, float] = {}
        self.per_key: Counter[str] = Counter()
        self.total = 0
        self.subscribers: set[Cuttable] = set()
        self.closing = False
        self.catchups = asyncio.Semaphore(cfg.max_catchups)
        self.catchup_pool = ThreadPoolExecutor(cfg.max_catchups, thread_name_prefix="catchup")
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="kafka-meta")
        self._meta = meta or KafkaMeta(self.consumer_conf(), cfg.kafka_timeout_s)
        self._partitions: dict[str, tuple[float, int | None]] = {}
        self._starting: dict[str, asyncio.Lock] = {}

    def consumer_conf(self) -> dict[str, Any]:
        security = self.cfg.kafka_security.librdkafka()
        return consumer_config(self.cfg.bootstrap, security, prefetch_kb=self.cfg.prefetch_kb)

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # -- limits --

    def reserve(self, key: str) -> Slot:
        if self.closing:
            raise Unavailable("the instance is shutting down", code="shutting_down", retry_after=1)
        if self.total >= self.cfg.max_subscribers:
            m.REFUSED.labels("instance_full").inc()
            raise Unavailable(f"this instance holds its maximum of {self.cfg.max_subscribers} subscriptions",
                              code="instance_full", retry_after=5)
        if self.per_key[key] >= self.cfg.max_per_key:
            m.REFUSED.labels("too_many_subscriptions").inc()
            raise TooManyForKey(f"read key {key!r} holds its maximum of {self.cfg.max_per_key} subscriptions "
                                "on this instance", retry_after=5)
        self.per_key[key] += 1
        self.total += 1
        m.SUBSCRIBERS.set(self.total)
        return Slot(key)

    def release(self, slot: Slot) -> None:
        if slot.released:
            return
        slot.released = True
        self.per_key[slot.key] -= 1
        if self.per_key[slot.key] <= 0:
            del self.per_key[slot.key]
        self.total -= 1
        m.SUBSCRIBERS.set(self.total)

    # -- topics --

    async def partitions(self, topic: str) -> int:
        """The topic's partition count (cached a few seconds); NotFound when it does not exist."""
        now = time.monotonic()
        hit = self._partitions.get(topic)
        if hit is None or now - hit[0] > PARTITIONS_TTL_S:
            hit = (now, await self.blocking(self._meta.partitions, topic))
            self._partitions[topic] = hit
            if len(self._partitions) > 10_000:  # hostile names: the cache stays bounded
                self._partitions = {topic: hit}
        if hit[1] is None:
            raise NotFound(f"no such stream: topic {topic!r} does not exist", code="unknown_stream")
        if hit[1] > MAX_PARTITIONS:
            raise Unavailable(f"topic {topic!r} has more than {MAX_PARTITIONS} partitions", code="too_many_partitions")
        return hit[1]

    async def watermarks(self, topic: str, partitions: int) -> tuple[Cursor, Cursor]:
        return await self.blocking(self._meta.watermarks, topic, partitions)

    async def offsets_at(self, topic: str, partitions: int, ms: int, high: Cursor) -> Cursor:
        return await self.blocking(self._meta.offsets_at, topic, partitions, ms, high)

    def decoder(self, stream: Stream) -> RecordDecoder:
        dec = self.decoders.get(stream.topic)
        if dec is None:
            name = stream.name
            events = stream.event_type is not None

            def stream_of(event_type: str | None) -> str:
                return (f"event.{event_type}" if event_type else "event") if events else name

            dec = RecordDecoder(stream.topic, self.schemas, avro=stream.avro, stream_of=stream_of)
            self.decoders[stream.topic] = dec
        return dec

    async def ring(self, stream: Stream, partitions: int) -> Ring:
        """The topic's ring, its reader started at the topic's end (last stable offsets) if it was not running."""
        ring = self.rings.get(stream.topic)
        if ring is not None:
            return ring
        lock = self._starting.setdefault(stream.topic, asyncio.Lock())
        async with lock:
            ring = self.rings.get(stream.topic)
            if ring is not None:
                return ring
            _, high = await self.watermarks(stream.topic, partitions)
            ring = Ring(stream.topic, high, self.cfg.ring_bytes)
            ring.after_push.append(_observe_hold)
            reader = TopicReader(ring, self.decoder(stream), self.consumer_conf(), asyncio.get_running_loop())
            reader.start()
            self.rings[stream.topic], self.readers[stream.topic] = ring, reader
            if not self.users[stream.topic]:  # the caller attached first: a reader with a subscriber is not idle
                self.idle_since[stream.topic] = time.monotonic()
            m.READERS.set(len(self.readers))
            log.info("reader started", extra={"fields": {"topic": stream.topic, "partitions": partitions}})
            return ring

    def attach(self, topic: str) -> None:
        self.users[topic] += 1
        self.idle_since.pop(topic, None)

    def detach(self, topic: str) -> None:
        self.users[topic] -= 1
        if self.users[topic] <= 0:
            del self.users[topic]
            self.idle_since[topic] = time.monotonic()

    # -- ticker --

    async def run_ticker(self) -> None:
        """Every TICK_S: cut off subscribers too far behind; every heartbeat/3: wake every ring; stop idle readers."""
        last_wake = 0.0
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            for sub in list(self.subscribers):
                sub.check_lag()
            if now - last_wake >= self.cfg.heartbeat_s / 3:
                last_wake = now
                self.wake_all()
            for topic, since in list(self.idle_since.items()):
                if now - since >= self.cfg.idle_reader_s and topic in self.readers:
                    await self._stop_reader(topic)

    def wake_all(self) -> None:
        for ring in self.rings.values():
            ring.unpark_all()
            ring.changed.set()
            ring.changed.clear()

    async def _stop_reader(self, topic: str) -> None:
        reader = self.readers.pop(topic)
        ring = self.rings.pop(topic, None)
        self.idle_since.pop(topic, None)
        if ring is not None:  # nobody should be left on it; any that is ends rather than wait forever
            ring.unpark_all()
            ring.changed.set()
        m.READERS.set(len(self.readers))
        await self.blocking(reader.stop)
        log.info("reader stopped (idle)", extra={"fields": {"topic": topic}})

    async def close(self) -> None:
        self.closing = True
        self.wake_all()
        for topic in list(self.readers):
            reader = self.readers.pop(topic)
            await self.blocking(reader.stop)
        self.rings.clear()
        with contextlib.suppress(Exception):
            await self.blocking(self._meta.close)
        self.catchup_pool.shutdown(wait=False, cancel_futures=True)
        self._pool.shutdown(wait=False, cancel_futures=True)


def _observe_hold(received: float | None) -> None:
    """After the ring wrote a batch to its parked subscribers: the hold of the last one written."""
    if received is not None:
        m.HOLD.observe(time.monotonic() - received)
