"""Test helpers that read back what an SDK delivered: the events topic's committed records of one producer,
decoded with their writer schemas from the registry (shared by the Python, Go and TypeScript SDK tests)."""

from __future__ import annotations

import io
import json
import time
import urllib.request
from typing import Any

import fastavro

from tests.kafka_helpers import consume_all

EVENTS_TOPIC = "headwater.events"


class Decoder:
    """Decodes Confluent-framed records with writer schemas fetched from the registry by id."""

    def __init__(self, registry_url: str) -> None:
        self.registry_url = registry_url.rstrip("/")
        self.schemas: dict[int, Any] = {}

    def __call__(self, value: bytes) -> dict[str, Any]:
        assert value[0] == 0
        schema_id = int.from_bytes(value[1:5], "big")
        if schema_id not in self.schemas:
            with urllib.request.urlopen(f"{self.registry_url}/schemas/ids/{schema_id}", timeout=10) as resp:
                self.schemas[schema_id] = fastavro.parse_schema(json.loads(json.loads(resp.read())["schema"]))
        record: Any = fastavro.schemaless_reader(io.BytesIO(value[5:]), self.schemas[schema_id])
        return dict(record)


def arrived(env: dict[str, str], producer_id: str, expected: int, start: dict[int, int]) -> dict[int, set[str]]:
    """seq -> event ids, for every committed record of `producer_id` in the events topic after `start`."""
    decode = Decoder(env["REGISTRY_URL"])
    by_seq: dict[int, set[str]] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        by_seq.clear()
        for msg in consume_all(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC, "read_committed", timeout_s=60, start=start):
            value = msg.value()
            if value is None or producer_id.encode() not in value:
                continue
            record = decode(value)
            if str(record["producer_id"]) == producer_id:  # fastavro decodes logicalType uuid to UUID
                by_seq.setdefault(int(record["seq"]), set()).add(str(record["event_id"]))
        if len(by_seq) >= expected:
            break
        time.sleep(1)
    return by_seq
