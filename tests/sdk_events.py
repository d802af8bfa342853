"""Test helpers that read back what an SDK delivered: the events topic's committed records of one producer,
decoded with their writer schemas from the registry (shared by the Python, Go and TypeScript SDK tests)."""

from __future__ import annotations

from typing import Any

from common.avro_frame import WriterSchemas
from tests.support.kafka import consume_all
from tests.support.wait import eventually

EVENTS_TOPIC = "headwater.events"


class Decoder:
    """Decodes Confluent-framed records with writer schemas fetched from the registry by id."""

    def __init__(self, registry_url: str) -> None:
        self.schemas = WriterSchemas(registry_url)

    def __call__(self, value: bytes) -> dict[str, Any]:
        return dict(self.schemas.decode(value))


def arrived(env: dict[str, str], producer_id: str, expected: int, start: dict[int, int]) -> dict[int, set[str]]:
    """seq -> event ids, for every committed record of `producer_id` in the events topic after `start` (read
    again until `expected` seqs are there or two minutes pass; the caller checks what came)."""
    decode = Decoder(env["REGISTRY_URL"])
    seen: dict[int, set[str]] = {}

    def read() -> bool:
        seen.clear()
        for msg in consume_all(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC, "read_committed", timeout_s=60, start=start):
            value = msg.value()
            if value is None or producer_id.encode() not in value:
                continue
            record = decode(value)
            if str(record["producer_id"]) == producer_id:  # fastavro decodes logicalType uuid to UUID
                seen.setdefault(int(record["seq"]), set()).add(str(record["event_id"]))
        return len(seen) >= expected

    eventually(read, 120, interval_s=1.0)
    return seen
