"""Delivery counters: what was queued, sent, acknowledged, rejected, dropped (by reason) and retried."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Metrics:
    """A snapshot of a client's counters (events unless the name says batches or bytes).

    `queued`: events waiting in memory now. `enqueued`: events accepted by `track()` so far. `sent`: events
    in batches handed to the sender (a spooled batch sent again after its retry deadline counts again).
    `acknowledged`: events the gateway accepted. `rejected`: events the gateway (or the Avro encoder)
    rejected permanently. `dropped`: events dropped, by reason. `retries`: retried send attempts.
    `pending_batches` / `pending_events`: sealed but not yet acknowledged. `spool_bytes`: bytes held by the
    spool (or by pending batches in memory). `in_flight_limit`: the adaptive in-flight window now (protocol.md
    §6.2), between 1 and `max_in_flight`. `endpoint`: the endpoint sent to now; `failovers` / `failbacks`:
    moves to the next endpoint / back to an earlier one (protocol.md §9).
    """

    queued: int
    enqueued: int
    sent: int
    acknowledged: int
    rejected: int
    dropped: Mapping[str, int]
    retries: int
    batches_sent: int
    pending_batches: int
    pending_events: int
    spool_bytes: int
    in_flight_limit: int
    endpoint: str = ""
    failovers: int = 0
    failbacks: int = 0

    @property
    def dropped_total(self) -> int:
        """Events dropped for any reason."""
        return sum(self.dropped.values())

    def as_dict(self) -> dict[str, Any]:
        """The snapshot as a plain dict (for logging or a metrics exporter)."""
        out = dataclasses.asdict(self)
        out["dropped"] = dict(self.dropped)
        return out


class Counters:
    """Thread-safe counters; `settled` (acked + rejected + dropped after acceptance) drives `flush()`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.settled_cond = threading.Condition(self.lock)
        self.sent = 0
        self.acknowledged = 0
        self.rejected = 0
        self.retries = 0
        self.batches_sent = 0
        self.settled = 0
        self.dropped: dict[str, int] = {}
        self._lost_mark = 0  # accepted events lost (rejected or dropped) at the previous check

    def add(self, name: str, n: int = 1) -> None:
        """Add `n` to the counter `name`."""
        with self.lock:
            setattr(self, name, getattr(self, name) + n)

    def settle(self, acknowledged: int = 0, rejected: int = 0, dropped: Mapping[str, int] | None = None) -> None:
        """Count events that reached a final state and wake `flush()` waiters."""
        with self.lock:
            self.acknowledged += acknowledged
            self.rejected += rejected
            n = acknowledged + rejected
            for reason, count in (dropped or {}).items():
                self.dropped[reason] = self.dropped.get(reason, 0) + count
                n += count
            self.settled += n
            self.settled_cond.notify_all()

    def no_loss_since_last_check(self) -> bool:
        """True if no accepted event was rejected or dropped since the previous call (or the start)."""
        with self.lock:
            lost = self.settled - self.acknowledged
            none, self._lost_mark = lost == self._lost_mark, lost
            return none

    def snapshot(self, queued: int, enqueued: int, store: tuple[int, int, int], window: int) -> Metrics:
        """A frozen copy of the counters, with the queue's figures, the store's (batches, events, bytes) and the
        in-flight window."""
        with self.lock:
            return Metrics(queued, enqueued, self.sent, self.acknowledged, self.rejected,
                           dict(self.dropped), self.retries, self.batches_sent, store[0], store[1], store[2], window)
