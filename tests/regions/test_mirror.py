"""Both regions mirror each other: events sent through one region's gateway with the Python SDK are read in the
other as `<region>.headwater.events` (read_committed), decoded with that region's registry (the follower resolves
ids through the mirrored `a._schemas`); an aborted transaction is never copied; the mirror lag is printed."""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

import headwater
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from common.avro_frame import WriterSchemas
from common.kafka_read import read_to_end
from stack.regions import Regions
from tests.support.kafka import end_offsets

pytestmark = pytest.mark.integration

EVENTS = 60


def _metric(i: int) -> dict[str, Any]:
    return {"host": f"web-{i % 3}", "service": "shop", "metric": "orders", "kind": "counter", "value": float(i),
            "unit": "1"}


def _send(gateway_url: str, write_key: str) -> str:
    """EVENTS events through `gateway_url`, all acknowledged; the SDK's producer id."""
    with headwater.Client(gateway_url, write_key) as client:
        for i in range(EVENTS):
            client.track("server_metric", _metric(i))
        assert client.flush(60), "the SDK did not deliver every event"
        return client.producer_id


def _mirrored(bootstrap: str, topic: str, start: dict[int, int], producer_id: str, registry_url: str, *,
              timeout_s: float = 60.0) -> tuple[dict[int, str], list[float]]:
    """seq -> event_id of `producer_id`'s records in `topic` (read_committed, from `start`), each decoded with the
    registry at `registry_url`, and the lag of each (seen here - its CreateTime, kept by MirrorMaker 2), seconds."""
    schemas = WriterSchemas(registry_url)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"regions-test-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, o) for p, o in start.items()])
    seen: dict[int, str] = {}
    lags: list[float] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < EVENTS and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            value = None if msg is None or msg.error() else msg.value()
            if msg is None or value is None:
                continue
            record = schemas.decode(value)
            if str(record["producer_id"]) != producer_id:
                continue
            seen[int(record["seq"])] = str(record["event_id"])
            lags.append(max(0.0, time.time() - msg.timestamp()[1] / 1000))
    finally:
        consumer.close()
    return seen, lags


def _mirror_once(regions: Regions, source: str, target: str, write_key: str) -> None:
    src, dst = regions.stack(source).cfg, regions.stack(target).cfg
    remote = f"{source}.headwater.events"
    start = end_offsets(dst.bootstrap, remote)
    producer_id = _send(src.gateway_url, write_key)
    seen, lags = _mirrored(dst.bootstrap, remote, start, producer_id, dst.registry_url)
    assert len(seen) == EVENTS, f"{source}->{target}: {len(seen)} of {EVENTS} acknowledged events mirrored in 60 s"
    assert len(set(seen.values())) == EVENTS
    lags.sort()
    print(f"\nmirror {source}->{target}: {len(seen)} events, lag p50 {statistics.median(lags):.2f} s, "
          f"p95 {lags[int(len(lags) * 0.95) - 1]:.2f} s, max {lags[-1]:.2f} s (commit in {source} -> readable "
          f"in {target} as {remote})")
    assert lags[-1] < 30, f"mirror lag {lags[-1]:.1f} s"


def test_events_from_a_are_read_and_decoded_in_b(regions: tuple[Regions, dict[str, str]]) -> None:
    """Region a's events in b, decoded by b's registry: it serves a's ids from the mirrored `a._schemas`."""
    profile, env = regions
    _mirror_once(profile, "a", "b", env["HEADWATER_WRITE_KEY"])


def test_events_from_b_are_read_and_decoded_in_a(regions: tuple[Regions, dict[str, str]]) -> None:
    """The reverse flow: b's gateways write with ids of the primary's registry, which a's registry serves."""
    profile, env = regions
    _mirror_once(profile, "b", "a", env["HEADWATER_WRITE_KEY"])


def test_an_aborted_transaction_is_not_mirrored(regions: tuple[Regions, dict[str, str]]) -> None:
    """MM2 reads read_committed: a record of an aborted transaction in a never reaches b, even read uncommitted,
    while the committed record written after it on the same partition does."""
    profile, _ = regions
    a, b = profile.stack("a").cfg, profile.stack("b").cfg
    run = uuid.uuid4().hex
    aborted, committed = f"regions-aborted-{run}".encode(), f"regions-committed-{run}".encode()
    start = end_offsets(b.bootstrap, "a.headwater.events")
    producer = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": f"regions-test-{run}"})
    producer.init_transactions(30)
    for value, finish in ((aborted, producer.abort_transaction), (committed, producer.commit_transaction)):
        producer.begin_transaction()
        producer.produce("headwater.events", value=value, partition=0)
        producer.flush(30)
        finish(30)
    deadline = time.monotonic() + 60
    values: list[bytes] = []
    while committed not in values and time.monotonic() < deadline:
        values = [m.value() or b"" for m in read_to_end(b.bootstrap, "a.headwater.events", start=start,
                                                        committed=False, timeout_s=30)]
        time.sleep(0.5)
    assert committed in values, "the committed record was not mirrored within 60 s"
    assert aborted not in values, "MirrorMaker 2 copied a record of an aborted transaction"


def test_the_follower_region_has_no_schemas_topic_of_its_own(regions: tuple[Regions, dict[str, str]]) -> None:
    """b's registry was started on `a._schemas` (never with write intent on its own `_schemas`, which b lacks),
    knows the primary's primary URL, and the catalog was registered in a only."""
    profile, env = regions
    b = profile.stack("b")
    b_env = b.endpoints()
    assert b_env["SCHEMAS_TOPIC"] == "a._schemas"
    assert b_env["REGISTRY_PRIMARY_URL"] == profile.stack("a").cfg.registry_url
    assert env["SCHEMAS_TOPIC_B"] == "a._schemas" and env["SCHEMAS_TOPIC_A"] == "_schemas"
    topics = set(AdminClient({"bootstrap.servers": b.cfg.bootstrap}).list_topics(timeout=10).topics)
    assert "_schemas" not in topics and "a._schemas" in topics
    assert b.schema_ids() == profile.stack("a").schema_ids()
    assert env["HEADWATER_ENDPOINTS"].split(",") == [profile.stack(n).cfg.gateway_url for n in ("a", "b")]
