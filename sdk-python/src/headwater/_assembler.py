"""Turning accepted events into sealed batches (by count, bytes and linger) and handing them to the store."""

from __future__ import annotations

import threading
import time
from typing import Callable

from ._batcher import Batch, Batcher
from ._config import ClientConfig
from ._ids import uuid7
from ._queue import Queued
from ._store import Store

JournalAppend = Callable[[str, int, bytes], None]  # (open batch id, seq, envelope): durability "sync"


class Assembler:
    """Packs events (already encoded, seqs already assigned) into batches; full batches are sealed and stored.

    The open batch gets its id when its first event arrives, so a journal (durability `sync`) can name it.
    `open_since` is when the oldest event of the open batch was accepted: the batcher seals it `linger_s`
    later whatever else is queued. Thread-safe: the batcher thread, a `spill` caller and a `sync` caller
    may all add.
    """

    def __init__(self, cfg: ClientConfig, store: Store, producer_id: str, journal: JournalAppend | None = None) -> None:
        self._store = store
        self._journal = journal
        self._producer_id = producer_id
        self._batcher: Batcher[tuple[int, bytes]] = Batcher(cfg.max_batch_events, cfg.max_batch_bytes)
        self._lock = threading.RLock()
        self._open_id: str | None = None
        self.open_since: float | None = None

    def add(self, events: list[Queued], since: float | None) -> None:
        """Pack queued `events` (accepted at `since` or later); batches that fill up are sealed and stored."""
        with self._lock:
            for event in events:
                self._add(event.seq, event.head + str(event.seq).encode() + event.tail, since)

    def add_sync(self, head: bytes, tail: bytes, next_seq: Callable[[], int]) -> int:
        """Durability `sync`: take a seq, journal the event, pack it (on the caller's thread); returns the seq.

        The seq is taken under the assembler's lock, so events join batches in seq order.
        """
        with self._lock:
            seq = next_seq()
            self._add(seq, head + str(seq).encode() + tail, time.monotonic())
            return seq

    def _add(self, seq: int, data: bytes, since: float | None) -> None:
        batcher = self._batcher
        if batcher.would_seal(len(data)):
            self.seal_open()
        if self._open_id is None:
            self._open_id = uuid7()
            self.open_since = since if since is not None else time.monotonic()
        if self._journal is not None:
            self._journal(self._open_id, seq, data)
        for full in batcher.add((seq, data), len(data)):
            self._seal(full)

    def seal_open(self) -> None:
        """Seal and store the open batch, however small."""
        with self._lock:
            items = self._batcher.drain()
            if items:
                self._seal(items)
            self._open_id = None
            self.open_since = None

    def _seal(self, items: list[tuple[int, bytes]]) -> None:
        batch_id = self._open_id or uuid7()
        self._open_id = None
        self.open_since = None
        seqs = [seq for seq, _ in items]  # in order, except when a `spill` caller and the batcher interleave
        self._store.append(Batch(batch_id, self._producer_id, min(seqs), max(seqs), tuple(d for _, d in items)))

    def open_count(self) -> int:
        """Events in the open batch."""
        return len(self._batcher)
