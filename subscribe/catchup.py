"""Catch-up: one subscriber's own consumer reading the log from its position until the topic's ring holds that
position (then the subscriber joins the ring, subscriber.py). Used when a subscriber starts or resumes behind
what the ring keeps: `from=earliest`, a time, or a `Last-Event-ID` older than the ring.

Blocking (librdkafka, decoding): every call runs on the hub's catch-up pool, whose size is the limit on
concurrent catch-ups. Reading follows writing: the next batch is fetched only once the last was written, so a
slow client slows only its own consumer, whose prefetch (`queued.max.messages.kbytes`) bounds its memory.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from subscribe.decode import RecordDecoder
from subscribe.filters import Filter
from subscribe.position import Cursor, encode
from subscribe.reader import frame_batch

MAX_RECORDS = 500


@dataclass
class Batch:
    data: bytes
    records: int
    cursor: Cursor
    last_id: bytes


class LogReader:
    def __init__(self, topic: str, tag: bytes, cursor: Cursor, conf: dict[str, Any], *, decoder: RecordDecoder,
                 event_type: str | None, filt: Filter | None) -> None:
        self.topic = topic
        self.tag = tag
        self.cursor = list(cursor)
        self.decoder = decoder
        self.event_type = event_type
        self.filter = filt
        self.stop = threading.Event()
        self._consumer = Consumer(conf)
        self._consumer.assign([TopicPartition(topic, p, o) for p, o in enumerate(cursor)])

    def fetch(self, wait_s: float) -> Batch:
        """The next records after the cursor (waiting up to `wait_s` for the first), framed for this subscriber."""
        first = self._consumer.poll(wait_s)
        msgs = [] if first is None else [first, *self._consumer.consume(MAX_RECORDS - 1, timeout=0)]
        frames = []
        for decoded, frame, _ in frame_batch(self.decoder, msgs, self.cursor, self.tag, self.stop):
            if (self.event_type is None or decoded.event_type == self.event_type) and (
                    self.filter is None or self.filter.matches_fields(decoded.fields)):
                frames.append(frame)
        cursor = tuple(self.cursor)
        return Batch(b"".join(frames), len(frames), cursor, encode(self.tag, cursor))

    def close(self) -> None:
        self.stop.set()
        self._consumer.close()
