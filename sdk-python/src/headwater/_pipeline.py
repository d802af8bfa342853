"""One process's delivery machinery: queue -> batcher thread -> store (spool) -> sender threads -> transport.

The batcher thread drains the queue one batch at a time (waking on an event, never polling): it waits for room
in the store before each batch (`backpressure`), seals a batch when it is full or `linger_s` after its oldest
event was accepted, and stores it, so events reach the disk spool even while the senders are stuck retrying.
`max_in_flight` sender threads each take the oldest pending batch and deliver it, each request inside the
adaptive in-flight window (`_limit`) and the client's gate (`_gate`). With durability `sync`,
`track()` itself appends the event to the spool's journal. A `Pipeline` belongs to one process: after a fork
the client builds a new one (memory-only, fresh producer id) and abandons the parent's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import itertools
import logging
import os
import threading
import time
from typing import Callable

from ._assembler import Assembler
from ._batcher import BODY_OVERHEAD
from ._config import ClientConfig
from ._event import EnvelopeEncoder
from ._exceptions import ClientClosedError, ConfigError, EventsDroppedError, InvalidEventError
from ._failover import Endpoints
from ._gate import Gate
from ._ids import new_producer_id
from ._limit import Window
from ._metrics import Counters, Metrics
from ._queue import EventQueue
from ._registry import SchemaCache
from ._report import Reporter, enable_debug
from ._retry import RetryPolicy
from ._sender import Action, Sender
from ._spool import RESERVE_AHEAD, DiskSpool
from ._store import MemoryBacking, Store
from ._transport import Transport, Urllib3Transport

log = logging.getLogger("headwater")
NOT_A_LOSS = ("disabled",)  # drop reasons that do not make close() return False
GROUP_BATCHES = 64  # batches sealed per batcher pass (and per spool directory fsync)
# track() gives the GIL away once per this many events. A caller tracking in a tight loop holds the GIL, and a
# sender thread whose answer arrived then waits up to the interpreter's switch interval (5 ms) for it, several
# senders in a row, so round trips read 20-35 ms long at 50 ms and the in-flight window (protocol.md §6.2) takes
# that for queueing at the gateway and shrinks; measured: 60,000 events tracked at once over a 50 ms link were
# delivered in ~7.2 s without the yield, ~5.5 s with it (window at 16 during the burst). 16 keeps the
# cost to one `sleep(0)` per 16 events (a microsecond when no other thread waits).
YIELD_EVERY = 16


class Pipeline:
    """Queue, assembler, store, senders and their threads, for one process."""

    def __init__(self, cfg: ClientConfig, use_spool: bool) -> None:
        if cfg.wire_format == "avro":
            _require_avro()  # before the spool is locked or a thread started
        if cfg.debug:
            enable_debug()
        self.cfg = cfg
        self.pid = os.getpid()
        self.counters = Counters()
        self.report = Reporter(cfg.on_error)
        self.abort = threading.Event()
        self.stopping = threading.Event()
        self.spool: DiskSpool | None = None
        if use_spool and cfg.spool_dir is not None and not cfg.disabled:
            self.spool = DiskSpool(cfg.spool_dir, cfg.spool_fsync == "always")
            self.store = Store(self.spool, 1 << 62, cfg.spool_max_bytes, cfg.spool_overflow, self._store_dropped,
                               recovered=self.spool.recovered)
            self.spool.recovered = []
            self.producer_id, first_seq, reserve = self.spool.producer_id, self.spool.next_seq, self.spool.reserve
        else:
            self.store = Store(MemoryBacking(), cfg.max_pending_batches, 1 << 62, cfg.spool_overflow,
                               self._store_dropped)
            self.producer_id, first_seq, reserve = new_producer_id(), 0, _unbounded_reservation
        self.durable = self.spool is not None
        self.sync = self.durable and cfg.durability == "sync"
        self.recovered = self.store.stats()[1]
        self.encoder = EnvelopeEncoder(self.producer_id, cfg.node_id, cfg.context)
        self.max_event_bytes = min(cfg.max_event_bytes, cfg.max_batch_bytes - BODY_OVERHEAD - 1)
        self._puts = itertools.count(1)  # events offered by track(), for YIELD_EVERY
        self.queue = EventQueue(cfg.max_queue_events, cfg.queue_policy, cfg.block_timeout_s, cfg.max_batch_events,
                                first_seq=first_seq, reserve=reserve)
        journal = self._journal_append if self.sync else None
        self.assembler = Assembler(cfg, self.store, self.producer_id, journal)
        self.transport: Transport = cfg.transport if cfg.transport is not None else \
            Urllib3Transport(cfg.connection_max_age_s, maxsize=cfg.max_in_flight, proxy=cfg.proxy,
                             ca_bundle=cfg.ca_bundle)
        schemas = None
        if cfg.wire_format == "avro" and cfg.registry_url is not None:
            schemas = SchemaCache(cfg.registry_url, self.transport, cfg.schema_refresh_s, cfg.request_timeout_s)
        self.gate = Gate(self.report.callback, self.abort, cfg.retry_refused_max_s)
        self.window = Window(cfg.max_in_flight)
        policy = RetryPolicy(cfg.retry_base_s, cfg.retry_max_s, cfg.retry_refused_max_s, cfg.retry_deadline_s,
                             gate=self.gate, on_retry=lambda exc: self.counters.add("retries"))
        self.endpoints = Endpoints(cfg.endpoints, cfg.failover_after_failures, cfg.failover_after_s,
                                   cfg.failback_probe_s)
        self.sender = Sender(cfg, self.transport, schemas, counters=self.counters, policy=policy,
                             window=self.window, report=self.report, endpoints=self.endpoints)
        self._threads: list[threading.Thread] = []
        if not cfg.disabled:
            self._threads.append(threading.Thread(target=self._guard(self._batch_loop), name="headwater-batcher",
                                                  daemon=True))
            self._threads += [threading.Thread(target=self._guard(self._send_loop), name=f"headwater-sender-{i}",
                                               daemon=True) for i in range(cfg.max_in_flight)]
        for t in self._threads:
            t.start()

    # --- reporting -----------------------------------------------------------------------------------------
    def drop_unqueued(self, reason: str, n: int = 1) -> None:
        """Count events refused before they entered the queue (no seq was handed out)."""
        with self.counters.lock:
            self.counters.dropped[reason] = self.counters.dropped.get(reason, 0) + n
        if reason not in NOT_A_LOSS:
            self.report(ClientClosedError(n) if reason == "client_closed" else EventsDroppedError(reason, n))

    def _store_dropped(self, reason: str, n: int, detail: str) -> None:
        self.counters.settle(dropped={reason: n})
        self.report(EventsDroppedError(reason, n, detail))

    def _journal_append(self, batch_id: str, seq: int, data: bytes) -> None:
        assert self.spool is not None
        try:
            self.spool.journal.append(batch_id, seq, data)
        except OSError as exc:  # the event stays in memory and is sealed with its batch as usual
            log.warning("headwater spool: cannot append to the journal (%s); event %d kept in memory", exc, seq)

    # --- producer side -------------------------------------------------------------------------------------
    def put(self, head: bytes, tail: bytes) -> int | None:
        """Accept one encoded event under the policies; its seq, or None if it was dropped (counted)."""
        if len(head) + len(tail) + 20 > self.max_event_bytes:
            raise InvalidEventError(f"event is {len(head) + len(tail)} bytes encoded, over max_event_bytes "
                                    f"({self.max_event_bytes})", "event_too_large")
        if self.cfg.disabled:
            self.drop_unqueued("disabled")
            return None
        if self.sync:
            return self._put_sync(head, tail)
        seq, evicted = self.queue.put(head, tail)
        if next(self._puts) % YIELD_EVERY == 0:
            time.sleep(0)  # the GIL to the sender threads (see YIELD_EVERY)
        if seq is None and self.queue.policy == "spill" and not self.queue.closed:
            self.spill()
            seq, evicted = self.queue.put(head, tail)
        if evicted is not None:
            self.counters.settle(dropped={"queue_full_oldest": 1})
            self.report(EventsDroppedError("queue_full_oldest", 1, f"seq {evicted.seq}"))
        if seq is None:
            reason = "client_closed" if self.queue.closed else \
                "queue_full_timeout" if self.queue.policy == "block" else "queue_full"
            self.drop_unqueued(reason)
        return seq

    def _put_sync(self, head: bytes, tail: bytes) -> int | None:
        """Durability `sync`: the event is in the spool's journal when this returns its seq."""
        if self.queue.closed:
            self.drop_unqueued("client_closed")
            return None
        if not self.store.has_room():  # backpressure on the caller: refuse rather than exceed the bound
            self.drop_unqueued("spool_full")
            return None
        seq = self.assembler.add_sync(head, tail, self.queue.next_seq_for_sync)
        if self.assembler.open_count() == 1:
            self.queue.wake.set()  # the batcher times the linger of the new open batch
        return seq

    def spill(self) -> None:
        """Move the whole queue into sealed batches in the spool, on the caller's thread (disk I/O)."""
        events, since = self.queue.take()
        self.assembler.add(events, since)
        self.assembler.seal_open()

    def flush(self, timeout: float | None) -> bool:
        """Wait until every event accepted so far is acknowledged, rejected or dropped; False on timeout."""
        target = self.queue.accepted + self.recovered
        self.queue.request_flush()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.counters.settled_cond:
            while self.counters.settled < target:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self.counters.settled_cond.wait(remaining)
        return True

    def all_acknowledged(self) -> bool:
        """True if every event accepted so far was acknowledged and nothing was ever dropped or rejected."""
        with self.counters.lock:
            lost = sum(n for reason, n in self.counters.dropped.items() if reason not in NOT_A_LOSS)
            return (lost == 0 and self.counters.rejected == 0
                    and self.counters.acknowledged == self.queue.accepted + self.recovered)

    def metrics(self) -> Metrics:
        """A snapshot of the counters."""
        snap = self.counters.snapshot(len(self.queue) + self.assembler.open_count(), self.queue.accepted,
                                      self.store.stats(), self.window.size)
        return dataclasses.replace(snap, endpoint=self.endpoints.current()[1], failovers=self.endpoints.failovers,
                                   failbacks=self.endpoints.failbacks)

    # --- threads -------------------------------------------------------------------------------------------
    def _guard(self, loop: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                loop()
            except Exception:  # a bug here must be loud, but never kill the application
                log.exception("headwater: %s thread failed", threading.current_thread().name)
        return run

    def _batch_loop(self) -> None:
        """Seal a batch when 40 events are queued, or `linger_s` after the oldest unsealed event was accepted.

        Events are left in the queue until one of the two happens (the batcher wakes twice per batch, not
        once per event), then taken one batch at a time, each only when the store has room for it.
        """
        q, asm, linger = self.queue, self.assembler, self.cfg.linger_s
        while True:
            oldest = asm.open_since if asm.open_since is not None else q.oldest_at
            timeout = None if oldest is None else max(0.0, oldest + linger - time.monotonic())
            if len(q) >= self.cfg.max_batch_events:  # a full batch waits: now if it fits, else poll for room
                timeout = 0.0 if self.store.has_room() else 0.5 if timeout is None else min(timeout, 0.5)
            q.wake.wait(timeout)
            q.wake.clear()
            q.renew(RESERVE_AHEAD // 2)
            stopping = self.stopping.is_set()
            flush = q.flush_requested or stopping
            q.flush_requested = False
            oldest = asm.open_since if asm.open_since is not None else q.oldest_at
            due = flush or (oldest is not None and time.monotonic() >= oldest + linger)
            ready = len(q) >= self.cfg.max_batch_events or (due and len(q) > 0)
            if ready and not stopping and asm.open_count() == 0:
                self.store.wait_for_room(0.5)  # backpressure: wait (woken by an ack) before taking a batch
            with self.spool.group() if self.spool is not None else contextlib.nullcontext():
                # a burst of batch files shares one directory fsync
                self._take_batches(due, stopping)
                if due:
                    asm.seal_open()
            if stopping and len(q) == 0:
                asm.seal_open()
                return

    def _take_batches(self, due: bool, stopping: bool) -> None:
        """Move queued events into batches: full batches only, or everything once the linger is `due`.

        At most `GROUP_BATCHES` per call, so a sustained stream still gets its directory fsync often.
        """
        q, asm, store, size = self.queue, self.assembler, self.store, self.cfg.max_batch_events
        for _ in range(GROUP_BATCHES):
            if not len(q):
                return
            if not due and len(q) + asm.open_count() < size:
                return  # not a full batch yet: wait for more events or for the linger
            if asm.open_count() == 0 and not stopping and not store.has_room():
                return  # backpressure: the events stay queued, and queue_policy applies to new ones
            events, since = q.take(size - asm.open_count())
            asm.add(events, since)
            stopping = stopping or self.stopping.is_set()

    def _send_loop(self) -> None:
        store, sender = self.store, self.sender
        while not self.abort.is_set():
            batch = store.next_ready(1.0)
            if batch is None:
                continue
            action, parts = sender.deliver(batch, keep_on_failure=self.durable)
            if action is Action.ACK:
                store.ack(batch)
            elif action is Action.SPLIT:
                store.replace(batch, parts)
            else:
                store.release(batch)

    # --- shutdown ------------------------------------------------------------------------------------------
    def shutdown(self, timeout: float) -> bool:
        """Flush for up to `timeout` seconds, then stop every thread; True if every event was acknowledged."""
        deadline = time.monotonic() + timeout
        next_seq = self.queue.close()
        self.gate.wake(closing=True)  # every batch waiting in backoff is sent again now (protocol.md §6.3)
        delivered = self.flush(timeout)
        self.stopping.set()
        self.queue.wake.set()
        if self._threads:
            self._threads[0].join(max(0.1, deadline - time.monotonic()))
        self.abort.set()
        self.gate.wake()
        self.window.stop()
        self.store.wake()
        for t in self._threads[1:]:  # a request in flight may outlive close
            t.join(max(0.1, deadline - time.monotonic()) + 1.0)
        leftover = len(self.queue) + self.assembler.open_count()
        if not self.durable:
            leftover += self.store.stats()[1]
        if leftover:
            self.counters.settle(dropped={"closed_unsent": leftover})
            self.report(EventsDroppedError("closed_unsent", leftover, "client closed before delivery"))
        if self.spool is not None:
            self.spool.close(next_seq)
        self.transport.close()
        self.report.close()
        return delivered and self.all_acknowledged()


def _unbounded_reservation(next_seq: int) -> int:
    """Without a spool nothing outlives the process: every seq is free to use."""
    return 1 << 62


def _require_avro() -> None:
    """`wire_format="avro"` needs the `avro` extra: say so at construction, not in a sender thread."""
    try:
        importlib.import_module(f"{__package__}._avro")
    except ImportError as exc:
        raise ConfigError(f"wire_format 'avro' needs fastavro: pip install 'headwater[avro]' ({exc})") from None
