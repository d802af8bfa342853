"""Warms the broker before anything is measured: a Kafka broker's JVM compiles its hot paths during its first
minutes (here: the first ~2,000 transactions cost it several times the CPU of later ones, most of it in the JIT
compiler threads), and whichever side ran first after the start paid for it. A transactional and an idempotent
producer of our own write small batches of records like the sides' to a scratch topic (so the read-back of the
measured topics is unaffected) until the broker's CPU per transaction stops falling, before either server is
sent anything."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from bench.gateway.bound import produce_all
from bench.gateway.costs import cpu_seconds
from gateway.producer import kafka_config
from gateway.records import KafkaRecord

WARM_TOPIC = "bench.warmup"
_CHUNK = 200  # transactions per measured step
# Every tenth transaction carries 20 batches, as a saturated gateway's do (tens of batches each, one produce
# request of 100 KB or more per partition): the broker's code for large requests is compiled before the first
# measured phase too (it paid 2-3x the CPU per event of the later phases without them).
_LARGE, _LARGE_EVERY = 20, 10


@dataclass(frozen=True)
class Warmth:
    transactions: int
    seconds: float
    first_ms_per_txn: float  # broker CPU per transaction over the first chunk
    last_ms_per_txn: float   # ... and over the last


def _records(n: int, value_bytes: int) -> list[KafkaRecord]:
    value = os.urandom(value_bytes)
    headers = [("event_id", str(uuid.uuid4()).encode()), ("batch_id", str(uuid.uuid4()).encode())]
    return [KafkaRecord(WARM_TOPIC, f"node-{i % 1000}".encode(), value, headers) for i in range(n)]


def warm_broker(bootstrap: str, broker_pid: int, *, max_seconds: float, min_transactions: int = 2000,
                value_bytes: int = 1200, client: Mapping[str, Any] | None = None) -> Warmth:
    """Transactions of 40 records, one in ten of 800 (and 40 records without a transaction beside each): at least
    `min_transactions`, then until the broker's CPU per transaction over a chunk no longer falls by 15 %, or
    `max_seconds` passed. `client`: librdkafka settings to add (a secured cluster's credentials)."""
    extra = dict(client or {})  # a secured cluster's credentials (its administrator's)
    tx = Producer({**kafka_config(bootstrap, f"headwater-bench-warmup-{uuid.uuid4()}", 10.0, 20.0), **extra})
    tx.init_transactions(30)
    plain_config = {**kafka_config(bootstrap, "unused", 10.0, 20.0), **extra}
    del plain_config["transactional.id"]
    plain = Producer(plain_config)
    records = _records(40, value_bytes)
    t0, done, costs = time.monotonic(), 0, []
    while time.monotonic() - t0 < max_seconds or done < min(min_transactions, _CHUNK):
        b0 = cpu_seconds(broker_pid)
        for i in range(_CHUNK):
            tx.begin_transaction()
            for _ in range(_LARGE if i % _LARGE_EVERY == 0 else 1):
                produce_all(tx, records)
            tx.commit_transaction(30)
            produce_all(plain, records)
        plain.flush(30)
        done += _CHUNK
        costs.append((cpu_seconds(broker_pid) - b0) * 1000 / _CHUNK)
        if done >= min_transactions and costs[-1] > 0.85 * costs[-2]:
            break
    return Warmth(done, round(time.monotonic() - t0, 1), round(costs[0], 2) if costs else 0.0,
                  round(costs[-1], 2) if costs else 0.0)
