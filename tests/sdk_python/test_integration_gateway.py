"""The SDK against the real gateway, registry and Kafka: every (producer_id, seq) arrives, outages included."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import headwater
import pytest
from hwconformance.tcpproxy import CuttableProxy

from tests.sdk_events import EVENTS_TOPIC, arrived
from tests.support.events import page_view_properties
from tests.support.kafka import end_offsets

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gateway(stack_env: dict[str, str]) -> dict[str, str]:
    """The real stack's endpoints (started by the session fixture); a stack without them fails, never skips."""
    required = ("GATEWAY_URL", "REGISTRY_URL", "KAFKA_BOOTSTRAP", "HEADWATER_WRITE_KEY")
    missing = [k for k in required if k not in stack_env]
    assert not missing, f"the test stack did not provide {missing}"
    return stack_env


def page_view(i: int, run: str) -> dict[str, Any]:
    return page_view_properties(i, run, user_agent="headwater-sdk-test", load_time_ms=12.5)


def test_ten_thousand_events_arrive_exactly_once_per_seq(gateway: dict[str, str], tmp_path: Path) -> None:
    run = f"run-{uuid.uuid4()}"
    start = end_offsets(gateway["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    errors: list[Exception] = []
    with headwater.Client(gateway["GATEWAY_URL"], gateway["HEADWATER_WRITE_KEY"], spool_dir=str(tmp_path),
                          linger_s=0.01, max_queue_events=20_000, on_error=errors.append) as client:
        for i in range(10_000):
            client.track("page_view", page_view(i, run))
        assert client.flush(300), client.metrics()
        metrics = client.metrics()
        producer = client.producer_id
    assert metrics.acknowledged == 10_000 and metrics.dropped == {} and metrics.rejected == 0, errors[:3]
    by_seq = arrived(gateway, producer, 10_000, start)
    assert sorted(by_seq) == list(range(10_000))
    assert all(len(ids) == 1 for ids in by_seq.values())  # one event id per seq: retries are true duplicates


def test_gateway_down_for_a_while_and_back(gateway: dict[str, str], tmp_path: Path) -> None:
    target = urlsplit(gateway["GATEWAY_URL"])
    proxy = CuttableProxy(target.hostname or "127.0.0.1", target.port or 80)
    run = f"run-{uuid.uuid4()}"
    start = end_offsets(gateway["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    try:
        client = headwater.Client(proxy.url, gateway["HEADWATER_WRITE_KEY"], spool_dir=str(tmp_path),
                                  linger_s=0.01, retry_base_s=0.05, retry_max_s=0.5, retry_deadline_s=2,
                                  on_error=lambda e: None)
        for i in range(500):
            client.track("page_view", page_view(i, run))
        proxy.cut()
        for i in range(500, 1_500):
            client.track("page_view", page_view(i, run))
        assert not client.flush(5)  # the gateway is unreachable: nothing more is acknowledged
        assert client.metrics().retries > 0
        proxy.restore()
        assert client.flush(120), client.metrics()
        producer = client.producer_id
        assert client.close(30)
    finally:
        proxy.cut()
    assert client.metrics().dropped == {}
    by_seq = arrived(gateway, producer, 1_500, start)
    assert sorted(by_seq) == list(range(1_500))


def test_avro_fast_path_reaches_kafka(gateway: dict[str, str]) -> None:
    run = f"run-{uuid.uuid4()}"
    start = end_offsets(gateway["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    with headwater.Client(gateway["GATEWAY_URL"], gateway["HEADWATER_WRITE_KEY"], linger_s=0.01,
                          wire_format="avro", registry_url=gateway["REGISTRY_URL"]) as client:
        for i in range(200):
            client.track("page_view", page_view(i, run))
        assert client.flush(60), client.metrics()
        producer = client.producer_id
        assert client.metrics().acknowledged == 200
    assert sorted(arrived(gateway, producer, 200, start)) == list(range(200))


def test_real_refusals_and_rejections_make_close_false_without_retries(gateway: dict[str, str]) -> None:
    """401 (bad key) and 404 (mistyped endpoint) are refused at once; an unknown type is rejected per event."""
    cases = [  # (endpoint, write key, event type, expected code)
        (gateway["GATEWAY_URL"], "not-a-key", "page_view", "invalid_write_key"),
        (gateway["GATEWAY_URL"].rstrip("/") + "/mistyped", gateway["HEADWATER_WRITE_KEY"], "page_view", None),
        (gateway["GATEWAY_URL"], gateway["HEADWATER_WRITE_KEY"], "no_such_event_type", "unknown_event_type"),
    ]
    for endpoint, key, event_type, code in cases:
        errors: list[Exception] = []
        client = headwater.Client(endpoint, key, linger_s=0.01, retry_deadline_s=60, on_error=errors.append)
        for i in range(3):
            client.track(event_type, page_view(i, "refusals"))
        started = time.monotonic()
        assert client.close(60) is False, (endpoint, client.metrics())
        m = client.metrics()
        assert time.monotonic() - started < 30 and m.retries == 0 and m.acknowledged == 0, m  # never retried
        if event_type == "no_such_event_type":
            assert m.rejected == 3 and {e.code for e in errors if isinstance(e, headwater.EventRejectedError)} == {code}
        else:
            refused = [e for e in errors if isinstance(e, headwater.BatchRejectedError)]
            assert refused and m.dropped_total == 3, (errors, m)
            assert code is None or refused[0].code == code
