"""bench.rules' latency arithmetic: the update that first counts an event, and percentiles with missing events."""

from __future__ import annotations

import pytest

from bench.rules.latency import figures, first_counting, measured_figures

pytestmark = pytest.mark.unit


def test_an_event_is_counted_by_the_first_update_reaching_its_rank() -> None:
    created = {"k": [1000, 1000, 1200]}  # three events of one key, two sent in the same batch
    updates = {"k": [(1500, 1), (1400, 2), (1900, 2), (2100, 3)]}  # (Kafka timestamp, count), out of order
    found, missing = first_counting(created, updates, (0, 10_000))
    assert (sorted(found), missing) == ([(1000, 400), (1000, 400), (1200, 900)], [])


def test_events_outside_the_window_are_not_measured_and_uncounted_ones_are_missing() -> None:
    created = {"a": [100, 5000], "b": [5100]}
    updates = {"a": [(5300, 2)]}  # b never updated
    found, missing = first_counting(created, updates, (1000, 10_000))
    assert (found, missing) == ([(5000, 300)], [5100])


def test_a_missing_event_counts_as_later_than_any_found() -> None:
    f = figures([10] * 98 + [20], missing=1)
    assert (f["events"], f["p50_ms"], f["p99_ms"], f["max_ms"]) == (100, 10.0, None, None)
    g = figures([5, 1, 3], missing=0)
    assert (g["p50_ms"], g["p99_ms"], g["max_ms"]) == (3.0, 5.0, 5.0)


def test_a_long_window_reports_its_worst_slice_and_the_whole_p99() -> None:
    """One pause (a batch end) in a long window: the whole window's p99 gives it its weight, the worst slice shows
    it; more than 1 % of a slice missing makes it the worst."""
    found = [(t, 50) for t in range(0, 60_000, 10)]  # 6,000 events over 60 s, 50 ms each
    found[3000:3040] = [(t, 900) for t, _ in found[3000:3040]]  # 0.4 s of them held 900 ms at +30 s
    whole = measured_figures((found, []), (0, 60_000), 20_000)
    assert (whole["events"], whole["p99_ms"], whole["max_ms"]) == (6000, 50.0, 900.0)
    assert whole["worst_slice"] == {"seconds": 20.0, "starts_at_s": 20.0, "p99_ms": 900.0, "max_ms": 900.0}
    assert "worst_slice" not in measured_figures((found[:2000], []), (0, 20_000), 20_000)
    lost = measured_figures((found, list(range(45_000, 45_030))), (0, 60_000), 20_000)
    assert lost["worst_slice"]["starts_at_s"] == 40.0 and lost["worst_slice"]["p99_ms"] is None
