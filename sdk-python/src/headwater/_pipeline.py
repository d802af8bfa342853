"""One process's delivery machinery: queue -> batcher thread -> store (spool) -> sender thread -> transport.

Two daemon threads: the batcher drains the queue into sealed batches (waking on an event, never polling)
and stores them, so events reach the disk spool even while the sender is stuck retrying; the sender takes
the oldest pending batch and delivers it. A `Pipeline` belongs to one process: after a fork the client
builds a new one (memory-only, fresh producer id) and abandons the parent's, whose threads do not exist
in the child.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable

from ._assembler import Assembler
from ._config import ClientConfig
from ._event import PendingEvent
from ._exceptions import ClientClosedError, EventsDroppedError, HeadwaterError
from ._metrics import Counters, Metrics
from ._queue import EventQueue
from ._registry import SchemaCache
from ._retry import RetryPolicy
from ._sender import Action, Sender
from ._spool import DiskSpool
from ._store import MemoryStore, OrderedStore
from ._transport import Transport, Urllib3Transport

log = logging.getLogger("headwater")


class Pipeline:
    """Queue, assembler, store, sender and their two threads, for one process."""

    def __init__(self, cfg: ClientConfig, use_spool: bool) -> None:
        self.cfg = cfg
        self.pid = os.getpid()
        self.counters = Counters()
        self.abort = threading.Event()
        self.stopping = threading.Event()
        self.queue = EventQueue(cfg.max_queue_events, cfg.queue_policy, cfg.block_timeout_s, cfg.max_batch_events)
        self.store: OrderedStore
        if use_spool and cfg.spool_dir is not None:
            self.store = DiskSpool(cfg.spool_dir, cfg.spool_max_bytes, cfg.spool_overflow,
                                   cfg.spool_fsync == "always", self._store_dropped)
        else:
            self.store = MemoryStore(cfg.max_pending_batches, cfg.spool_overflow, self._store_dropped)
        self.durable = isinstance(self.store, DiskSpool)
        self.recovered = self.store.stats()[1]
        self.transport: Transport = cfg.transport if cfg.transport is not None else \
            Urllib3Transport(cfg.connection_max_age_s)
        schemas = None
        if cfg.wire_format == "avro" and cfg.registry_url is not None:
            schemas = SchemaCache(cfg.registry_url, self.transport, cfg.schema_refresh_s, cfg.request_timeout_s)
        policy = RetryPolicy(cfg.retry_base_s, cfg.retry_max_s, cfg.retry_deadline_s, self.abort,
                             lambda exc: self.counters.add("retries"))
        self.sender = Sender(cfg, self.transport, schemas, counters=self.counters, policy=policy, report=self.report)
        self.assembler = Assembler(cfg, self.store, self._assembler_dropped)
        self._threads = [threading.Thread(target=self._guard(self._batch_loop), name="headwater-batcher", daemon=True),
                         threading.Thread(target=self._guard(self._send_loop), name="headwater-sender", daemon=True)]
        for t in self._threads:
            t.start()

    # --- reporting -----------------------------------------------------------------------------------------
    def report(self, error: HeadwaterError) -> None:
        """Pass `error` to the `on_error` callback (or log it); a failing callback is logged, never raised."""
        callback: Callable[..., None] | None = self.cfg.on_error
        if callback is None:
            log.warning("headwater: %s", error)
            return
        try:
            callback(error)
        except Exception:
            log.exception("headwater: on_error callback failed")

    def drop_unqueued(self, reason: str, n: int = 1) -> None:
        """Count events refused before they entered the queue."""
        with self.counters.lock:
            self.counters.dropped[reason] = self.counters.dropped.get(reason, 0) + n
        self.report(ClientClosedError(n) if reason == "client_closed" else EventsDroppedError(reason, n))

    def _assembler_dropped(self, drops: dict[str, int]) -> None:
        self.counters.settle(dropped=drops)
        for reason, n in drops.items():
            self.report(EventsDroppedError(reason, n))

    def _store_dropped(self, reason: str, n: int, detail: str) -> None:
        self.counters.settle(dropped={reason: n})
        self.report(EventsDroppedError(reason, n, detail))

    # --- producer side -------------------------------------------------------------------------------------
    def put(self, event: PendingEvent) -> None:
        """Queue one event under the full-queue policy; never raises for a full queue."""
        accepted, evicted = self.queue.put(event)
        if not accepted and self.queue.policy == "spill":
            self.spill()
            accepted, evicted = self.queue.put(event)
        if accepted:
            if evicted is not None:
                self.counters.settle(dropped={"queue_full_oldest": 1})
                self.report(EventsDroppedError("queue_full_oldest", 1))
        else:
            self.drop_unqueued("queue_full_timeout" if self.queue.policy == "block" else "queue_full")

    def spill(self) -> None:
        """Move the whole queue into sealed batches in the spool, on the caller's thread (disk I/O)."""
        self.assembler.add(self.queue.take())
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

    def metrics(self) -> Metrics:
        """A snapshot of the counters."""
        return self.counters.snapshot(len(self.queue) + self.assembler.open_count(), self.queue.accepted,
                                      self.store.stats())

    # --- threads -------------------------------------------------------------------------------------------
    def _guard(self, loop: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                loop()
            except Exception:  # a bug here must be loud, but never kill the application
                log.exception("headwater: %s thread failed", threading.current_thread().name)
        return run

    def _batch_loop(self) -> None:
        q, asm, linger = self.queue, self.assembler, self.cfg.linger_s
        while True:
            opened = asm.open_since
            timeout = None if opened is None else max(0.0, opened + linger - time.monotonic())
            q.wake.wait(timeout)
            q.wake.clear()
            while not self.store.wait_for_room(1.0):  # store full: leave events queued (queue_policy applies)
                if self.stopping.is_set():
                    break
            flush = q.flush_requested or self.stopping.is_set()
            q.flush_requested = False
            asm.add(q.take())
            opened = asm.open_since
            if flush or (opened is not None and time.monotonic() >= opened + linger):
                asm.seal_open()
            if self.stopping.is_set() and len(q) == 0:
                asm.seal_open()
                return

    def _send_loop(self) -> None:
        store, sender = self.store, self.sender
        while not self.abort.is_set():
            batch = store.next_ready(1.0)
            if batch is None:
                continue
            action = sender.deliver(batch, keep_on_failure=self.durable)
            if action is Action.ACK:
                store.ack(batch)
            elif action is Action.SPLIT:
                store.replace(batch, sender.parts)
            else:
                store.release(batch)
                self.abort.wait(self.cfg.retry_max_s)  # the gateway is away: pause before the next round

    # --- shutdown ------------------------------------------------------------------------------------------
    def shutdown(self, timeout: float) -> bool:
        """Flush for up to `timeout` seconds, then stop both threads; True if everything was delivered."""
        deadline = time.monotonic() + timeout
        delivered = self.flush(timeout)
        self.stopping.set()
        self.store.wake()
        self.queue.wake.set()
        self._threads[0].join(max(0.1, deadline - time.monotonic()))
        self.abort.set()
        self.store.wake()
        self._threads[1].join(max(0.1, deadline - time.monotonic()) + 1.0)  # a request in flight may outlive close
        leftover = len(self.queue) + self.assembler.open_count()
        if not self.durable:
            leftover += self.store.stats()[1]
        if leftover:
            self.counters.settle(dropped={"closed_unsent": leftover})
            self.report(EventsDroppedError("closed_unsent", leftover, "client closed before delivery"))
        self.store.close()
        self.transport.close()
        return delivered
