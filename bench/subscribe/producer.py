"""The benchmark's load: page_view records (Avro, Confluent framing, as the gateway writes them) committed to the
events topic in Kafka transactions at a fixed rate; each transaction's commit time is what latency is measured
from (the moment the records become visible to read_committed readers)."""

from __future__ import annotations

import io
import random
import time
import uuid
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from typing import Any

import fastavro
from confluent_kafka import Producer

from bench.gateway.workload import page_view
from common.avro_frame import frame
from common.kafka_produce import produce

TRANSACTION_S = 30.0  # a transaction: its records enqueued and committed within this


def encode(schema: Any, schema_id: int, event: dict[str, Any]) -> bytes:
    rec = {**event, "sent_at": event["created_at"], "received_at": event["created_at"],
           "sdk_name": "headwater-bench", "sdk_version": "0"}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, rec)
    return frame(schema_id, buf.getvalue())


def run(bootstrap: str, topic: str, stop: Event, out: Connection, *, schema_doc: Any, schema_id: int,
        rate: int, tx_per_s: int) -> None:
    """Produce until `stop`; send back [(first seq, last seq, commit epoch s)] and the rate achieved."""
    schema = fastavro.parse_schema(schema_doc)
    rng, producer_id = random.Random(11), str(uuid.uuid4())
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-subscribe-{uuid.uuid4()}",
                         "enable.idempotence": True, "linger.ms": 0})
    producer.init_transactions(30)
    commits: list[tuple[int, int, float]] = []
    seq, start = 0, time.monotonic()
    next_at = start
    while not stop.is_set():
        # the records due by now: a transaction per 1/tx_per_s s, larger when commits are slower than that
        due = max(1, min(rate, int((time.monotonic() - start) * rate) - seq))
        producer.begin_transaction()
        first, deadline = seq, time.monotonic() + TRANSACTION_S
        for _ in range(due):
            node = f"node-{rng.randrange(1000)}"
            produce(producer, topic, encode(schema, schema_id, page_view(rng, seq, producer_id, node)), node.encode(),
                    deadline=deadline)
            seq += 1
        producer.commit_transaction(TRANSACTION_S)
        commits.append((first, seq - 1, time.time()))
        next_at += 1 / tx_per_s
        time.sleep(max(0.0, next_at - time.monotonic()))
    out.send({"commits": commits, "rate": seq / (time.monotonic() - start)})
    out.close()
