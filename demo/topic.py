"""Reads a topic of the running stack back, decoded by each record's writer schema (Confluent framing)."""

from __future__ import annotations

import io
import json
import time
import urllib.request
import uuid
from typing import Any

import fastavro
from confluent_kafka import Consumer, KafkaError, TopicPartition


def _schema(registry_url: str, schema_id: int, cache: dict[int, Any]) -> Any:
    if schema_id not in cache:
        with urllib.request.urlopen(f"{registry_url.rstrip('/')}/schemas/ids/{schema_id}", timeout=10) as resp:
            cache[schema_id] = fastavro.parse_schema(json.loads(json.loads(resp.read())["schema"]))
    return cache[schema_id]


def latest_rows(env: dict[str, str], topic: str) -> dict[bytes, dict[str, Any]]:
    """The latest record per key of a rule's output topic (what a compacted topic converges to), decoded."""
    consumer = Consumer({"bootstrap.servers": env["KAFKA_BOOTSTRAP"], "group.id": f"demo-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    cache: dict[int, Any] = {}
    rows: dict[bytes, dict[str, Any]] = {}
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return rows
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        pending, deadline = set(meta.partitions), time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                continue
            value = msg.value()
            if value:
                parsed = _schema(env["REGISTRY_URL"], int.from_bytes(value[1:5], "big"), cache)
                rows[msg.key() or b""] = dict(fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed))  # type: ignore[arg-type]
    finally:
        consumer.close()
    return rows
