"""The live reader of one topic: a Kafka consumer on its own thread that decodes and frames each record once and
hands the frames to the topic's ring on the event loop.

Handing over is bounded: at most two batches wait for the loop; beyond that the thread stops polling and
librdkafka's prefetch (`queued.max.messages.kbytes`) stops fetching, so a busy loop slows the reader, never
grows its memory. Registry trouble (a new schema id that cannot be fetched) stalls the topic and is retried:
records are never skipped.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from subscribe import position as pos
from subscribe import sse
from subscribe.decode import Decoded, RecordDecoder
from subscribe.ring import Entry, Ring

log = logging.getLogger("subscribe.reader")
IN_FLIGHT = 2


def frame_batch(decoder: RecordDecoder, msgs: list[Message], cursor: list[int], tag: bytes,
                stop: threading.Event) -> list[tuple[Decoded, bytes, int]]:
    """Decode `msgs` in order, moving `cursor`: (decoded, its frame, id length) per record; end-of-partition
    events move the cursor past commit markers. Registry trouble is retried until `stop` is set."""
    out = []
    for msg in msgs:
        err = msg.error()
        p = msg.partition() or 0
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF and p < len(cursor):
                cursor[p] = max(cursor[p], msg.offset() or 0)
            elif err.code() != KafkaError._PARTITION_EOF:
                log.warning("kafka: %s", err)
            continue
        if p >= len(cursor):
            continue  # a partition added after the reader started (hub.py restarts readers on that)
        decoded = decode_retrying(decoder, msg, stop)
        if decoded is None:
            break
        cursor[p] = decoded.offset + 1
        event_id = pos.encode(tag, cursor)
        out.append((decoded, sse.record(event_id, decoded.body), len(event_id)))
    return out


def decode_retrying(decoder: RecordDecoder, msg: Message, stop: threading.Event) -> Decoded | None:
    """The decoded record; None when stopped while the registry could not be reached."""
    delay = 0.2
    while True:
        try:
            return decoder.decode(msg)
        except Exception as exc:  # the registry is unreachable or failing: wait, never skip
            log.warning("registry trouble decoding %s[%s]@%s: %s; retrying", msg.topic(), msg.partition(),
                        msg.offset(), exc)
            if stop.wait(delay):
                return None
            delay = min(delay * 2, 5.0)


class TopicReader:
    """Reads `ring.topic` from `ring.start` until stopped."""

    def __init__(self, ring: Ring, decoder: RecordDecoder, conf: dict[str, Any], loop: asyncio.AbstractEventLoop,
                 max_batch: int = 500) -> None:
        self.ring = ring
        self.decoder = decoder
        self.conf = conf
        self.loop = loop
        self.max_batch = max_batch
        self.stop_flag = threading.Event()
        self.error: str | None = None
        self._slots = threading.Semaphore(IN_FLIGHT)
        self._thread = threading.Thread(target=self._run, name=f"reader-{ring.topic}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Blocking: call from an executor thread."""
        self.stop_flag.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        consumer = Consumer(self.conf)
        try:
            consumer.assign([TopicPartition(self.ring.topic, p, o) for p, o in enumerate(self.ring.start)])
            cursor = list(self.ring.start)
            while not self.stop_flag.is_set():
                first = consumer.poll(0.2)
                if first is None:
                    continue
                received = time.monotonic()
                msgs = [first, *consumer.consume(self.max_batch - 1, timeout=0)]
                framed = frame_batch(self.decoder, msgs, cursor, self.ring.tag, self.stop_flag)
                entries = [Entry(frame, id_len, d.partition, d.offset, d.event_type, d.fields)
                           for d, frame, id_len in framed]
                self._hand_over(entries, tuple(cursor), received)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("reader of %s failed", self.ring.topic)
        finally:
            consumer.close()

    def _hand_over(self, entries: list[Entry], tail: pos.Cursor, received: float) -> None:
        while not self._slots.acquire(timeout=0.2):
            if self.stop_flag.is_set():
                return
        try:
            self.loop.call_soon_threadsafe(self._append, entries, tail, received)
        except RuntimeError:  # the loop is closed: shutting down
            self._slots.release()

    def _append(self, entries: list[Entry], tail: pos.Cursor, received: float) -> None:
        try:
            self.ring.append(entries, tail, received)
        finally:
            self._slots.release()
