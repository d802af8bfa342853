"""The disk spool under its store: recovery after a crash, checksums and quarantine, bounds and overflow, seqs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater import ConfigError, SpoolLockedError
from headwater._batcher import Batch
from headwater._ids import uuid7
from headwater._spool import DiskSpool
from headwater._store import Store

pytestmark = pytest.mark.unit


class Drops:
    def __init__(self) -> None:
        self.items: list[tuple[str, int]] = []

    def __call__(self, reason: str, n: int, detail: str) -> None:
        self.items.append((reason, n))


class Spooled:
    """A `Store` over a `DiskSpool`, built as the pipeline builds them; the tests drive both through one object."""

    def __init__(self, disk: DiskSpool, store: Store) -> None:
        self.disk, self.store = disk, store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store if hasattr(self.store, name) else self.disk, name)


def open_spool(path: Path, max_bytes: int = 1 << 30, overflow: str = "backpressure", drops: Drops | None = None,
               fsync: bool = False) -> Spooled:
    disk = DiskSpool(str(path), fsync)
    store = Store(disk, 1 << 62, max_bytes, overflow, drops or Drops(), recovered=disk.recovered)
    return Spooled(disk, store)


def make_batch(spool: Spooled, n: int) -> Batch:
    """A batch of the next `n` seqs, reserved first as the queue does."""
    first = spool.disk.next_seq
    spool.disk.next_seq += n
    assert spool.reserve(first + n) > first + n
    events = tuple(f'{{"seq":{s},"event_id":"{uuid7()}"}}'.encode() for s in range(first, first + n))
    return Batch(uuid7(), spool.producer_id, first, first + n - 1, events)


def crash(spool: Spooled) -> None:
    """Simulate kill -9: the lock goes away, nothing else is written."""
    assert spool.disk._lock_file is not None
    spool.disk._lock_file.close()
    spool.disk._lock_file = None


def test_append_ack_and_restart(tmp_path: Path) -> None:
    spool = open_spool(tmp_path, fsync=True)
    b1, b2 = make_batch(spool, 3), make_batch(spool, 2)
    assert spool.append(b1) and spool.append(b2)
    assert spool.next_ready(0) == b1
    spool.ack(b1)
    producer = spool.producer_id
    crash(spool)
    again = open_spool(tmp_path)
    assert again.producer_id == producer and again.next_seq >= 5  # past every seq handed out (the reservation)
    assert again.next_ready(0) == b2
    assert again.stats() == (1, 2, os.path.getsize(next((tmp_path / "batches").iterdir())))


def test_seq_survives_acking_everything(tmp_path: Path) -> None:
    spool = open_spool(tmp_path)
    b = make_batch(spool, 4)
    spool.append(b)
    spool.ack(spool.next_ready(0) or b)
    crash(spool)
    assert open_spool(tmp_path).next_seq >= 4


def test_a_clean_close_records_the_exact_next_seq(tmp_path: Path) -> None:
    spool = open_spool(tmp_path)
    spool.append(make_batch(spool, 4))
    spool.close(next_seq=4)
    assert open_spool(tmp_path).next_seq == 4  # no gap after a clean restart


def test_one_owner_per_directory(tmp_path: Path) -> None:
    spool = open_spool(tmp_path)
    with pytest.raises(SpoolLockedError):
        open_spool(tmp_path)
    spool.close()
    open_spool(tmp_path).close()


def test_corrupt_file_is_quarantined_and_counted(tmp_path: Path) -> None:
    spool = open_spool(tmp_path)
    b1, b2 = make_batch(spool, 3), make_batch(spool, 1)
    spool.append(b1)
    spool.append(b2)
    crash(spool)
    victim = sorted((tmp_path / "batches").iterdir())[0]
    data = bytearray(victim.read_bytes())
    data[-3] ^= 0xFF
    victim.write_bytes(bytes(data))
    (tmp_path / "batches" / "garbage.hwb").write_bytes(b"nope")
    drops = Drops()
    again = open_spool(tmp_path, drops=drops)
    assert again.next_ready(0) == b2
    assert drops.items == [("spool_corrupt", 3)]
    assert {p.name for p in (tmp_path / "quarantine").iterdir()} == {victim.name, "garbage.hwb"}
    assert again.next_seq >= 4


def test_corrupt_state_file_does_not_crash(tmp_path: Path) -> None:
    spool = open_spool(tmp_path)
    spool.append(make_batch(spool, 2))
    producer = spool.producer_id
    crash(spool)
    (tmp_path / "state.json").write_text("{broken")
    again = open_spool(tmp_path)
    assert again.producer_id == producer  # recovered from the pending batch file
    assert again.next_seq == 2


@pytest.mark.parametrize("overflow", ["backpressure", "drop_oldest"])
def test_size_bound_and_overflow(tmp_path: Path, overflow: str) -> None:
    drops = Drops()
    spool = open_spool(tmp_path, max_bytes=2_000, overflow=overflow, drops=drops)
    batches = [make_batch(spool, 10) for _ in range(6)]
    kept = []
    for b in batches:
        if overflow == "backpressure" and not spool.wait_for_room(0):
            break  # the batcher waits here: the events stay queued
        assert spool.append(b)  # never refused once there was room
        kept.append(b)
    _, _, nbytes = spool.stats()
    first = spool.next_ready(0)
    if overflow == "backpressure":
        assert drops.items == []  # backpressure never drops
        assert 0 < len(kept) < len(batches) and nbytes <= 2_000 + kept[-1].nbytes * 2
        assert first == batches[0] and not spool.has_room()
    else:
        assert nbytes <= 2_000
        assert drops.items and all(r == "store_full_oldest" and n == 10 for r, n in drops.items)
        assert first != batches[0]


def test_split_replaces_the_batch(tmp_path: Path) -> None:
    spool = open_spool(tmp_path)
    b = make_batch(spool, 4)
    spool.append(b)
    assert spool.next_ready(0) == b
    halves = [Batch("h0", b.producer_id, 0, 1, b.events[:2]), Batch("h1", b.producer_id, 2, 3, b.events[2:])]
    spool.replace(b, halves)
    crash(spool)
    again = open_spool(tmp_path)
    assert again.next_ready(0) == halves[0]


OPS = st.lists(st.one_of(st.tuples(st.just("append"), st.integers(1, 40)), st.just(("ack", 0)),
                         st.just(("release", 0)), st.just(("crash", 0))), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_no_unacked_batch_is_ever_lost_and_seqs_stay_gapless(tmp_path_factory: pytest.TempPathFactory,
                                                              ops: list[tuple[str, int]]) -> None:
    path = tmp_path_factory.mktemp("spool")
    spool = open_spool(path)
    unacked: dict[str, Batch] = {}
    highest = -1
    for op, n in ops:
        if op == "append":
            new = make_batch(spool, n)
            assert new.first_seq > highest  # never reused across crashes
            highest = new.last_seq
            assert spool.append(new)
            unacked[new.batch_id] = new
        elif op in ("ack", "release"):
            batch = spool.next_ready(0)
            if batch is not None:
                assert batch == min(unacked.values(), key=lambda b: b.first_seq)  # oldest first
                if op == "ack":
                    spool.ack(batch)
                    del unacked[batch.batch_id]
                else:
                    spool.release(batch)
        else:
            crash(spool)
            spool = open_spool(path)
    crash(spool)
    final = open_spool(path)
    assert final.next_seq > highest
    recovered = []
    while (left := final.next_ready(0)) is not None:
        recovered.append(left)
        final.ack(left)
    assert recovered == sorted(unacked.values(), key=lambda b: b.first_seq)
    final.close()


def test_journal_of_the_open_batch_becomes_a_batch_after_a_crash(tmp_path: Path) -> None:
    spool = open_spool(tmp_path)
    producer = spool.producer_id
    for seq in range(3):
        spool.reserve(seq)
        spool.journal.append("open-batch", seq, f'{{"seq":{seq}}}'.encode())
    crash(spool)
    journal = tmp_path / "journal" / "open-batch.hwj"
    with journal.open("ab") as f:
        f.write(b"\x00\x00\x01\x00torn")  # a record cut short by the kill: its track() never returned
    again = open_spool(tmp_path)
    batch = again.next_ready(0)
    assert batch is not None and batch.batch_id == "open-batch" and batch.producer_id == producer
    assert (batch.first_seq, batch.last_seq) == (0, 2) and len(batch.events) == 3
    assert not journal.exists() and again.next_seq >= 3


def test_sealing_deletes_the_journal(tmp_path: Path) -> None:
    spool = open_spool(tmp_path)
    spool.reserve(0)
    spool.journal.append("b-1", 0, b'{"seq":0}')
    spool.append(Batch("b-1", spool.producer_id, 0, 0, (b'{"seq":0}',)))
    assert list((tmp_path / "journal").iterdir()) == []
    spool.close(next_seq=1)


def test_an_unusable_spool_dir_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match="spool_dir"):
        open_spool(blocker / "spool")


def test_a_group_of_batch_files_shares_one_directory_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import headwater._spool as spool_module
    import headwater._spoolfile as spoolfile_module

    spool = open_spool(tmp_path, fsync=True)
    synced: list[str] = []
    batches = str(tmp_path / "batches")

    def record(path: str) -> None:
        if path == batches:  # state.json's own writes sync the spool's top directory
            synced.append(path)

    monkeypatch.setattr(spool_module, "fsync_dir", record)
    monkeypatch.setattr(spoolfile_module, "fsync_dir", record)
    with spool.group():
        for _ in range(5):
            spool.append(make_batch(spool, 3))
    assert synced == [batches]  # one, after the last file
    spool.append(make_batch(spool, 1))
    assert len(synced) == 2  # outside a group: one per file
    with spool.group():
        pass
    assert len(synced) == 2  # an empty group syncs nothing
    crash(spool)
    assert open_spool(tmp_path).stats()[0] == 6
