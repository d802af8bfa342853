"""Unit tests of the ring: every subscriber, whatever position it joins at (shared or merging), in whatever chunk
sizes it reads, gets each record after its position exactly once, in partition order, and every id it is given
is a position from which a new subscriber gets exactly the rest."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from subscribe import position as pos
from subscribe import sse
from subscribe.filters import parse_filter
from subscribe.ring import Entry, Ring

pytestmark = pytest.mark.unit
TOPIC = "t"
TAG = pos.topic_tag(TOPIC)


def make_log(rng: random.Random, partitions: int, n: int) -> tuple[list[tuple[list[Entry], tuple[int, ...]]],
                                                                     tuple[int, ...]]:
    """Batches as the reader hands them over: records interleaved across partitions, offsets with holes (commit
    markers), and tails moved past markers. Returns the batches and the start position."""
    start = tuple(rng.randint(0, 5) for _ in range(partitions))
    nxt, cursor = list(start), list(start)
    batches, batch = [], []
    for i in range(n):
        p = rng.randrange(partitions)
        o = nxt[p]
        nxt[p] = o + 1 + (1 if rng.random() < 0.2 else 0)  # a commit marker after some records
        cursor[p] = o + 1
        event_id = pos.encode(TAG, cursor)
        body = json.dumps({"p": p, "o": o, "kind": "a" if i % 3 else "b"}).encode()
        batch.append(Entry(sse.record(event_id, body), len(event_id), p, o, "a" if i % 3 else "b",
                           {"kind": "a" if i % 3 else "b", "i": i}))
        if rng.random() < 0.15:
            if rng.random() < 0.5:
                q = rng.randrange(partitions)
                cursor[q] = nxt[q]  # end of partition: the reader passed the marker
            batches.append((batch, tuple(cursor)))
            batch = []
    batches.append((batch, tuple(cursor)))
    return batches, start


def records(data: bytes) -> list[tuple[tuple[int, int], bytes]]:
    """(partition, offset) and id of every record frame in `data`."""
    out = []
    for frame in data.split(b"\n\n"):
        if b"\ndata: " in frame:
            head, _, body = frame.partition(b"\ndata: ")
            doc = json.loads(body)
            out.append(((doc["p"], doc["o"]), head[4:]))
    return out


def expected_after(all_entries: list[Entry], cursor: tuple[int, ...], kind: str | None = None) -> list[tuple[int, int]]:
    return [(e.partition, e.offset) for e in all_entries
            if e.offset >= cursor[e.partition] and (kind is None or e.event_type == kind)]


def drain(ring: Ring, cursor: tuple[int, ...], max_bytes: int, kind: str | None = None,
          filt: str | None = None) -> list[tuple[tuple[int, int], bytes]]:
    view = ring.join(cursor, kind, parse_filter(filt))
    got = []
    while (chunk := ring.read(view, max_bytes)) is not None:
        got += records(chunk.data)
    return got


@pytest.mark.parametrize("seed", range(40))
def test_every_join_point_and_chunk_size_gets_each_record_once(seed: int) -> None:
    rng = random.Random(seed)
    partitions = rng.randint(1, 4)
    batches, start = make_log(rng, partitions, rng.randint(1, 120))
    ring = Ring(TOPIC, start, capacity=10**9)
    for entries, tail in batches:
        ring.append(entries, tail)
    every = [e for entries, _ in batches for e in entries]
    # join points: the start, every id the ring made, and positions mixed from two of them (catch-up's kind)
    ids = [pos.decode_shared(e.frame[4:4 + e.id_len]) for e in every]
    points = [start, *ids]
    points += [tuple(max(a, b) if rng.random() < 0.5 else min(a, b) for a, b in zip(x, y, strict=True))
               for x, y in zip(points, reversed(points), strict=True)]
    for cursor in rng.sample(points, min(len(points), 12)):
        for max_bytes in (1, 200, 10**6):
            got = drain(ring, cursor, max_bytes)
            assert [r for r, _ in got] == expected_after(every, cursor)
        for k, (_, event_id) in enumerate(got):  # each id is a resume point for exactly the rest
            rest = drain(ring, pos.decode(TAG, event_id, partitions), 10**6)
            assert [r for r, _ in rest] == [r for r, _ in got[k + 1:]]


@pytest.mark.parametrize("seed", range(10))
def test_type_and_filter_skip_without_losing_position(seed: int) -> None:
    rng = random.Random(seed)
    batches, start = make_log(rng, 3, 80)
    ring = Ring(TOPIC, start, capacity=10**9)
    for entries, tail in batches:
        ring.append(entries, tail)
    every = [e for entries, _ in batches for e in entries]
    for kind, filt in (("b", None), (None, '{"kind": "b"}')):
        got = drain(ring, start, 300, kind=kind, filt=filt)
        assert [r for r, _ in got] == expected_after(every, start, "b")
        view = ring.join(start, kind, parse_filter(filt))
        while ring.read(view, 10**6) is not None:
            pass
        assert view.last_id == ring.tail_id  # at the end the position is the reader's, past skipped records


def test_capacity_drops_oldest_and_lag_reports_it() -> None:
    rng = random.Random(7)
    batches, start = make_log(rng, 2, 200)
    ring = Ring(TOPIC, start, capacity=3000)
    view = ring.join(start, None, None)
    for entries, tail in batches:
        ring.append(entries, tail)
    assert ring.tail_bytes - ring.base_bytes <= 3000 + max(len(e.frame) for es, _ in batches for e in es)
    assert ring.lag(view.seq) is None  # its place was dropped: it must be cut off
    assert not ring.holds(start)
    fresh = ring.join(ring.tail, None, None)
    assert ring.lag(fresh.seq) == 0 and ring.read(fresh, 100) is None
    every = [e for es, _ in batches for e in es]
    assert [r for r, _ in drain(ring, ring.base, 10**6)] == expected_after(every, ring.base)


def test_shared_chunks_are_built_once_for_subscribers_at_the_same_place() -> None:
    rng = random.Random(3)
    batches, start = make_log(rng, 2, 50)
    ring = Ring(TOPIC, start, capacity=10**9)
    a, b = ring.join(start, None, None), ring.join(start, None, None)
    for entries, tail in batches:
        ring.append(entries, tail)
    ca, cb = ring.read(a, 10**6), ring.read(b, 10**6)
    assert ca is not None and cb is not None and ca.data is cb.data


class FakeParked:
    """A parked subscriber that takes (or refuses) every push, and counts pushes and wake-ups."""

    def __init__(self, takes: bool) -> None:
        self.takes, self.pushed, self.woken = takes, 0, 0

    def push(self) -> bool:
        self.pushed += 1
        return self.takes

    def unpark(self) -> None:
        self.woken += 1


def test_each_batch_is_pushed_to_parked_subscribers_once_and_those_that_cannot_take_it_are_woken() -> None:
    batches, start = make_log(random.Random(5), 2, 40)
    ring = Ring(TOPIC, start, capacity=10**9)
    taker, refuser = FakeParked(True), FakeParked(False)
    ring.parked.update({taker: None, refuser: None})
    held: list[float | None] = []
    ring.after_push.append(held.append)
    entries, tail = batches[0]
    ring.append(entries, tail, received=12.5)
    assert (taker.pushed, taker.woken) == (1, 0) and (refuser.pushed, refuser.woken) == (1, 1)
    assert list(ring.parked) == [taker] and held == [12.5]
    ring.unpark_all()
    assert taker.woken == 1 and not ring.parked


def test_a_chunk_is_framed_for_http_once() -> None:
    batches, start = make_log(random.Random(6), 1, 20)
    ring = Ring(TOPIC, start, capacity=10**9)
    a, b = ring.join(start, None, None), ring.join(start, None, None)
    for entries, tail in batches:
        ring.append(entries, tail)
    ca, cb = ring.read(a, 10**6), ring.read(b, 10**6)
    assert ca is not None and cb is not None
    assert ca.wire is cb.wire and ca.wire == b"%x\r\n" % len(ca.data) + ca.data + b"\r\n"


@pytest.mark.parametrize("seed", range(6))
def test_filtered_subscribers_read_through_the_shared_index_what_a_match_per_record_gives(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many subscribers at the tail, each with its own equality filter (one value, several, two fields, with an
    event type, numbers of both kinds and booleans), read batch after batch while the ring drops and compacts:
    each gets exactly the records a match of its filter against every record gives, in order."""
    import subscribe.ring as ring_module

    monkeypatch.setattr(ring_module, "COMPACT_AT", 16)  # compaction shifts list indices between pushes
    rng = random.Random(seed)
    filters = ['{"node": "n1"}', '{"node": ["n2", "n7"]}', '{"node": "n3", "flag": true}', '{"n": 1}',
               '{"n": [2, 3.0]}', '{"flag": false}', '{"node": "absent"}', '{"flag": 1}', '{"node": "n4"}']
    start = (0, 0)
    ring = Ring(TOPIC, start, capacity=4000)
    views = [(ring.join(start, kind, parse_filter(f)), kind, f) for f in filters for kind in (None, "a")]
    got: dict[int, list[tuple[int, int]]] = {k: [] for k in range(len(views))}
    want: dict[int, list[tuple[int, int]]] = {k: [] for k in range(len(views))}
    nxt, appended = [0, 0], 0
    for _ in range(60):
        batch = []
        for _ in range(rng.randint(1, 12)):
            p = rng.randrange(2)
            o, nxt[p] = nxt[p], nxt[p] + 1
            fields: dict[str, Any] = {"node": f"n{rng.randrange(8)}", "n": rng.choice([1, 1.0, 2, 3, 3.0, True])}
            if rng.random() < 0.7:
                fields["flag"] = rng.random() < 0.5
            event_type = rng.choice(["a", "b"])
            event_id = pos.encode(TAG, (nxt[0], nxt[1]))
            body = json.dumps({"p": p, "o": o}).encode()
            batch.append(Entry(sse.record(event_id, body), len(event_id), p, o, event_type, fields))
        ring.append(batch, (nxt[0], nxt[1]))
        appended += len(batch)
        for k, (view, kind, f) in enumerate(views):
            filt = parse_filter(f)
            assert filt is not None
            want[k] += [(e.partition, e.offset) for e in batch
                        if (kind is None or e.event_type == kind) and filt.matches_fields(e.fields)]
            while (chunk := ring.read(view, 300)) is not None:
                got[k] += [r for r, _ in records(chunk.data)]
    assert len(ring.frames) < appended  # compacted (dropped frames deleted from the lists) at least once
    for k, (_, kind, f) in enumerate(views):
        assert got[k] == want[k], (kind, f)
    assert sum(map(len, want.values())) > 100
