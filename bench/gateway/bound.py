"""The in-process bound: decompress + decode + validate + encode + produce, in a tight loop, no HTTP.

It runs the gateway's own functions on the same bodies and commits a Kafka transaction every
`batches_per_txn` batches (4,000 records: group commit under full load), so the gateway's ratio to it measures
what HTTP, asyncio, the hand-off to the commit thread and waiting for commits cost.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

from confluent_kafka import Producer

from bench.gateway.workload import Body
from common import kafka_produce
from gateway.avro_batch import decode_avro_batch
from gateway.body import decompress
from gateway.config import Limits
from gateway.ingest import plan_avro, plan_json
from gateway.json_batch import decode_json_batch
from gateway.producer import kafka_config
from gateway.records import KafkaRecord, RequestMeta
from gateway.schema_cache import SchemaCache


def produce_all(producer: Producer, records: Iterable[KafkaRecord]) -> None:
    """Produce every record, serving delivery reports while librdkafka's queue is full (for up to a minute)."""
    kafka_produce.produce_all(producer, records, deadline=time.monotonic() + 60)


def run_bound(bodies: list[Body], cache: SchemaCache, bootstrap: str, kind: str, batches_per_txn: int = 100) -> float:
    """Events per second over `bodies`."""
    producer = Producer(kafka_config(bootstrap, f"headwater-bench-bound-{uuid.uuid4()}", 10.0, 20.0))
    producer.init_transactions(30)
    limits = Limits()
    events = 0
    t0 = time.perf_counter()
    producer.begin_transaction()
    for i, body in enumerate(bodies, 1):
        raw = decompress(body.data, "zstd", limits)
        meta = RequestMeta.make("", int(time.time() * 1000), "bench", "127.0.0.1", "bench")
        if kind == "json":
            batch, wire_events = decode_json_batch(raw, limits)
            plan = plan_json(batch, wire_events, cache, meta, "headwater.deadletter")
        else:
            plan = plan_avro(decode_avro_batch(raw, limits), cache, meta, "headwater.deadletter")
        produce_all(producer, plan.records)
        events += plan.accepted
        if i % batches_per_txn == 0:
            producer.commit_transaction(30)
            producer.begin_transaction()
    producer.commit_transaction(30)
    return events / (time.perf_counter() - t0)
