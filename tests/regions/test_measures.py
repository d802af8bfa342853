"""The region fault suite's time measures on recorded SDK counters: RTO (tests/regions/producers.py's recovery_s)
and failback (failback_s), with no stack."""

from __future__ import annotations

import pytest

from tests.regions.producers import Sample, failback_s, recovery_s

pytestmark = pytest.mark.unit


def _samples(*rows: tuple[float, int, int, int]) -> list[Sample]:
    return [Sample(*row) for row in rows]


def test_recovery_is_the_first_acknowledgement_after_the_failover() -> None:
    samples = _samples((9.9, 100, 0, 0), (10.1, 120, 0, 0),  # answers a gave just before it died, seen late
                       (15.0, 120, 0, 0), (21.0, 120, 1, 0),  # moved to b, nothing acknowledged there yet
                       (21.5, 150, 1, 0))
    assert recovery_s(samples, 10.0) == pytest.approx(11.5)


def test_no_recovery_without_a_failover_or_without_a_new_acknowledgement() -> None:
    assert recovery_s(_samples((9.0, 10, 0, 0), (12.0, 40, 0, 0)), 10.0) is None  # acknowledged, not moved
    assert recovery_s(_samples((9.0, 10, 0, 0), (22.0, 10, 1, 0)), 10.0) is None  # moved, nothing acknowledged
    assert recovery_s(_samples((9.0, 10, 1, 0), (12.0, 40, 1, 0)), 10.0) is None  # an earlier failover


def test_failback_counts_only_failbacks_after_the_restart() -> None:
    samples = _samples((5.0, 0, 1, 1), (30.0, 0, 2, 1), (55.0, 0, 2, 2))
    assert failback_s(samples, 20.0) == pytest.approx(35.0)
    assert failback_s(samples[:2], 20.0) is None
