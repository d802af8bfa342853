"""Unit tests of the curve script's reading of the gateway's Prometheus counters."""

from __future__ import annotations

import pytest

from loadtest.curve import stage_means

pytestmark = pytest.mark.unit
G = "headwater_gateway_"


def test_stage_means_are_per_request_deltas_between_two_scrapes() -> None:
    before = {f'{G}stage_seconds_sum{{stage="commit"}}': 1.0, f'{G}stage_seconds_count{{stage="commit"}}': 10.0}
    after = {f'{G}stage_seconds_sum{{stage="commit"}}': 3.0, f'{G}stage_seconds_count{{stage="commit"}}': 20.0,
             f"{G}request_seconds_sum": 5.0, f"{G}request_seconds_count": 50.0,
             f'{G}commit_seconds_sum{{outcome="committed"}}': 0.04,
             f'{G}commit_seconds_count{{outcome="committed"}}': 4.0,
             f"{G}commit_records_sum": 400.0, f"{G}commit_records_count": 4.0}
    assert stage_means(before, after) == {"commit_ms": 200.0, "request_ms": 100.0, "transaction_ms": 10.0,
                                          "records_per_transaction": 100.0}


def test_no_requests_no_means() -> None:
    same = {f"{G}request_seconds_sum": 5.0, f"{G}request_seconds_count": 50.0}
    assert stage_means(same, same) == {}
