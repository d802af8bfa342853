"""bench.rules' latency arithmetic: the update that first counts an event, and percentiles with missing events."""

from __future__ import annotations

import pytest

from bench.rules.latency import figures, first_counting

pytestmark = pytest.mark.unit


def test_an_event_is_counted_by_the_first_update_reaching_its_rank() -> None:
    created = {"k": [1000, 1000, 1200]}  # three events of one key, two sent in the same batch
    updates = {"k": [(1500, 1), (1400, 2), (1900, 2), (2100, 3)]}  # (Kafka timestamp, count), out of order
    latencies, missing = first_counting(created, updates, (0, 10_000))
    assert (sorted(latencies), missing) == ([400, 400, 900], 0)


def test_events_outside_the_window_are_not_measured_and_uncounted_ones_are_missing() -> None:
    created = {"a": [100, 5000], "b": [5100]}
    updates = {"a": [(5300, 2)]}  # b never updated
    latencies, missing = first_counting(created, updates, (1000, 10_000))
    assert (latencies, missing) == ([300], 1)


def test_a_missing_event_counts_as_later_than_any_found() -> None:
    f = figures([10] * 98 + [20], missing=1)
    assert (f["events"], f["p50_ms"], f["p99_ms"], f["max_ms"]) == (100, 10.0, None, None)
    g = figures([5, 1, 3], missing=0)
    assert (g["p50_ms"], g["p99_ms"], g["max_ms"]) == (3.0, 5.0, 5.0)
