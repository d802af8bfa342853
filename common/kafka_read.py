"""Reads a Kafka topic up to the end it had when the read began: assign, poll, stop at every partition's end.

One version of the scan that the tools, the tests and the deployables share, because each hand-written copy
ended a little differently. What holds here:

- The end of each partition is taken once, before reading: a read terminates while producers keep writing.
  With `read_committed` (the default) the end is the last stable offset, so an open transaction does not hold
  the read up, and records of aborted transactions are never returned.
- A partition is finished when a record at or past its end arrives, when the consumer's position reaches the
  end (the last offsets may be transaction markers, aborted records or compacted away: no record comes for
  them), or when the broker reports the partition's end (`enable.partition.eof`). Empty partitions, and
  partitions whose start is already at the end, are not waited for at all.
- Errors are raised, never skipped: `TopicMissing`, `KafkaReadError` (with Kafka's message), and `ReadTimeout`
  when the overall deadline passes or no partition advances for `stall_s`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator, Iterator, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from common.kafka_security import KafkaSecurity

OFFSET_BEGINNING = -2  # librdkafka's logical offsets
OFFSET_END = -1
OFFSET_INVALID = -1001  # "no committed offset"
RETRY_BACKOFF_S = 0.1  # between two tries of a retriable metadata error


class KafkaReadError(RuntimeError):
    """A topic could not be read to its end; the message says which topic and why."""


class TopicMissing(KafkaReadError):
    """The topic does not exist (or has no partitions)."""


class ReadTimeout(KafkaReadError):
    """The read passed its deadline, or made no progress for too long; the message names the partitions left."""


def consumer_config(bootstrap: str, *, group_id: str | None = None, committed: bool = True,
                    **extra: Any) -> dict[str, Any]:
    """A consumer for reading by assignment: no auto-commit, partition-end events, read_committed by default."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group_id or f"headwater.read.{uuid.uuid4()}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed" if committed else "read_uncommitted",
        "enable.partition.eof": True,
        **extra,
    }


def partitions(consumer: Consumer, topic: str, timeout_s: float = 10.0) -> list[int]:
    """The topic's partition numbers, sorted; TopicMissing or KafkaReadError."""
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    except KafkaException as exc:
        raise KafkaReadError(f"Kafka unreachable: {exc}") from None
    if meta is None or meta.error is not None or not meta.partitions:
        raise TopicMissing(f"topic {topic} does not exist")
    return sorted(meta.partitions)


def watermarks(consumer: Consumer, topic: str, parts: list[int] | None = None,
               timeout_s: float = 10.0) -> dict[int, tuple[int, int]]:
    """partition -> (first offset, end offset) now; the end is the last stable offset for a read_committed
    consumer (records of open transactions are not readable yet)."""
    parts = partitions(consumer, topic, timeout_s) if parts is None else parts
    out: dict[int, tuple[int, int]] = {}
    for p in parts:
        try:
            # A topic just created has no leader for a moment (NOT_LEADER_FOR_PARTITION): retried until timeout_s.
            for attempt in Retrying(stop=stop_after_delay(timeout_s), wait=wait_fixed(RETRY_BACKOFF_S),
                                    retry=retry_if_exception(_transient), reraise=True):
                with attempt:
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s,
                                                               cached=False)
        except KafkaException as exc:
            raise KafkaReadError(f"end offsets of {topic} [{p}]: {exc}") from None
        out[p] = (int(low), int(high))
    return out


_TRANSIENT = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT,
                        KafkaError._TIMED_OUT})


def _transient(exc: BaseException) -> bool:
    """An error that a moment's wait cures (librdkafka does not flag these retriable on metadata calls)."""
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in _TRANSIENT)


def end_offsets(consumer: Consumer, topic: str, parts: list[int] | None = None,
                timeout_s: float = 10.0) -> dict[int, int]:
    """partition -> end offset (exclusive) now."""
    return {p: high for p, (_, high) in watermarks(consumer, topic, parts, timeout_s).items()}


def offsets_since(consumer: Consumer, topic: str, parts: list[int], since_ms: int,
                  timeout_s: float = 10.0) -> dict[int, int]:
    """partition -> the first offset whose timestamp is at or after `since_ms`; OFFSET_END where none is."""
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, p, since_ms) for p in parts], timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaReadError(f"offsets of {topic} by time: {exc}") from None
    return {tp.partition: tp.offset if tp.offset >= 0 else OFFSET_END for tp in found}


def drain(consumer: Consumer, topic: str, starts: Mapping[int, int], ends: Mapping[int, int], *,
          timeout_s: float | None = 60.0, stall_s: float = 30.0, batch: int = 500) -> Iterator[Message]:
    """Assign `starts` (offsets, or OFFSET_BEGINNING / OFFSET_INVALID for the beginning, OFFSET_END for nothing)
    and yield every readable record before `ends`. The consumer stays open: the caller owns it."""
    firsts = {p: low for p, (low, _) in watermarks(consumer, topic, sorted(starts)).items()} if any(
        off < 0 for off in starts.values()) else {}
    resolved = {p: _resolve(off, firsts.get(p, 0), ends.get(p, 0)) for p, off in starts.items()}
    consumer.assign([TopicPartition(topic, p, off) for p, off in sorted(resolved.items())])
    pending = {p for p, off in resolved.items() if off < ends.get(p, 0)}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last_progress, positions = time.monotonic(), dict(resolved)
    retriable: KafkaError | None = None
    while pending:
        progressed = False
        # No more than the offsets left: librdkafka's consume waits out its timeout for a batch it cannot fill.
        left = sum(max(ends.get(p, 0) - positions.get(p, 0), 0) for p in pending)
        for msg in consumer.consume(max(1, min(batch, left)), timeout=0.5):
            partition = msg.partition() or 0
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    # read_committed stops at the last stable offset: an open transaction (a producer killed
                    # mid-transaction, until the broker aborts it) holds it below `ends`. Done only at the end.
                    if (msg.offset() or 0) >= ends.get(partition, 0):
                        pending.discard(partition)
                elif err.retriable():
                    retriable = err  # librdkafka retries these itself; reported if the read then times out
                else:
                    raise KafkaReadError(f"reading {topic} [{partition}]: {err.str()}")
                continue
            progressed = True
            offset = msg.offset() or 0
            if partition not in pending or offset >= ends[partition]:
                pending.discard(partition)
                continue
            if offset + 1 >= ends[partition]:
                pending.discard(partition)
            positions[partition] = offset + 1
            yield msg
        if pending and _positions_advanced(consumer, topic, pending, ends, positions):
            progressed = True
        now = time.monotonic()
        if progressed:
            last_progress = now
        if pending and (now - last_progress > stall_s or (deadline is not None and now > deadline)):
            raise _timeout(topic, pending, timeout_s if deadline is not None and now > deadline else None,
                           stall_s, retriable)


def _positions_advanced(consumer: Consumer, topic: str, pending: set[int], ends: Mapping[int, int],
                        positions: dict[int, int]) -> bool:
    """Drop from `pending` the partitions whose position reached their end (the last offsets may hold no record
    to return: transaction markers, aborted or compacted records); True when any position moved."""
    moved = False
    for tp in consumer.position([TopicPartition(topic, p) for p in sorted(pending)]):
        if tp.offset >= ends[tp.partition]:
            pending.discard(tp.partition)
        if tp.offset > positions.get(tp.partition, tp.offset):
            moved = True
        if tp.offset >= 0:
            positions[tp.partition] = tp.offset
    return moved


def _timeout(topic: str, pending: set[int], timeout_s: float | None, stall_s: float,
             error: KafkaError | None) -> ReadTimeout:
    why = f"in {timeout_s:g} s" if timeout_s is not None else f"(no progress for {stall_s:g} s)"
    last = f"; last error: {error.str()}" if error is not None else ""
    return ReadTimeout(f"partitions {sorted(pending)} of {topic} not read to their end {why}{last}")


def _resolve(offset: int, first: int, end: int) -> int:
    """A concrete start offset: the beginning is the partition's first offset, OFFSET_END its end."""
    if offset == OFFSET_END:
        return end
    if offset < 0:  # OFFSET_BEGINNING, OFFSET_INVALID (no committed offset: start at the beginning)
        return first
    return offset


def _consumer(bootstrap: str, committed: bool, security: KafkaSecurity | None) -> Consumer:
    return Consumer(consumer_config(bootstrap, committed=committed, **(security or KafkaSecurity()).librdkafka()))


def read_to_end(bootstrap: str, topic: str, *, start: Mapping[int, int] | None = None, since_ms: int | None = None,
                committed: bool = True, timeout_s: float | None = 60.0, stall_s: float = 30.0,
                missing_ok: bool = False, security: KafkaSecurity | None = None,
                through_open_transactions: bool = False) -> Generator[Message, None, None]:
    """Every readable record of `topic` from `start` (partition -> offset; partitions not named start at the
    beginning) or from `since_ms`, up to the end each partition had when the read began: for a committed read,
    its last stable offset (an open transaction does not hold the read up), or with `through_open_transactions`
    the log's end, waiting until the transactions open then end (an audit: records committed behind a producer
    killed mid-transaction are read once the broker aborts its transaction). `security`: the reader's Kafka
    credentials (common/kafka_security.py; default PLAINTEXT)."""
    consumer = _consumer(bootstrap, committed, security)
    try:
        try:
            parts = partitions(consumer, topic)
        except TopicMissing:
            if missing_ok:
                return
            raise
        ends = (_log_ends(bootstrap, topic, parts, security) if committed and through_open_transactions
                else end_offsets(consumer, topic, parts))
        if since_ms is not None:
            starts = offsets_since(consumer, topic, parts, since_ms)
        else:
            starts = {p: (start or {}).get(p, OFFSET_BEGINNING) for p in parts}
        yield from drain(consumer, topic, starts, ends, timeout_s=timeout_s, stall_s=stall_s)
    finally:
        consumer.close()


def _log_ends(bootstrap: str, topic: str, parts: list[int], security: KafkaSecurity | None) -> dict[int, int]:
    """The log's ends, open transactions included: a read_committed consumer's own watermark is the last stable
    offset, which an open transaction (a producer killed mid-transaction, until the broker aborts it) holds back,
    so reading "to the end" from it would silently stop before records already committed behind it."""
    consumer = _consumer(bootstrap, False, security)
    try:
        return end_offsets(consumer, topic, parts)
    finally:
        consumer.close()


def topic_end_offsets(bootstrap: str, topic: str, *, committed: bool = True, timeout_s: float = 10.0,
                      security: KafkaSecurity | None = None) -> dict[int, int]:
    """partition -> end offset of `topic` now (a test takes them before it writes, to read only what it wrote)."""
    consumer = _consumer(bootstrap, committed, security)
    try:
        return end_offsets(consumer, topic, timeout_s=timeout_s)
    finally:
        consumer.close()


def read_at(bootstrap: str, topic: str, partition: int, offset: int, *, committed: bool = True,
            timeout_s: float = 15.0, security: KafkaSecurity | None = None) -> Message | None:
    """The record at exactly partition:offset, or None when there is none (past the end, a transaction marker,
    aborted, compacted away, or before the first offset). TopicMissing when the partition does not exist."""
    consumer = _consumer(bootstrap, committed, security)
    try:
        if partition not in partitions(consumer, topic):
            raise TopicMissing(f"topic {topic} has no partition {partition}")
        low, high = watermarks(consumer, topic, [partition])[partition]
        if not low <= offset < high:
            return None
        for msg in drain(consumer, topic, {partition: offset}, {partition: offset + 1}, timeout_s=timeout_s,
                         stall_s=timeout_s):
            return msg if msg.offset() == offset else None
        return None
    finally:
        consumer.close()
