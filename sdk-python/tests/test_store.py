"""The ordered store over a fake backing: order, in flight, splits, bounds, and batches the backing cannot load."""

from __future__ import annotations

import pytest

from headwater._batcher import Batch
from headwater._store import Entry, MemoryBacking, Store

pytestmark = pytest.mark.unit


class FakeBacking:
    """Records what the store asks of it; `unusable` batch ids load as None (as a corrupt spool file does)."""

    def __init__(self) -> None:
        self.persisted: list[str] = []
        self.removed: list[str] = []
        self.unusable: set[str] = set()

    def persist(self, batch: Batch) -> Entry:
        self.persisted.append(batch.batch_id)
        return MemoryBacking().persist(batch)

    def load(self, entry: Entry) -> Batch | None:
        return None if entry.batch_id in self.unusable else entry.batch

    def remove(self, entry: Entry) -> None:
        self.removed.append(entry.batch_id)


def new_drops() -> list[tuple[str, int]]:
    return []


def batch(batch_id: str, first: int, n: int = 2) -> Batch:
    return Batch(batch_id, "p", first, first + n - 1, tuple(b'{"seq":%d}' % s for s in range(first, first + n)))


def store(backing: FakeBacking, drops: list[tuple[str, int]], max_batches: int = 100,
          overflow: str = "backpressure") -> Store:
    return Store(backing, max_batches, 1 << 30, overflow, lambda reason, n, detail: drops.append((reason, n)))


def test_oldest_first_in_flight_until_acked_and_released_keeps_its_place() -> None:
    back, drops = FakeBacking(), new_drops()
    s = store(back, drops)
    assert s.append(batch("a", 0)) and s.append(batch("b", 2))
    first = s.next_ready(0)
    assert first is not None and first.batch_id == "a"
    second = s.next_ready(0)
    assert second is not None and second.batch_id == "b"
    assert s.next_ready(0) is None  # both in flight
    s.release(first)
    again = s.next_ready(0)
    assert again is not None and again.batch_id == "a"
    s.ack(again)
    assert back.removed == ["a"] and s.stats() == (1, 2, batch("b", 2).nbytes)


def test_a_split_takes_the_place_of_its_parent() -> None:
    back, drops = FakeBacking(), new_drops()
    s = store(back, drops)
    s.append(batch("a", 0, 4))
    s.append(batch("b", 4))
    parent = s.next_ready(0)
    assert parent is not None
    s.replace(parent, [batch("a0", 0), batch("a1", 2)])
    order = []
    while (b := s.next_ready(0)) is not None:
        order.append(b.batch_id)
    assert order == ["a0", "a1", "b"] and back.removed == ["a"]


def test_a_batch_the_backing_cannot_load_is_dropped_as_spool_corrupt() -> None:
    back, drops = FakeBacking(), new_drops()
    s = store(back, drops)
    s.append(batch("a", 0, 3))
    s.append(batch("b", 3))
    back.unusable.add("a")
    got = s.next_ready(0)
    assert got is not None and got.batch_id == "b"
    assert drops == [("spool_corrupt", 3)] and s.stats()[0] == 1


def test_drop_oldest_makes_room_from_the_oldest_idle_batch() -> None:
    back, drops = FakeBacking(), new_drops()
    s = store(back, drops, max_batches=2, overflow="drop_oldest")
    for i, bid in enumerate("abc"):
        s.append(batch(bid, 2 * i))
    assert drops == [("store_full_oldest", 2)] and back.removed == ["a"]
    got = s.next_ready(0)
    assert got is not None and got.batch_id == "b"


def test_recovered_entries_come_first() -> None:
    back = FakeBacking()
    old = MemoryBacking().persist(batch("old", 0))
    s = Store(back, 100, 1 << 30, "backpressure", lambda *a: None, recovered=[old])
    s.append(batch("new", 2))
    got = s.next_ready(0)
    assert got is not None and got.batch_id == "old" and back.persisted == ["new"]
