"""Events through one region's gateway (the Python SDK), read back in the other region as
`<region>.headwater.events` (read_committed) and decoded with that region's registry; the mirror lag measured
(shared by tests/regions/ and a later region fault suite)."""

from __future__ import annotations

import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import headwater
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from common.avro_frame import WriterSchemas
from stack.regions import Regions
from tests.support.kafka import end_offsets
from tests.support.wait import wait_for

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


def mirror_once(regions: Regions, source: str, target: str, write_key: str) -> None:
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
    print(f"MirrorMaker 2: {rss_mb(regions.mirror.process.pid()):.0f} MB resident")
    assert lags[-1] < 30, f"mirror lag {lags[-1]:.1f} s"


def rss_mb(pid: int | None) -> float:
    """A process's resident memory (MB); 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text() if pid else ""
    except OSError:
        return 0.0
    kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return kb / 1024


def translated_offsets(group: str, ends: dict[int, int], in_a: dict[str, Any], in_b: dict[str, Any]) -> dict[int, int]:
    """Commit `group` at `ends` on a's `headwater.events` (`in_a`: a's client settings, bootstrap included), then
    wait (60 s) until MirrorMaker 2 has written the group's translated offsets on `a.headwater.events` in b
    (`in_b`); partition -> translated offset."""
    consumer = Consumer({**in_a, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("headwater.events", p, o) for p, o in ends.items()], asynchronous=False)
    consumer.close()
    admin = AdminClient(in_b)

    def translated() -> dict[int, int]:
        try:
            result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
        except KafkaException:  # not there yet
            return {}
        return {tp.partition: tp.offset for tp in result.topic_partitions
                if tp.topic == "a.headwater.events" and tp.offset >= 0}

    got: dict[int, int] = wait_for(f"{group}'s offsets translated into b", translated, 60, interval_s=1.0)
    return got
