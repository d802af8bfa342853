"""The bounded in-memory event queue between `track()` and the batcher thread, with its full-queue policies."""

from __future__ import annotations

import threading
import time
from collections import deque

from ._event import PendingEvent

FULL = "queue_full"


class EventQueue:
    """A bounded FIFO of pending events; `put` never blocks unless the policy is `block`.

    Policies when full: `drop_newest` refuses the new event, `drop_oldest` evicts the oldest queued one,
    `block` waits up to `block_timeout_s` for room then refuses, `spill` refuses so the caller can move the
    queue to the disk spool. The batcher is woken (no polling) when the queue becomes non-empty, when it holds
    a full batch, and on flush or close.
    """

    def __init__(self, maxlen: int, policy: str, block_timeout_s: float, batch_events: int) -> None:
        self.maxlen = maxlen
        self.policy = policy
        self.block_timeout_s = block_timeout_s
        self.batch_events = batch_events
        self.wake = threading.Event()
        self.flush_requested = False
        self.accepted = 0  # events ever accepted (counted here, under the queue's lock, to keep put() cheap)
        self._items: deque[PendingEvent] = deque()
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)

    def put(self, event: PendingEvent) -> tuple[bool, PendingEvent | None]:
        """Queue `event`: (accepted, evicted event or None). A refused event is the caller's to count."""
        with self._lock:
            items = self._items
            evicted = None
            if len(items) >= self.maxlen:
                if self.policy == "drop_oldest":
                    evicted = items.popleft()
                elif self.policy == "block" and self._wait_for_room():
                    pass
                else:
                    return False, None
            items.append(event)
            self.accepted += 1
            n = len(items)
        if n in (1, self.batch_events):
            self.wake.set()
        return True, evicted

    def _wait_for_room(self) -> bool:
        deadline = time.monotonic() + self.block_timeout_s
        while len(self._items) >= self.maxlen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.wake.set()
            self._not_full.wait(remaining)
        return True

    def take(self, limit: int = 1 << 62) -> list[PendingEvent]:
        """Remove and return up to `limit` events, oldest first."""
        with self._lock:
            items = self._items
            if limit >= len(items):
                out = list(items)
                items.clear()
            else:
                out = [items.popleft() for _ in range(limit)]
            self._not_full.notify_all()
            return out

    def request_flush(self) -> None:
        """Ask the batcher to seal its open batch now."""
        self.flush_requested = True
        self.wake.set()

    def __len__(self) -> int:
        return len(self._items)
