"""Unit tests of the streaming loss audit's state merge (pure Python, no Spark) and its grace setting."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_pipeline.audit import apply_group
from spark_pipeline.config import ConfigError, PipelineConfig, duration_ms
from spark_pipeline.gaps import ARRIVED_LATE, MISSING, GapReport, ProducerState, SeenRange, merge

pytestmark = pytest.mark.unit

GRACE = 30_000


def fold(batches: Iterable[tuple[int, list[int]]], grace_ms: int = GRACE, state: ProducerState | None = None,
         **caps: int) -> tuple[ProducerState, list[GapReport]]:
    """Merge (now_ms, seqs) batches in order; the final state and every row reported."""
    state = state or ProducerState()
    rows: list[GapReport] = []
    for now, seqs in batches:
        state, new = merge(state, seqs, now, grace_ms, **caps)
        rows += new
    return state, rows


def spans(rows: list[GapReport]) -> list[tuple[int, int, int, str]]:
    return [(r.first_seq, r.last_seq, r.missing, r.status) for r in rows]


def test_in_order_batches_report_nothing_and_keep_no_ranges() -> None:
    state, rows = fold([(0, [0, 1, 2]), (1000, [3, 4]), (2000, [])])
    assert state == ProducerState(next_expected=5) and rows == []
    assert state.timeout_ms(2000, GRACE) is None


def test_out_of_order_within_the_grace_reports_nothing() -> None:
    state, rows = merge(ProducerState(), [3, 1, 4, 0], 0, GRACE)
    assert rows == [] and state == ProducerState(2, (SeenRange(3, 4, 0),))
    assert state.gap_since_ms == 0 and state.timeout_ms(10_000, GRACE) == 20_000
    state, rows = merge(state, [2], 10_000, GRACE)
    assert rows == [] and state == ProducerState(5)


def test_duplicates_and_seqs_already_seen_report_nothing() -> None:
    state, rows = fold([(0, [0, 0, 1, 1, 2, 5, 5]), (1000, [1, 2, 5, 0]), (2000, [3, 4, 4, 2])])
    assert rows == [] and state == ProducerState(6)


def test_a_gap_is_reported_once_its_grace_has_passed_not_before() -> None:
    state, rows = merge(ProducerState(), [0, 5], 0, GRACE)
    # A higher seq later does not make the gap younger.
    state, rows = fold([(20_000, [6]), (29_999, [])], state=state)
    assert rows == [] and state.gap_since_ms == 0 and state.timeout_ms(29_999, GRACE) == 1
    state, rows = merge(state, [], 30_000, GRACE)  # the processing-time timeout
    assert rows == [GapReport(1, 4, 4, MISSING, 30_000)]
    assert state == ProducerState(7, (), ((1, 4),)) and state.timeout_ms(30_000, GRACE) is None
    state, rows = merge(state, [], 90_000, GRACE)
    assert rows == []  # reported once


def test_each_gap_waits_its_own_grace_from_when_it_was_first_observed() -> None:
    state, rows = fold([(0, [0, 5]), (20_000, [10]), (30_000, [])])
    assert spans(rows) == [(1, 4, 4, MISSING)]
    assert state.timeout_ms(30_000, GRACE) == 20_000
    state, rows = merge(state, [], 50_000, GRACE)
    assert spans(rows) == [(6, 9, 4, MISSING)]
    # A gap split by a later arrival is as old as the seq above it that first revealed it.
    _, rows = fold([(0, [0, 10]), (20_000, [5]), (30_000, [])])
    assert spans(rows) == [(1, 4, 4, MISSING), (6, 9, 4, MISSING)]


def test_grace_zero_reports_at_once() -> None:
    state, rows = merge(ProducerState(), [0, 1, 4, 7, 8], 5, 0)
    assert rows == [GapReport(2, 3, 2, MISSING, 5), GapReport(5, 6, 2, MISSING, 5)]
    assert state == ProducerState(9, (), ((2, 3), (5, 6)))


def test_a_new_producer_starting_above_zero_has_its_prefix_reported() -> None:
    _, rows = merge(ProducerState(), [3, 4], 0, 0)
    assert spans(rows) == [(0, 2, 3, MISSING)]


def test_events_of_a_reported_gap_arriving_later_are_reported_arrived_late_once() -> None:
    state, rows = merge(ProducerState(), [0, 6], 0, 0)
    assert spans(rows) == [(1, 5, 5, MISSING)]
    state, rows = merge(state, [3, 2, 2], 100, 0)
    assert rows == [GapReport(2, 3, 2, ARRIVED_LATE, 100)] and state.reported == ((1, 1), (4, 5))
    state, rows = merge(state, [2, 3, 0, 6], 200, 0)
    assert rows == []  # duplicates of late and of in-order events
    state, rows = merge(state, [5, 1, 7], 300, 0)
    assert spans(rows) == [(1, 1, 1, ARRIVED_LATE), (5, 5, 1, ARRIVED_LATE)]
    assert state == ProducerState(8, (), ((4, 4),))


def test_the_ranges_cap_reports_the_oldest_gaps_at_once_and_the_reported_cap_forgets_the_oldest() -> None:
    state, rows = merge(ProducerState(), [0, 2, 4, 6, 8], 0, GRACE, max_ranges=2, max_reported=1)
    assert spans(rows) == [(1, 1, 1, MISSING), (3, 3, 1, MISSING)]  # before the grace
    assert [(r.first, r.last) for r in state.seen] == [(6, 6), (8, 8)] and state.next_expected == 5
    assert state.reported == ((3, 3),)
    state, rows = merge(state, [1, 3], 10, GRACE, max_ranges=2, max_reported=1)
    assert spans(rows) == [(3, 3, 1, ARRIVED_LATE)]  # seq 1's gap was forgotten: taken for a duplicate
    state, rows = merge(state, [5, 7], 20, GRACE, max_ranges=2, max_reported=1)
    assert rows == [] and state == ProducerState(9, (), ())


def test_state_round_trips_through_the_spark_state_row() -> None:
    state = ProducerState(7, (SeenRange(9, 12, 5), SeenRange(20, 20, 3)), ((1, 2), (4, 4)))
    assert ProducerState.from_row(state.to_row()) == state
    assert ProducerState.from_row(None) == ProducerState()
    assert ProducerState.from_row((3, b"", bytearray())) == ProducerState(3)
    assert len(state.to_row()[1]) == 2 * 3 * 8


class FakeGroupState:
    """The calls apply_group makes on pyspark's GroupState."""

    def __init__(self, value: tuple[Any, ...] | None, now_ms: int) -> None:
        self.value, self.now_ms = value, now_ms
        self.timeout: int | None = None

    @property
    def getOption(self) -> tuple[Any, ...] | None:
        return self.value

    def getCurrentProcessingTimeMs(self) -> int:
        return self.now_ms

    def update(self, newValue: tuple[Any, ...]) -> None:
        self.value = newValue

    def setTimeoutDuration(self, durationMs: int) -> None:
        self.timeout = durationMs


def run_group(state: FakeGroupState, *frames: list[int]) -> list[pd.DataFrame]:
    data: Iterator[pd.DataFrame] = iter(pd.DataFrame({"producer_id": ["p"] * len(f), "seq": f}) for f in frames)
    return list(apply_group(("p",), data, state, GRACE))


def test_apply_group_keeps_state_sets_the_timeout_and_reports_on_the_timeout() -> None:
    state = FakeGroupState(None, 1_000)
    assert run_group(state, [0, 1], [5, 3]) == []
    assert ProducerState.from_row(state.value) == ProducerState(2, (SeenRange(3, 3, 1_000), SeenRange(5, 5, 1_000)))
    assert state.timeout == GRACE
    state.now_ms, state.timeout = 31_001, None
    (out,) = run_group(state)  # timed out: no data
    assert list(out.columns) == ["producer_id", "first_seq", "last_seq", "missing", "status", "detected_at_ms"]
    assert out.to_dict("records") == [
        {"producer_id": "p", "first_seq": 2, "last_seq": 2, "missing": 1, "status": MISSING, "detected_at_ms": 31_001},
        {"producer_id": "p", "first_seq": 4, "last_seq": 4, "missing": 1, "status": MISSING, "detected_at_ms": 31_001}]
    assert str(out["first_seq"].dtype) == "int64"
    assert state.timeout is None  # nothing open: no timeout


def expand(rows: Iterable[GapReport], status: str) -> Counter[int]:
    return Counter(s for r in rows if r.status == status for s in range(r.first_seq, r.last_seq + 1))


Case = tuple[int, set[int], list[list[int]]]


@st.composite
def deliveries(draw: st.DrawFn, max_seq: int = 200) -> Case:
    """(n, lost seqs, batches): seqs 0..n-1 minus the lost ones (never the last), with duplicates, in any
    order, cut into batches."""
    n = draw(st.integers(1, max_seq))
    lost = draw(st.sets(st.integers(0, n - 2))) if n > 1 else set()
    delivered = [s for s in range(n) if s not in lost]
    sent = draw(st.permutations(delivered + draw(st.lists(st.sampled_from(delivered), max_size=30))))
    cuts = sorted(draw(st.lists(st.integers(0, len(sent)), max_size=12)))
    bounds = [0, *cuts, len(sent)]
    return n, lost, [sent[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(deliveries())
def test_with_grace_zero_missing_minus_arrived_late_is_the_true_loss(case: Case) -> None:
    n, lost, batches = case
    state, rows = fold([(t * 1000, b) for t, b in enumerate(batches)], grace_ms=0, max_ranges=10_000,
                       max_reported=10_000)
    missing, late = expand(rows, MISSING), expand(rows, ARRIVED_LATE)
    assert all(c == 1 for c in missing.values()) and all(c == 1 for c in late.values())  # each seq at most once
    assert set(late) <= set(missing) and set(missing) - set(late) == lost
    reported = sum(r.missing for r in rows if r.status == MISSING)
    assert reported - sum(r.missing for r in rows if r.status == ARRIVED_LATE) == len(lost)
    assert state.next_expected == n and state.seen == ()


@settings(max_examples=200, deadline=None)
@given(deliveries(), st.integers(1, 4), st.integers(0, 3))
def test_state_stays_within_its_caps(case: Case, max_ranges: int,
                                     max_reported: int) -> None:
    _, _, batches = case
    state = ProducerState()
    delivered: set[int] = set()
    for t, batch in enumerate(batches):
        state, rows = merge(state, batch, t, GRACE, max_ranges=max_ranges, max_reported=max_reported)
        assert len(state.seen) <= max_ranges and len(state.reported) <= max_reported
        assert not set(expand(rows, MISSING)) & delivered  # never reports an event it has seen
        delivered |= set(batch)


@settings(max_examples=100, deadline=None)
@given(deliveries())
def test_nothing_is_reported_when_every_seq_arrives_within_the_grace(case: Case) -> None:
    n, _, batches = case
    everything = [*batches, list(range(n))]  # whatever was lost arrives in a last batch, still within the grace
    state, rows = fold([(t, b) for t, b in enumerate(everything)])
    assert rows == [] and state == ProducerState(n)


def test_loss_grace_setting_defaults_to_the_lateness_and_is_validated() -> None:
    assert PipelineConfig.from_env({}).loss_grace_ms == 30_000
    assert PipelineConfig.from_env({"HEADWATER_LATENESS": "2 minutes"}).loss_grace_ms == 120_000
    assert PipelineConfig.from_env({"HEADWATER_LOSS_GRACE": "0 seconds"}).loss_grace_ms == 0
    assert PipelineConfig(lateness="1 hour").loss_grace_ms == 3_600_000
    assert PipelineConfig(loss_grace="5 seconds").loss_grace_ms == 5_000
    assert (duration_ms("1 minute"), duration_ms("10 seconds")) == (60_000, 10_000)
    with pytest.raises(ConfigError, match="HEADWATER_LOSS_GRACE"):
        PipelineConfig.from_env({"HEADWATER_LOSS_GRACE": "soon"})
