"""Reports gaps in each producer's seq as a streaming output, so loss is observed rather than assumed.

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

In Spark (`loss_audit_stream`): `applyInPandasWithState` grouped by producer_id, with a processing-time
timeout set to the moment the oldest open gap's grace ends, so a producer that goes quiet still has its
last gap reported (timeouts are checked at each trigger, so after at most grace + one file trigger; with
`--available-now` or a 0 s file trigger only in batches with data, see `idle_batch_settings`).
It reads every decoded event, not the deduplicated ones: an event later than the watermark is still an
event that arrived. A producer's state (a few longs once its gaps are closed) is kept for as long as the
checkpoint lives; a job started after a producer's first events (`startingOffsets=latest`, or after Kafka
retention deleted them) reports the seqs it never saw as missing, like the batch audit does.
"""

from __future__ import annotations

import bisect
import functools
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from spark_pipeline.config import duration_ms
from spark_pipeline.session import NO_DATA_BATCHES

# Seq ranges seen above next_expected kept per producer (3 longs each); more open gaps than this and the
# oldest are reported at once.
MAX_RANGES = 256
# Still-missing ranges of reported gaps remembered per producer for arrived_late rows (2 longs each).
MAX_REPORTED = 64

MISSING = "missing"
ARRIVED_LATE = "arrived_late"

# The ranges as little-endian int64s (first, last, since_ms / first, last): pyspark 4.3.0's Python worker
# fails on any array in applyInPandasWithState's state schema (KeyError 'elementType' parsing it).
STATE_SCHEMA = "next_expected long, seen binary, reported binary"
# What the pandas function returns; `loss_audit_stream` turns detected_at_ms into the timestamp and the date.
_UDF_OUTPUT_SCHEMA = ("producer_id string, first_seq long, last_seq long, missing long, status string, "
                      "detected_at_ms long")


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


class GroupStateLike(Protocol):
    """The part of pyspark's GroupState that `apply_group` uses (a fake in unit tests)."""

    @property
    def getOption(self) -> tuple[Any, ...] | None: ...

    def getCurrentProcessingTimeMs(self) -> int: ...

    def update(self, newValue: tuple[Any, ...]) -> None: ...

    def setTimeoutDuration(self, durationMs: int) -> None: ...


def apply_group(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupStateLike,
                grace_ms: int) -> Iterator[pd.DataFrame]:
    """`applyInPandasWithState`'s function: one producer's new seqs (none on a timeout) -> report rows."""
    producer_id = str(key[0])
    seqs: list[int] = []
    for frame in frames:
        seqs.extend(int(s) for s in frame["seq"].dropna())
    now = state.getCurrentProcessingTimeMs()
    new_state, rows = merge(ProducerState.from_row(state.getOption), seqs, now, grace_ms)
    state.update(new_state.to_row())
    timeout = new_state.timeout_ms(now, grace_ms)
    if timeout is not None:  # reset at every call: without this, no timeout
        state.setTimeoutDuration(timeout)
    if rows:
        yield pd.DataFrame({
            "producer_id": [producer_id] * len(rows),
            "first_seq": pd.Series([r.first_seq for r in rows], dtype="int64"),
            "last_seq": pd.Series([r.last_seq for r in rows], dtype="int64"),
            "missing": pd.Series([r.missing for r in rows], dtype="int64"),
            "status": [r.status for r in rows],
            "detected_at_ms": pd.Series([r.detected_at_ms for r in rows], dtype="int64"),
        })


def loss_audit_stream(events: DataFrame, grace_ms: int) -> DataFrame:
    """The streaming loss audit over decoded events (streaming or not): one row per reported gap or late part.

    Columns: producer_id, first_seq, last_seq, missing, status ('missing' | 'arrived_late'), detected_at
    (the processing time of the batch that reported it) and date (of detected_at). Append mode.
    """
    seqs = events.select("producer_id", "seq").where(F.col("producer_id").isNotNull() & F.col("seq").isNotNull())
    reports = seqs.groupBy("producer_id").applyInPandasWithState(
        functools.partial(apply_group, grace_ms=grace_ms), _UDF_OUTPUT_SCHEMA, STATE_SCHEMA, "append",
        GroupStateTimeout.ProcessingTimeTimeout)
    detected = F.timestamp_millis(F.col("detected_at_ms"))
    return reports.select("producer_id", "first_seq", "last_seq", "missing", "status",
                          detected.alias("detected_at"), F.to_date(detected).alias("date"))


def idle_batch_settings(trigger: str | None) -> dict[str, str]:
    """The loss audit query's session settings (`session.query_conf`): no-data batches only on a positive
    trigger (None: availableNow).

    A processing-time timeout makes Spark run a batch at every trigger even without new data; that is what
    reports a quiet producer's gap. Under availableNow it never ends (Spark 4.3 keeps running no-data
    batches: the query never stops), and on a 0 s trigger it is a busy loop; there, timeouts fire in the
    next batch with data.
    """
    enabled = trigger is not None and duration_ms(trigger) > 0
    return {NO_DATA_BATCHES: str(enabled).lower()}


def net_loss(reports: DataFrame) -> DataFrame:
    """Per producer from the audit's rows: seqs reported missing, of those arrived late, and still missing."""
    late = F.col("status") == ARRIVED_LATE
    return (reports.groupBy("producer_id")
            .agg(F.sum(F.when(~late, F.col("missing")).otherwise(0)).alias("reported_missing"),
                 F.sum(F.when(late, F.col("missing")).otherwise(0)).alias("arrived_late"),
                 F.max("detected_at").alias("last_detected_at"))
            .withColumn("still_missing", F.col("reported_missing") - F.col("arrived_late"))
            .select("producer_id", "reported_missing", "arrived_late", "still_missing", "last_detected_at"))
