"""The bounded in-memory event queue between `track()` and the batcher thread: full-queue policies and seqs.

A seq is handed out here, under the queue's lock, when the queue accepts an event (protocol.md §2, "Assigning
`seq`"), so seqs are gapless over accepted events in acceptance order. Seqs come from a reservation the store persists
ahead of use (`Reserve`): when the reservation is used up, `put` renews it synchronously (rare: the batcher
thread renews it ahead of time), so a seq handed out is never handed out again after a crash.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable, NamedTuple

Reserve = Callable[[int], int]  # (next seq to hand out) -> new exclusive limit, persisted before it returns


class Queued(NamedTuple):
    """An accepted event waiting for the batcher: its seq and its envelope without the seq (see `_event`)."""

    seq: int
    head: bytes
    tail: bytes


class EventQueue:
    """A bounded FIFO of pending events; `put` never blocks unless the policy is `block`.

    Policies when full: `drop_newest` refuses the new event, `drop_oldest` evicts the oldest queued one,
    `block` waits up to `block_timeout_s` for room then refuses, `spill` refuses so the caller can move the
    queue to the disk spool. The batcher is woken (no polling) when the queue becomes non-empty, when it holds
    a full batch, and on flush or close.
    """

    def __init__(self, maxlen: int, policy: str, block_timeout_s: float, batch_events: int, *,
                 first_seq: int, reserve: Reserve) -> None:
        self.maxlen = maxlen
        self.policy = policy
        self.block_timeout_s = block_timeout_s
        self.batch_events = batch_events
        self.wake = threading.Event()
        self.flush_requested = False
        self.accepted = 0  # events ever accepted (counted here, under the queue's lock, to keep put() cheap)
        self.next_seq = first_seq
        self.oldest_at: float | None = None  # monotonic time the oldest queued event was accepted (or earlier)
        self.closed = False
        self._reserve = reserve
        self._limit = reserve(first_seq)
        self._items: deque[Queued] = deque()
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)

    def put(self, head: bytes, tail: bytes) -> tuple[int | None, Queued | None]:
        """Queue an event: (its seq, or None if refused; the evicted event or None)."""
        with self._lock:
            items = self._items
            evicted = None
            if self.closed:
                return None, None
            if len(items) >= self.maxlen:
                if self.policy == "drop_oldest":
                    evicted = items.popleft()
                elif not (self.policy == "block" and self._wait_for_room()):
                    return None, None
            seq = self.next_seq
            if seq >= self._limit:
                self._limit = self._reserve(seq)
            self.next_seq = seq + 1
            items.append(Queued(seq, head, tail))
            self.accepted += 1
            n = len(items)
            if n == 1:
                self.oldest_at = time.monotonic()
        if n in (1, self.batch_events):
            self.wake.set()
        return seq, evicted

    def next_seq_for_sync(self) -> int:
        """Hand out one seq without queueing (durability `sync`: the caller writes the event to the spool)."""
        with self._lock:
            seq = self.next_seq
            if seq >= self._limit:
                self._limit = self._reserve(seq)
            self.next_seq = seq + 1
            self.accepted += 1
            return seq

    def renew(self, margin: int) -> None:
        """Extend the seq reservation ahead of use if fewer than `margin` seqs remain (batcher thread)."""
        with self._lock:
            start = self.next_seq
            if self._limit - start >= margin:
                return
        limit = self._reserve(start)
        with self._lock:
            self._limit = max(self._limit, limit)

    def _wait_for_room(self) -> bool:
        deadline = time.monotonic() + self.block_timeout_s
        while len(self._items) >= self.maxlen:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closed:
                return False
            self.wake.set()
            self._not_full.wait(remaining)
        return True

    def take(self, limit: int = 1 << 62) -> tuple[list[Queued], float | None]:
        """Remove up to `limit` events, oldest first: (events, when the oldest of them was accepted)."""
        with self._lock:
            items = self._items
            since = self.oldest_at
            if limit >= len(items):
                out = list(items)
                items.clear()
            else:
                out = [items.popleft() for _ in range(limit)]
            self.oldest_at = since if items else None  # conservative: what remains is not older than `since`
            self._not_full.notify_all()
            return out, since

    def close(self) -> int:
        """Refuse every further event; the next seq that would have been handed out."""
        with self._lock:
            self.closed = True
            self._not_full.notify_all()
            return self.next_seq

    def request_flush(self) -> None:
        """Ask the batcher to seal its open batch now."""
        self.flush_requested = True
        self.wake.set()

    def __len__(self) -> int:
        return len(self._items)
