"""The shared tail of one topic: the last records a live reader decoded, as ready SSE frames, that every
subscriber of the topic reads through its own cursor (an index into the ring).

One reader decodes and frames each record once, whatever the number of subscribers; a subscriber costs an
index, and the bytes it is sent. Each frame's id is the reader's position after that record (`R(seq)`), so a
subscriber that started at a position the ring has passed sends the same bytes as every other ("shared" mode).
A subscriber that joins at a position inside the ring but not on one of its frames (it comes from catch-up,
which read the log in another partition order) is "merging": until the ring has passed its own position in
every partition, it skips what it already sent and its ids are max(own, R(seq)), made for it alone.

Bounded by bytes (`capacity`): the oldest frames are dropped; a subscriber whose index falls off the start has
fallen too far behind and is cut off (subscriber.py), and resumes from the log. Runs on the event loop only.

Filters (equality only, filters.py) read through an index of the frames being sent by the value of one field:
built once per range of frames and field path, it is shared by every subscriber that filters on that path, so
a thousand subscribers each following one node cost a dictionary lookup each per push, not a match per record
each.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from subscribe import position as pos
from subscribe.filters import Fields, Filter, Key, field_key

COMPACT_AT = 4096
INDEXED_PATHS = 256  # field paths indexed at once (filters name at most 8 each); more: the index starts over


@dataclass(slots=True)
class Entry:
    """One framed record as the reader hands it over."""

    frame: bytes
    id_len: int
    partition: int
    offset: int
    event_type: str | None
    fields: Fields  # what filters read (filters.fields_of): untracked by the garbage collector


@dataclass
class View:
    """What one subscriber reads: its type and filter, where it is, and (merging) its own position."""

    event_type: str | None
    filter: Filter | None
    seq: int
    last_id: bytes
    own: list[int] | None = None  # merging: the subscriber's own position; None: shared

    @property
    def selective(self) -> bool:
        return self.event_type is not None or self.filter is not None


@dataclass
class Chunk:
    data: bytes
    seq: int        # the next index after the chunk
    last_id: bytes  # the position after the chunk (records skipped by type or filter included)
    records: int
    _wire: bytes = b""

    @property
    def wire(self) -> bytes:
        """The chunk as one HTTP/1.1 chunked-encoding chunk, made once for every subscriber that sends it."""
        if not self._wire:
            self._wire = b"%x\r\n%s\r\n" % (len(self.data), self.data)
        return self._wire


class Parked(Protocol):
    """A subscriber waiting at the ring's tail whose new messages the ring writes itself (subscriber.py)."""

    def push(self) -> bool:
        """Write what is new if the socket takes it at once; False: the subscriber's own task must take over."""

    def unpark(self) -> None:
        """Wake the subscriber's task."""


@dataclass
class Ring:
    topic: str
    start: pos.Cursor            # where the reader started: the position before the first frame
    capacity: int                # bytes of frames kept
    tag: bytes = b""
    frames: list[bytes] = field(default_factory=list)
    id_lens: list[int] = field(default_factory=list)
    parts: list[int] = field(default_factory=list)
    offs: list[int] = field(default_factory=list)
    types: list[str | None] = field(default_factory=list)
    fields: list[Fields] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # bytes from the ring's beginning to the end of each frame
    received: list[float] = field(default_factory=list)  # when the reader got each record (monotonic s)
    head: int = 0                # list index of the oldest frame kept
    first_seq: int = 0           # its sequence number
    base: pos.Cursor = ()        # the position before the oldest frame kept
    base_bytes: int = 0
    tail: pos.Cursor = ()        # the reader's position after the newest frame (and past commit markers)
    tail_id: bytes = b""
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    parked: dict[Parked, None] = field(default_factory=dict)  # insertion-ordered set
    after_push: list[Callable[[float | None], None]] = field(default_factory=list)
    _cache: dict[tuple[str | None, str | None], tuple[int, int, Chunk]] = field(default_factory=dict)
    # path -> (first seq, frames, {comparison key: offsets in the range}): the last range read through each path
    _index: dict[str, tuple[int, int, dict[Key, list[int]]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tag = pos.topic_tag(self.topic)
        self.base = self.tail = tuple(self.start)
        self.tail_id = pos.encode(self.tag, self.tail)

    @property
    def partitions(self) -> int:
        return len(self.start)

    @property
    def next_seq(self) -> int:
        return self.first_seq + len(self.frames) - self.head

    @property
    def tail_bytes(self) -> int:
        return self.ends[-1] if len(self.ends) > self.head else self.base_bytes

    def append(self, entries: Sequence[Entry], tail: pos.Cursor, received: float | None = None) -> None:
        """Add a batch in the reader's order (`received`: when the reader got it from Kafka, monotonic s), move the
        tail, drop what is over capacity, wake the readers."""
        total = self.tail_bytes
        got = time.monotonic() if received is None else received
        for e in entries:
            total += len(e.frame)
            self.frames.append(e.frame)
            self.id_lens.append(e.id_len)
            self.parts.append(e.partition)
            self.offs.append(e.offset)
            self.types.append(e.event_type)
            self.fields.append(e.fields)
            self.ends.append(total)
            self.received.append(got)
        if tuple(tail) != self.tail:
            self.tail = tuple(tail)
            self.tail_id = pos.encode(self.tag, self.tail)
        self._evict()
        self.push_parked(got if entries else None)
        self.changed.set()
        self.changed.clear()

    def push_parked(self, received: float | None) -> None:
        """Write the new frames to every parked subscriber in one pass (no task switch, one socket write each);
        those whose socket is backed up, or that are too far behind, go back to their own task."""
        if not self.parked:
            return
        for sub in list(self.parked):
            if not sub.push():
                del self.parked[sub]
                sub.unpark()
        for hook in self.after_push:
            hook(received)

    def unpark_all(self) -> None:
        """Wake every parked subscriber's task (heartbeats, shutdown)."""
        parked, self.parked = self.parked, {}
        for sub in parked:
            sub.unpark()

    def _evict(self) -> None:
        over = self.tail_bytes - self.base_bytes - self.capacity
        if over <= 0:
            return
        last = bisect_right(self.ends, self.base_bytes + over - 1, lo=self.head)  # frames ending within `over`
        last = min(last, len(self.frames) - 1)  # the newest frame always stays
        if last < self.head:
            return
        self.base = self._cursor_at(last)
        self.base_bytes = self.ends[last]
        self.first_seq += last + 1 - self.head
        self.head = last + 1
        if self.head >= COMPACT_AT and self.head * 2 >= len(self.frames):
            for lst in (self.frames, self.id_lens, self.parts, self.offs, self.types, self.fields, self.ends,
                        self.received):
                del lst[:self.head]
            self.head = 0

    def received_at(self, seq: int) -> float | None:
        """When the reader got the record at `seq` from Kafka; None when dropped or not there yet."""
        i = self.head + seq - self.first_seq
        return self.received[i] if seq >= self.first_seq and i < len(self.received) else None

    def _id_at(self, i: int) -> bytes:
        return self.frames[i][4:4 + self.id_lens[i]]

    def _cursor_at(self, i: int) -> pos.Cursor:
        return pos.decode_shared(self._id_at(i))

    def holds(self, cursor: Sequence[int]) -> bool:
        """Whether a subscriber at `cursor` can read on from the ring (nothing it lacks was dropped)."""
        return pos.covers(cursor, self.base)

    def lag(self, seq: int) -> int | None:
        """Bytes of frames from `seq` to the tail; None when `seq` was dropped."""
        if seq < self.first_seq:
            return None
        i = self.head + seq - self.first_seq
        before = self.base_bytes if i == self.head else self.ends[i - 1]
        return self.tail_bytes - before

    def join(self, cursor: Sequence[int], event_type: str | None, filt: Filter | None) -> View:
        """A view for a subscriber at `cursor` (`holds(cursor)` must be true): shared when it is the tail,
        else merging from the first frame it may lack (binary search: R(seq) grows with seq)."""
        c = tuple(cursor)
        if c == self.tail:
            return View(event_type, filt, self.next_seq, self.tail_id)
        lo, hi = self.head, len(self.frames)  # first index whose position is not within c
        while lo < hi:
            mid = (lo + hi) // 2
            if pos.covers(c, self._cursor_at(mid)):
                lo = mid + 1
            else:
                hi = mid
        return View(event_type, filt, self.first_seq + lo - self.head, pos.encode(self.tag, c), own=list(c))

    def read(self, view: View, max_bytes: int) -> Chunk | None:
        """The frames after `view.seq` for this subscriber, up to about `max_bytes`; None when at the tail.
        The caller checks `lag` first: `view.seq` must not have been dropped."""
        i = self.head + view.seq - self.first_seq
        n = len(self.frames)
        if i >= n:  # at the tail: the reader's position (past commit markers too) is this subscriber's
            if view.own is None or pos.covers(self.tail, view.own):
                view.own = None  # merging ends once the reader has passed every partition
                view.last_id = self.tail_id
            return None
        before = self.base_bytes if i == self.head else self.ends[i - 1]
        j = max(i + 1, bisect_right(self.ends, before + max_bytes, lo=i, hi=n))
        if view.own is not None:
            return self._read_merging(view, i, j)
        key = (view.event_type, view.filter.text if view.filter else None)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == view.seq and cached[1] == j - i:
            chunk = cached[2]
        else:
            chunk = self._read_shared(view, i, j)
            self._cache[key] = (view.seq, j - i, chunk)
        view.seq, view.last_id = chunk.seq, chunk.last_id
        return chunk

    def _read_shared(self, view: View, i: int, j: int) -> Chunk:
        if not view.selective:
            data = b"".join(self.frames[i:j])
            count = j - i
        else:
            t, f, types, fields, frames = view.event_type, view.filter, self.types, self.fields, self.frames
            if f is None:
                picked = [frames[k] for k in range(i, j) if types[k] == t]
            else:
                path, allowed = f.clauses[0]
                index = self._by_value(path, view.seq, i, j)
                found = [i + o for key in allowed for o in index.get(key, ())]
                if len(allowed) > 1:
                    found.sort()
                rest = len(f.clauses) > 1
                picked = [frames[k] for k in found
                          if (t is None or types[k] == t) and (not rest or f.matches_fields(fields[k]))]
            data, count = b"".join(picked), len(picked)
        return Chunk(data, view.seq + (j - i), self._id_at(j - 1), count)

    def _by_value(self, path: str, seq: int, i: int, j: int) -> dict[Key, list[int]]:
        """Frames i..j-1 (sequence `seq` on) by the comparison key of their field `path`, as offsets from i; made
        once per range and path (sequence numbers, unlike list indices, survive compaction)."""
        got = self._index.get(path)
        if got is not None and got[0] == seq and got[1] == j - i:
            return got[2]
        out: dict[Key, list[int]] = {}
        fields = self.fields
        for o in range(j - i):
            if (key := field_key(fields[i + o], path)) is not None:
                out.setdefault(key, []).append(o)
        if len(self._index) >= INDEXED_PATHS and path not in self._index:
            self._index.clear()
        self._index[path] = (seq, j - i, out)
        return out

    def _read_merging(self, view: View, i: int, j: int) -> Chunk:
        own = view.own
        assert own is not None
        out: list[bytes] = []
        t, f = view.event_type, view.filter
        k = i
        while k < j:
            r = self._cursor_at(k)
            p, o = self.parts[k], self.offs[k]
            if o >= own[p]:
                own[p] = o + 1
                if (t is None or self.types[k] == t) and (f is None or f.matches_fields(self.fields[k])):
                    body = self.frames[k][4 + self.id_lens[k] + 7:-2]
                    out.append(b"id: " + pos.encode(self.tag, _max(own, r)) + b"\ndata: " + body + b"\n\n")
            k += 1
            if pos.covers(r, own):
                view.own = None
                view.last_id = self._id_at(k - 1)
                break
        if view.own is not None:
            view.last_id = pos.encode(self.tag, _max(own, self._cursor_at(k - 1)))
        view.seq += k - i
        chunk = Chunk(b"".join(out), view.seq, view.last_id, len(out))
        if view.own is None and k < j:  # the rest of the range is shared
            rest = self._read_shared(view, k, j)
            view.seq, view.last_id = rest.seq, rest.last_id
            chunk = Chunk(chunk.data + rest.data, rest.seq, rest.last_id, chunk.records + rest.records)
        return chunk


def _max(a: Sequence[int], b: Sequence[int]) -> list[int]:
    return [x if x >= y else y for x, y in zip(a, b, strict=True)]
