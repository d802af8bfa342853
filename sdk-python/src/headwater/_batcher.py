"""Batch assembly: pure size accounting (at most N events and a byte cap per batch) and the sealed batch type."""

from __future__ import annotations

import dataclasses
from typing import Generic, TypeVar

T = TypeVar("T")

# Bytes of a JSON batch body around its events: {"batch_id":...,"sent_at":...,"sdk":{...},"events":[...]}.
BODY_OVERHEAD = 256


@dataclasses.dataclass(frozen=True)
class Batch:
    """A sealed batch: its id (reused on every retry), its producer and seq range, and its encoded events.

    `events` holds each event's JSON envelope (UTF-8, without `sent_at`); `first_seq`..`last_seq` bound the
    seqs it carries (a split half carries a contiguous part of them).
    """

    batch_id: str
    producer_id: str
    first_seq: int
    last_seq: int
    events: tuple[bytes, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of the encoded events."""
        return sum(len(e) for e in self.events)


class Batcher(Generic[T]):
    """Packs items into batches of at most `max_items` and at most `max_bytes` (items + overhead), in order.

    `add` returns the batches that became full; `drain` returns the open batch. An item larger than a
    batch on its own is refused by `fits_alone` before it is added (the caller drops and counts it).
    """

    def __init__(self, max_items: int, max_bytes: int, overhead: int = BODY_OVERHEAD) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.overhead = overhead
        self._items: list[T] = []
        self._bytes = overhead

    def fits_alone(self, size: int) -> bool:
        """True if an item of `size` bytes fits in an empty batch."""
        return self.overhead + size + 1 <= self.max_bytes

    def would_seal(self, size: int) -> bool:
        """True if adding an item of `size` bytes would first seal the open batch (byte cap)."""
        return bool(self._items) and self._bytes + size + 1 > self.max_bytes

    def add(self, item: T, size: int) -> list[list[T]]:
        """Add an item of `size` bytes (it must fit alone); return the batches this sealed."""
        sealed: list[list[T]] = []
        if self._items and self._bytes + size + 1 > self.max_bytes:
            sealed.append(self.drain())
        self._items.append(item)
        self._bytes += size + 1  # the comma between events
        if len(self._items) >= self.max_items:
            sealed.append(self.drain())
        return sealed

    def drain(self) -> list[T]:
        """Seal and return the open batch (possibly empty)."""
        items, self._items, self._bytes = self._items, [], self.overhead
        return items

    def __len__(self) -> int:
        return len(self._items)
