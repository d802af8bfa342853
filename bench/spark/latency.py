"""End-to-end latency: created_at -> the 10-second aggregate row that counts the event is visible in Kafka.

A sender posts batches to the gateway (JSON, like the SDK; or straight to Kafka when no gateway is
given) at a fixed rate, stamping created_at at send time; a consumer of the aggregates topic records
when each (window, event type, region) row reaches each count. An event is visible once its key's count
covers its rank among that key's events.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import fastavro
from confluent_kafka import Consumer, Producer, TopicPartition

from bench.spark.generate import Encoder, Event, generate
from common.avro_frame import body_of, read_body
from common.kafka_produce import produce
from common.kafka_read import end_offsets
from spark_pipeline.config import PipelineConfig
from spark_pipeline.enrich import inventory_rows
from spark_pipeline.load import AGGREGATE_SCHEMA

Key = tuple[int, str, str]  # 10 s window start (ms), event_type, region
TRANSACTION_S = 30.0  # a batch's transaction: its records enqueued and committed within this


@dataclass
class Observations:
    """Send times per key and aggregate updates per key, filled by the sender and the consumer threads."""

    sent: dict[Key, list[int]] = field(default_factory=lambda: defaultdict(list))
    updates: dict[Key, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))

    def latencies_ms(self) -> tuple[list[int], int]:
        """(sorted latencies of the visible events, count of events never seen in an aggregate)."""
        out: list[int] = []
        missing = 0
        for key, created in self.sent.items():
            ups = sorted(self.updates.get(key, []))  # (arrival ms, count)
            best: list[tuple[int, int]] = []  # running max count over arrival time
            for arrival, count in ups:
                if not best or count > best[-1][1]:
                    best.append((arrival, count))
            counts = [c for _, c in best]
            for rank, t in enumerate(sorted(created), start=1):
                i = bisect.bisect_left(counts, rank)
                if i == len(best):
                    missing += 1
                else:
                    out.append(best[i][0] - t)
        return sorted(out), missing


def regions(cfg: PipelineConfig) -> dict[str, str]:
    return {str(row[0]): str(row[1]) for row in inventory_rows(cfg.nodes_file)}


def consume_aggregates(cfg: PipelineConfig, obs: Observations, stop: threading.Event, ready: threading.Event) -> None:
    parsed = fastavro.parse_schema(AGGREGATE_SCHEMA)
    consumer = Consumer({"bootstrap.servers": cfg.bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    try:
        ends = end_offsets(consumer, cfg.aggregates_topic)  # only the updates made from now on
        consumer.assign([TopicPartition(cfg.aggregates_topic, p, end) for p, end in ends.items()])
        ready.set()
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None or msg.value() is None:
                continue
            now = int(time.time() * 1000)
            value = msg.value()
            assert value is not None
            row: dict[str, Any] = read_body(body_of(value), parsed, parsed)
            if row["granularity"] == "10s":
                key = (int(row["window_start"].timestamp() * 1000), row["event_type"], row["region"])
                obs.updates[key].append((now, int(row["events"])))
    finally:
        consumer.close()


def _post(gateway_url: str, write_key: str, events: list[Event]) -> None:
    body = {"batch_id": str(uuid.uuid4()), "sent_at": int(time.time() * 1000),
            "sdk": {"name": "headwater-bench", "version": "0"},
            "events": [{k: e.record[k] for k in ("event_id", "event_type", "producer_id", "seq", "node_id",
                                                  "created_at", "context", "properties")} | {"schema_version": 2}
                       for e in events]}
    req = urllib.request.Request(f"{gateway_url.rstrip('/')}/v1/batch", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {write_key}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        answer = json.loads(resp.read())
        if answer.get("rejected"):
            raise RuntimeError(f"gateway rejected events: {answer['rejected'][:3]}")


def send(cfg: PipelineConfig, obs: Observations, *, seconds: float, rate: int, gateway: tuple[str, str] | None,
         ids: dict[tuple[str, int], int]) -> int:
    """Send `rate` events/s for `seconds` in batches of 40 every 40/rate s; return the number sent."""
    node_region = regions(cfg)
    encoder = Encoder(ids)
    pool = generate(int(seconds * rate) + 40, producers=8, spacing_ms=0, seed=int(time.time()))
    producer = None
    if not gateway:
        producer = Producer({"bootstrap.servers": cfg.bootstrap, "transactional.id": f"bench-{uuid.uuid4()}",
                             "linger.ms": 0, "acks": "all"})
        producer.init_transactions(30)
    interval, sent, start = 40 / rate, 0, time.monotonic()
    while time.monotonic() - start < seconds:
        batch = []
        now = int(time.time() * 1000)
        for _ in range(40):
            e = next(pool)
            e.record["created_at"] = e.record["sent_at"] = now
            e.record["received_at"] = None
            e = Event(e.record, e.event_type, 2, [*e.headers[:2], ("received_at", str(now).encode())])
            batch.append(e)
        if gateway:
            _post(gateway[0], gateway[1], batch)
        elif producer is not None:  # one transaction per batch, like the gateway
            producer.begin_transaction()
            deadline = time.monotonic() + TRANSACTION_S
            for e in batch:
                produce(producer, cfg.events_topic, encoder.encode(e), e.key, e.headers, deadline=deadline)
            producer.commit_transaction(TRANSACTION_S)
        for e in batch:
            region = node_region.get(str(e.record["node_id"]), "unknown")
            obs.sent[(now - now % 10_000, e.event_type, region)].append(now)
        sent += len(batch)
        time.sleep(max(0.0, start + (sent / 40) * interval - time.monotonic()))
    return sent


def drain(obs: Observations, quiet_s: float, max_s: float) -> None:
    """Wait until no aggregate update has arrived for `quiet_s` (the pipeline caught up), at most `max_s`."""
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline:
        last = max((t for ups in list(obs.updates.values()) for t, _ in ups), default=0)
        if last and time.time() * 1000 - last > quiet_s * 1000:
            return
        time.sleep(0.5)


def percentile(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    return float(values[min(len(values) - 1, int(q * len(values)))])
