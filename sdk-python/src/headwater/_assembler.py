"""Turning queued events into sealed batches: envelope encoding, gapless seq assignment, handing to the store."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Callable

from ._batcher import Batch, Batcher
from ._config import ClientConfig
from ._event import EnvelopeFields, PendingEvent, encode_envelope, envelope
from ._ids import uuid7
from ._store import Store

DropCounter = Callable[[dict[str, int]], None]


class Assembler:
    """Packs events into batches; a seq is consumed only by an event that joins a batch, so seqs are gapless.

    Events that cannot be encoded (NaN, lone surrogates, unserialisable values) or are larger than
    `max_event_bytes` are dropped before they get a seq and counted. A seq gap downstream therefore means a
    sealed batch was lost after this point (spool overflow or corruption, both counted) or never reached
    Kafka. Thread-safe: the batcher thread and a `spill` caller may both add.
    """

    def __init__(self, cfg: ClientConfig, store: Store, drop: DropCounter) -> None:
        self._cfg = cfg
        self._store = store
        self._drop = drop
        self._fields = EnvelopeFields(store.producer_id, cfg.node_id, dict(cfg.context))
        self._batcher: Batcher[tuple[int, bytes]] = Batcher(cfg.max_batch_events, cfg.max_batch_bytes)
        self._lock = threading.RLock()  # re-entrant: a drop callback may track() under the spill policy
        self.open_since: float | None = None

    def add(self, events: Iterable[PendingEvent]) -> None:
        """Encode and pack `events`; batches that fill up are sealed and stored."""
        drops: dict[str, int] = {}
        with self._lock:
            for event in events:
                seq = self._store.next_seq
                try:
                    data = encode_envelope(envelope(event, seq, self._fields))
                except ValueError:
                    drops["invalid_properties"] = drops.get("invalid_properties", 0) + 1
                    continue
                if len(data) > self._cfg.max_event_bytes or not self._batcher.fits_alone(len(data)):
                    drops["event_too_large"] = drops.get("event_too_large", 0) + 1
                    continue
                self._store.next_seq = seq + 1
                for full in self._batcher.add((seq, data), len(data)):
                    self._seal(full)
            if len(self._batcher) == 0:
                self.open_since = None
            elif self.open_since is None:
                self.open_since = time.monotonic()
        if drops:
            self._drop(drops)

    def seal_open(self) -> None:
        """Seal and store the open batch, however small."""
        with self._lock:
            items = self._batcher.drain()
            self.open_since = None
            if items:
                self._seal(items)

    def _seal(self, items: list[tuple[int, bytes]]) -> None:
        batch = Batch(uuid7(), self._fields.producer_id, items[0][0], items[-1][0], tuple(d for _, d in items))
        self._store.append(batch)

    def open_count(self) -> int:
        """Events in the open batch."""
        return len(self._batcher)
