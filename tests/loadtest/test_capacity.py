"""Unit tests of the capacity model's arithmetic and of how it reads the measured curve."""

from __future__ import annotations

import pytest

from loadtest.capacity import (
    FALLBACK_UTILIZATION,
    MAX_PLANNED_UTILIZATION,
    Assumptions,
    Measured,
    events_per_core,
    latency_bounded_utilization,
    plan,
)

pytestmark = pytest.mark.unit
MEASURED = Measured(events_per_core_s=10_000, utilization=0.5, bytes_per_connection=8192, mean_event_bytes=1500)


def test_hundred_thousand_nodes_forty_events_every_ten_seconds() -> None:
    p = plan(100_000, 40, 10, MEASURED, Assumptions())
    assert p.events_per_s == 400_000 and p.batches_per_s == 10_000
    assert p.gateway_cores == 80            # 400,000 / (10,000 x 0.5)
    assert p.instances == 21                # 80 / 4 = 20 serving + 1 spare
    assert p.nodes_per_core == 1250         # 5,000 events/s per core / 4 events/s per node
    assert p.connections_per_instance == 5000
    assert p.connection_mib_per_instance == pytest.approx(5000 * 8192 / 2**20)
    assert p.mb_per_s == 600
    assert (p.partitions_by_write, p.partitions_by_read) == (60, 20)
    assert p.partitions == 60               # already a multiple of 3 brokers


def test_rounding_up_everywhere() -> None:
    p = plan(1001, 1, 1, MEASURED, Assumptions(cores_per_instance=2, spare_instances=0, brokers=4))
    assert p.gateway_cores == 1 and p.instances == 1
    assert p.partitions == 4  # one partition needed, rounded up to the brokers
    q = plan(5001, 1, 1, MEASURED, Assumptions(cores_per_instance=2, spare_instances=0))
    assert q.gateway_cores == 2 and q.instances == 1


@pytest.mark.parametrize("bad", [
    {"nodes": 0}, {"events_per_batch": 0}, {"interval_s": 0.0},
])
def test_rejects_an_empty_fleet(bad: dict[str, float]) -> None:
    args = {"nodes": 10, "events_per_batch": 40, "interval_s": 10.0, **bad}
    with pytest.raises(ValueError, match="positive"):
        plan(int(args["nodes"]), int(args["events_per_batch"]), args["interval_s"], MEASURED, Assumptions())


def test_rejects_impossible_measurements() -> None:
    with pytest.raises(ValueError, match="utilization"):
        plan(10, 40, 10, Measured(10_000, 0.0, 1, 1), Assumptions())


def _pt(eps: float, cores: float, per_core: float, p99: float) -> dict[str, float]:
    return {"events_per_s": eps, "gateway_cores": cores, "events_per_core_s": per_core, "post_p99_ms": p99}


def test_events_per_core_is_the_median_of_busy_steps() -> None:
    points = [_pt(100, 0.01, 99_999, 10), _pt(1000, 0.1, 9000, 20), _pt(2000, 0.2, 10_000, 40),
              _pt(3000, 0.3, 11_000, 300)]
    assert events_per_core(points) == 10_000
    with pytest.raises(ValueError, match="no curve point"):
        events_per_core([_pt(1, 0.0, 0, 1)])


def test_utilization_is_bounded_by_the_latency_target() -> None:
    points = [_pt(1000, 0.1, 0, 20), _pt(2000, 0.35, 0, 90), _pt(3000, 0.6, 0, 250)]
    assert latency_bounded_utilization(points, 100) == 0.35
    assert latency_bounded_utilization(points, 1000) == 0.6
    assert latency_bounded_utilization([_pt(1, 0.9, 0, 50)], 100) == MAX_PLANNED_UTILIZATION
    assert latency_bounded_utilization([_pt(1, 0.9, 0, 500)], 100) == FALLBACK_UTILIZATION
