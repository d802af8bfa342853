"""Pending batches between sealing and acknowledgement: the ordered store over a backing (memory or disk).

Modelled on the OpenTelemetry Collector's persistent queue: batches are appended in seq order, handed to the
senders oldest first (up to `max_in_flight` at once, each in flight until acked), acked (deleted) after a 200
or a permanent rejection, released back in place after a retry deadline, or replaced by their halves after a
413. Where a batch's bytes live is the `Backing`'s business: `MemoryBacking` keeps them in memory (lost with
the process), `DiskSpool` (in `_spool`) in files. Bounds: under `backpressure` the batcher waits for room
before it seals a batch, so a bound is exceeded by at most the one batch being sealed and nothing is ever
dropped here; under `drop_oldest` the oldest batch not in flight is deleted (counted) to make room.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Callable, Protocol

from ._batcher import Batch

DropReporter = Callable[[str, int, str], None]  # (reason, event count, detail)


@dataclasses.dataclass
class Entry:
    """One pending batch: its seq range and size, and the batch itself and/or the file holding it."""

    batch_id: str
    first_seq: int
    last_seq: int
    count: int
    nbytes: int
    batch: Batch | None = None
    path: str | None = None
    in_flight: bool = False


class Backing(Protocol):
    """Where a store's batches live; called with the store's lock held."""

    def persist(self, batch: Batch) -> Entry:
        """Keep `batch` (durably, for a spool) and describe it."""

    def load(self, entry: Entry) -> Batch | None:
        """The batch of `entry`; None if it is unusable (the backing set it aside; the store drops it)."""

    def remove(self, entry: Entry) -> None:
        """Delete what holds `entry`."""


class MemoryBacking:
    """Batches kept in memory only: lost with the process."""

    def persist(self, batch: Batch) -> Entry:
        """Describe `batch`, which stays in the entry."""
        return Entry(batch.batch_id, batch.first_seq, batch.last_seq, len(batch.events), batch.nbytes, batch)

    def load(self, entry: Entry) -> Batch | None:
        """The batch itself."""
        return entry.batch

    def remove(self, entry: Entry) -> None:
        """Nothing to delete in memory."""


class Store:
    """Pending batches in seq order with bounds and an overflow policy, over a backing that holds their bytes.

    `recovered`: entries the backing found at start (a spool's files), queued first in the order given.
    """

    def __init__(self, backing: Backing, max_batches: int, max_bytes: int, overflow: str, report: DropReporter,
                 *, recovered: Iterable[Entry] = ()) -> None:
        self._backing = backing
        self._max_batches = max_batches
        self._max_bytes = max_bytes
        self._overflow = overflow
        self._report = report
        self._entries: deque[Entry] = deque()
        self._in_flight: dict[str, Entry] = {}  # batch_id -> entry being sent
        self._bytes = 0
        self._events = 0
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # room for a batch (the batcher waits), stop
        self._ready = threading.Condition(lock)  # a batch to send (the senders wait): woken one per batch
        self._stopped = False
        self._reports: list[tuple[str, int, str]] = []  # drops to report once the lock is released
        for entry in recovered:
            self._add(entry)

    def has_room(self) -> bool:
        """True if another batch fits now (or `drop_oldest` can make room)."""
        with self._cond:
            return self._overflow == "drop_oldest" or not self._full()

    def wait_for_room(self, timeout: float | None) -> bool:
        """Backpressure: wait until a batch fits (or `drop_oldest` can make room); False on timeout/stop."""
        with self._cond:
            if self._overflow == "drop_oldest":
                return True
            room = self._cond.wait_for(lambda: not self._full() or self._stopped, timeout)
            return room and not self._stopped

    def append(self, batch: Batch) -> bool:
        """Keep `batch`; under `drop_oldest` first delete the oldest idle batches until it fits.

        Never refuses: under `backpressure` the caller waited for room first (`wait_for_room`), so a bound is
        exceeded by at most this batch.
        """
        with self._cond:
            if self._overflow == "drop_oldest":
                while self._full(batch.nbytes):
                    victim = self._oldest_idle()
                    if victim is None:
                        break
                    self._drop(victim, "store_full_oldest")
            self._add(self._backing.persist(batch))
            self._ready.notify()
        self._send_reports()
        return True

    def _full(self, size: int = 0) -> bool:
        return bool(self._entries) and (len(self._entries) >= self._max_batches
                                        or self._bytes + size > self._max_bytes)

    def _oldest_idle(self) -> Entry | None:
        for entry in self._entries:
            if not entry.in_flight:
                return entry
        return None

    def _add(self, entry: Entry, front: bool = False) -> None:
        if front:
            self._entries.appendleft(entry)
        else:
            self._entries.append(entry)
        self._bytes += entry.nbytes
        self._events += entry.count

    def _discard(self, entry: Entry) -> None:
        self._entries.remove(entry)
        self._bytes -= entry.nbytes
        self._events -= entry.count
        if entry.in_flight:
            entry.in_flight = False
            self._in_flight.pop(entry.batch_id, None)
        self._backing.remove(entry)

    def _drop(self, entry: Entry, reason: str) -> None:
        self._discard(entry)
        self._reports.append((reason, entry.count, f"batch {entry.batch_id}, seq {entry.first_seq}..{entry.last_seq}"))

    def _send_reports(self) -> None:
        """Report drops outside the lock: a callback may call back into the client (metrics, track)."""
        with self._cond:
            reports, self._reports = self._reports, []
        for reason, count, detail in reports:
            self._report(reason, count, detail)

    def next_ready(self, timeout: float) -> Batch | None:
        """The oldest pending batch not in flight, now in flight; entries that cannot be loaded are dropped."""
        found = None
        with self._cond:
            entry = self._oldest_idle()
            if entry is None and not self._stopped:
                self._ready.wait(timeout)
                entry = self._oldest_idle()
            while entry is not None:
                found = self._backing.load(entry)
                if found is not None:
                    entry.in_flight = True
                    self._in_flight[entry.batch_id] = entry
                    break
                self._drop(entry, "spool_corrupt")  # the backing set it aside
                entry = self._oldest_idle()
        self._send_reports()
        return found

    def ack(self, batch: Batch) -> None:
        """Forget the in-flight `batch`."""
        with self._cond:
            entry = self._in_flight.get(batch.batch_id)
            if entry is not None:
                self._discard(entry)
            self._cond.notify_all()  # room for the batcher; no batch became ready

    def release(self, batch: Batch) -> None:
        """Give the in-flight `batch` back: it keeps its place in line."""
        with self._cond:
            entry = self._in_flight.pop(batch.batch_id, None)
            if entry is not None:
                entry.in_flight = False
            self._ready.notify()

    def replace(self, batch: Batch, parts: Sequence[Batch]) -> None:
        """Put `parts` where `batch` was (persisted first), then forget the in-flight `batch`."""
        with self._cond:
            entry = self._in_flight.get(batch.batch_id)
            new = [self._backing.persist(p) for p in parts]
            at = self._entries.index(entry) if entry is not None else 0
            for part in reversed(new):
                self._entries.insert(at, part)
                self._bytes += part.nbytes
                self._events += part.count
            if entry is not None:
                self._discard(entry)
            self._ready.notify(len(new))
            self._cond.notify_all()

    def stats(self) -> tuple[int, int, int]:
        """(pending batches, pending events, bytes held)."""
        with self._cond:
            return len(self._entries), self._events, self._bytes

    def wake(self) -> None:
        """Wake every thread waiting in `next_ready` or `wait_for_room` (used at close)."""
        with self._cond:
            self._stopped = True
            self._ready.notify_all()
            self._cond.notify_all()
