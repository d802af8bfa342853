"""The loss audit's gap state machine (pure Python): per producer, which seqs are missing and when to report them.

Every producer (SDK instance) numbers its events with `seq`, gapless from 0 per `producer_id`. The
streaming query keeps, per producer, the state `merge` works on (pure Python, unit-tested without Spark):

- `next_expected`: every seq below it is accounted for (seen, or already reported missing);
- `seen`: the seq ranges seen above it, each with the processing time its first seq arrived, at most
  `MAX_RANGES`; the gap below a range has been open since the earliest of those times from that range
  upwards (a missing seq is "observed" once any higher seq has been seen);
- `reported`: the still-missing parts of the most recently reported gaps, at most `MAX_REPORTED` ranges,
  so that their events arriving afterwards are reported as `arrived_late`.

A gap is reported (`status = 'missing'`) once it has been open for the grace period
(`HEADWATER_LOSS_GRACE`; 0 reports at once), and `next_expected` then moves past it. Events of a reported
gap that arrive later give `arrived_late` rows (their count in `missing`), so summed per producer,
`missing` rows minus `arrived_late` rows is what is still lost. Beyond the caps: a producer with more than
`MAX_RANGES` open gaps has its oldest gaps reported at once, before the grace (an out-of-order burst
then shows as `missing` + `arrived_late` rows); an event of a gap older than the last `MAX_REPORTED`
reported ranges is taken for a duplicate and reported nothing. Duplicates (retried batches) and seqs
already seen report nothing.

The Spark glue that runs it per producer in a streaming query is `audit.py`.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Seq ranges seen above next_expected kept per producer (3 longs each); more open gaps than this and the
# oldest are reported at once.
MAX_RANGES = 256
# Still-missing ranges of reported gaps remembered per producer for arrived_late rows (2 longs each).
MAX_REPORTED = 64

MISSING = "missing"
ARRIVED_LATE = "arrived_late"

@dataclass(frozen=True)
class SeenRange:
    """Seqs first..last (inclusive) all seen; the first of them arrived at processing time `since_ms`."""

    first: int
    last: int
    since_ms: int


@dataclass(frozen=True)
class ProducerState:
    """One producer's audit state (see the module docstring); `seen` and `reported` sorted and disjoint."""

    next_expected: int = 0
    seen: tuple[SeenRange, ...] = ()
    reported: tuple[tuple[int, int], ...] = ()

    @property
    def gap_since_ms(self) -> int | None:
        """When the current gap (below the first seen range) was first observed; None: no open gap."""
        return min((r.since_ms for r in self.seen), default=None)

    def timeout_ms(self, now_ms: int, grace_ms: int) -> int | None:
        """How long from `now_ms` until the oldest open gap's grace ends (at least 1 ms); None: no open gap."""
        since = self.gap_since_ms
        return None if since is None else max(1, since + grace_ms - now_ms)

    def to_row(self) -> tuple[int, bytes, bytes]:
        """The state as a value of `STATE_SCHEMA`."""
        seen = [v for r in self.seen for v in (r.first, r.last, r.since_ms)]
        reported = [v for pair in self.reported for v in pair]
        return (self.next_expected, struct.pack(f"<{len(seen)}q", *seen),
                struct.pack(f"<{len(reported)}q", *reported))

    @classmethod
    def from_row(cls, row: Sequence[Any] | None) -> ProducerState:
        """The state from a value of `STATE_SCHEMA` (None: a producer not seen before)."""
        if row is None:
            return cls()
        next_expected, seen, reported = row
        s = _unpack(seen)
        r = _unpack(reported)
        return cls(int(next_expected), tuple(SeenRange(*s[i:i + 3]) for i in range(0, len(s), 3)),
                   tuple((r[i], r[i + 1]) for i in range(0, len(r), 2)))


def _unpack(data: bytes | bytearray | None) -> tuple[int, ...]:
    return struct.unpack(f"<{len(data) // 8}q", data) if data else ()


@dataclass(frozen=True)
class GapReport:
    """One output row: seqs first..last of a producer, `missing` of them, reported at `detected_at_ms`."""

    first_seq: int
    last_seq: int
    missing: int
    status: str
    detected_at_ms: int


@dataclass
class _Merge:
    next_expected: int
    seen: list[SeenRange]
    reported: list[tuple[int, int]]
    now_ms: int
    rows: list[GapReport] = field(default_factory=list)

    def report_first_gap(self) -> None:
        """Report [next_expected, first seen - 1] missing and move past the first seen range."""
        head = self.seen.pop(0)
        first, last = self.next_expected, head.first - 1
        self.rows.append(GapReport(first, last, last - first + 1, MISSING, self.now_ms))
        self.reported.append((first, last))
        self.next_expected = head.last + 1


def _runs(sorted_seqs: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted distinct ints as maximal runs of consecutive values."""
    runs: list[tuple[int, int]] = []
    for s in sorted_seqs:
        if runs and s == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], s)
        else:
            runs.append((s, s))
    return runs


def _merge_ranges(seen: Sequence[SeenRange], new: Sequence[SeenRange]) -> list[SeenRange]:
    """The union of two range lists, overlapping and adjacent ranges joined (keeping the earliest since_ms)."""
    merged: list[SeenRange] = []
    for r in sorted([*seen, *new], key=lambda r: r.first):
        if merged and r.first <= merged[-1].last + 1:
            top = merged[-1]
            merged[-1] = SeenRange(top.first, max(top.last, r.last), min(top.since_ms, r.since_ms))
        else:
            merged.append(r)
    return merged


def _late_arrivals(reported: Sequence[tuple[int, int]], below: Sequence[int],
                   now_ms: int) -> tuple[list[tuple[int, int]], list[GapReport]]:
    """Match seqs below next_expected (sorted, distinct) to the reported gaps: arrived_late rows, what stays missing."""
    starts = [first for first, _ in reported]
    hits: dict[int, list[int]] = {}
    for s in below:
        i = bisect.bisect_right(starts, s) - 1
        if i >= 0 and s <= reported[i][1]:
            hits.setdefault(i, []).append(s)
    remaining: list[tuple[int, int]] = []
    rows: list[GapReport] = []
    for i, (first, last) in enumerate(reported):
        arrived = hits.get(i)
        if not arrived:
            remaining.append((first, last))
            continue
        start = first
        for a, b in _runs(arrived):
            rows.append(GapReport(a, b, b - a + 1, ARRIVED_LATE, now_ms))
            if a > start:
                remaining.append((start, a - 1))
            start = b + 1
        if start <= last:
            remaining.append((start, last))
    return remaining, rows


def merge(state: ProducerState, seqs: Iterable[int], now_ms: int, grace_ms: int, *, max_ranges: int = MAX_RANGES,
          max_reported: int = MAX_REPORTED) -> tuple[ProducerState, list[GapReport]]:
    """Fold one batch of a producer's seqs (any order, duplicates allowed) into its state at processing time
    `now_ms`; report gaps open for `grace_ms` or more, and late arrivals of reported ones.

    With no seqs (a timeout) it only reports the gaps whose grace has ended.
    """
    distinct = sorted({int(s) for s in seqs if s >= 0})
    split = bisect.bisect_left(distinct, state.next_expected)
    reported, rows = _late_arrivals(state.reported, distinct[:split], now_ms)
    fresh = [SeenRange(a, b, now_ms) for a, b in _runs(distinct[split:])]
    m = _Merge(state.next_expected, _merge_ranges(state.seen, fresh), reported, now_ms, rows)
    if m.seen and m.seen[0].first == m.next_expected:  # the gap below the first range is filled
        m.next_expected = m.seen.pop(0).last + 1
    # Gaps open since the earliest since_ms at or above them: the oldest gap is always the lowest.
    while m.seen and min(r.since_ms for r in m.seen) + grace_ms <= now_ms:
        m.report_first_gap()
    while len(m.seen) > max_ranges:
        m.report_first_gap()
    new_state = ProducerState(m.next_expected, tuple(m.seen), tuple(m.reported[-max_reported:] if max_reported else ()))
    return new_state, m.rows
