"""Replays selected dead letters into their event topics, exactly once per run, resumable after kill -9.

Progress lives in Kafka only: the run's consumer group (`headwater.deadletter.replay.<run>`) has its offsets
committed inside the same transaction as the events it replayed (`send_offsets_to_transaction`), so a
transaction either wrote its events and moved the offsets, or did neither. A killed run leaves at most one
open transaction; the next run with the same name uses the same transactional id, whose
`init_transactions` aborts it (fencing the dead process) before the committed offsets are read.
Still-invalid dead letters are not written anywhere: they stay in the dead-letter topic, and the run
reports their new reason. A later fix is replayed with a new run name (duplicates of events replayed by an
earlier run are removed downstream by `event_id`, like any retry's).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from common.kafka_produce import produce_all
from common.kafka_read import drain, end_offsets, partitions
from deadletter.config import ToolConfig
from deadletter.gateway_code import GatewayError, RegistryUnavailable, load_cache
from deadletter.read import STALL_S, consumer_config, to_letter
from deadletter.records import BadRecord, Selection
from deadletter.revalidate import StillInvalid, revalidate
from gateway.producer import kafka_config
from gateway.records import KafkaRecord

REGISTRY_WAIT_S = 30.0  # how long a run waits for an unreachable registry before it gives up (exit 1)


class ReplayError(RuntimeError):
    """The replay cannot run (registry or Kafka unreachable); nothing of the current transaction is visible."""


@dataclass(frozen=True)
class ReplayOptions:
    run: str
    selection: Selection = field(default_factory=Selection)
    per_transaction: int = 200
    rate: float = 0.0  # dead letters per second at most; 0 = as fast as possible
    dry_run: bool = False


@dataclass
class ReplayReport:
    scanned: int = 0
    replayed: int = 0
    skipped: int = 0  # not selected
    transactions: int = 0
    still_invalid: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0
    invalid_examples: list[StillInvalid] = field(default_factory=list)


def group_id(run: str) -> str:
    return f"headwater.deadletter.replay.{run}"


class _Run:
    """One replay: the run's consumer (group offsets = progress) and its transactional producer."""

    def __init__(self, cfg: ToolConfig, opts: ReplayOptions, cache: Any,
                 progress: Callable[[str], None]) -> None:
        self.cfg, self.opts, self.cache, self.progress = cfg, opts, cache, progress
        self.report = ReplayReport()
        self.consumer = Consumer(consumer_config(cfg.bootstrap, group_id(opts.run), cfg.kafka_security))
        self.producer: Producer | None = None
        if not opts.dry_run:
            self.producer = Producer({**kafka_config(cfg.bootstrap, f"headwater-deadletter-replay.{opts.run}",
                                                     delivery_timeout_s=min(30.0, cfg.transaction_timeout_s),
                                                     transaction_timeout_s=cfg.transaction_timeout_s),
                                      **cfg.kafka_security.librdkafka()})
        self.chunk: list[KafkaRecord] = []
        self.chunk_offsets: dict[int, int] = {}
        self.scanned_in_chunk = 0
        self.started = time.monotonic()

    def run(self) -> ReplayReport:
        topic = self.cfg.deadletter_topic
        if self.producer is not None:
            # First: abort what a killed run with this name left open, so its offsets are stable to read.
            self.producer.init_transactions(30)
        parts = partitions(self.consumer, topic)
        committed = self.consumer.committed([TopicPartition(topic, p) for p in parts], timeout=30)
        starts = {tp.partition: tp.offset for tp in committed}  # no committed offset yet: the beginning
        ends = end_offsets(self.consumer, topic, parts)
        for msg in drain(self.consumer, topic, starts, ends, timeout_s=None, stall_s=STALL_S):
            self._take(msg)
            if self.scanned_in_chunk >= self.opts.per_transaction:
                self._commit()
        self._commit()
        return self.report

    def _take(self, msg: Message) -> None:
        self.report.scanned += 1
        self.scanned_in_chunk += 1
        self.chunk_offsets[msg.partition() or 0] = (msg.offset() or 0) + 1
        try:
            letter = to_letter(msg)
        except BadRecord:
            self.report.unreadable += 1
            return
        if not self.opts.selection.matches(letter):
            self.report.skipped += 1
            return
        self._throttle()
        outcome = revalidate(letter, self.cache, self.cfg.deadletter_topic, self.opts.run)
        if isinstance(outcome, StillInvalid):
            self.report.still_invalid[outcome.code] += 1
            if len(self.report.invalid_examples) < 20:
                self.report.invalid_examples.append(outcome)
            return
        self.chunk.append(outcome)

    def _throttle(self) -> None:
        if self.opts.rate <= 0:
            return
        handled = self.report.replayed + len(self.chunk) + sum(self.report.still_invalid.values())
        wait = self.started + handled / self.opts.rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def _commit(self) -> None:
        """One transaction: the chunk's events and the consumer group's new offsets, together or not at all."""
        if not self.chunk_offsets:
            return
        offsets = [TopicPartition(self.cfg.deadletter_topic, p, o) for p, o in sorted(self.chunk_offsets.items())]
        if self.producer is not None:
            p = self.producer
            p.begin_transaction()
            produce_all(p, self.chunk, deadline=time.monotonic() + self.cfg.transaction_timeout_s)
            p.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 30)
            p.commit_transaction(60)
        self.report.replayed += len(self.chunk)
        self.report.transactions += 1
        self.progress(f"transaction {self.report.transactions}: {len(self.chunk)} events "
                      f"{'would be ' if self.producer is None else ''}replayed, offsets "
                      + ", ".join(f"{tp.partition}:{tp.offset}" for tp in offsets)
                      + (" (not committed: dry run)" if self.producer is None else " committed"))
        self.chunk, self.chunk_offsets, self.scanned_in_chunk = [], {}, 0

    def close(self) -> None:
        self.consumer.close()
        if self.producer is not None:
            self.producer.flush(10)


def replay(cfg: ToolConfig, opts: ReplayOptions, progress: Callable[[str], None] = print) -> ReplayReport:
    """Run (or resume) the replay named `opts.run` up to the dead-letter topic's current end."""
    if not cfg.registry_url:
        raise ReplayError("REGISTRY_URL is not set")
    try:
        # A registry restarting (or failing over) answers again within seconds: wait for it rather than fail the run.
        for attempt in Retrying(stop=stop_after_delay(REGISTRY_WAIT_S), wait=wait_exponential(min=0.5, max=5),
                                retry=retry_if_exception_type(RegistryUnavailable), reraise=True):
            with attempt:
                cache = load_cache(cfg.registry_url, cfg.topics, access=cfg.registry_access)
    except GatewayError as exc:
        raise ReplayError(str(exc)) from None
    run = _Run(cfg, opts, cache, progress)
    try:
        return run.run()
    finally:
        run.close()
