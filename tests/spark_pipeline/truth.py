"""Test helpers: a generated event set produced to Kafka, and the ground-truth aggregates in plain Python."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import fastavro

from bench.rules import common as rules_common
from bench.spark.generate import Encoder, Event, generate, produce, register_catalog
from common.avro_frame import body_of, read_body, schema_id_of
from spark_pipeline.enrich import inventory_rows
from spark_pipeline.load import AGGREGATE_SCHEMA
from tests.support.kafka import consume_all

WINDOWS_MS = {"10s": (10_000, 10_000), "1m": (60_000, 60_000), "5m/1m": (300_000, 60_000)}
Key = tuple[str, int, str, str]  # granularity, window_start ms, event_type, region
new_topic = rules_common.new_topic  # one helper for the tests and the rules benchmark


@dataclass
class EventSet:
    """What was produced: the distinct events (ground truth), duplicates included on the wire."""

    events: list[Event]
    dropped_seqs: dict[str, list[int]] = field(default_factory=dict)

    def windows(self, max_end_ms: int | None = None) -> dict[Key, int]:
        """Event counts per window, event type and region (windows ending after max_end_ms left out)."""
        regions = region_of_nodes()
        counts: dict[Key, int] = defaultdict(int)
        for e in self.events:
            t = int(e.record["created_at"])
            region = regions.get(str(e.record["node_id"]), "unknown")
            for name, (length, slide) in WINDOWS_MS.items():
                start = t - t % slide
                while start > t - length:
                    if max_end_ms is None or start + length <= max_end_ms:
                        counts[(name, start, e.event_type, region)] += 1
                    start -= slide
        return dict(counts)

    def minute_counts(self) -> dict[tuple[int, str], int]:
        counts: dict[tuple[int, str], int] = defaultdict(int)
        for e in self.events:
            t = int(e.record["created_at"])
            counts[(t - t % 60_000, e.event_type)] += 1
        return dict(counts)

    @property
    def max_time_ms(self) -> int:
        return max(int(e.record["created_at"]) for e in self.events)


def region_of_nodes() -> dict[str, str]:
    return {str(row[0]): str(row[1]) for row in inventory_rows(None)}


def produce_event_set(bootstrap: str, registry_url: str, topic: str, *, count: int, start_ms: int,
                      duplicates: int = 40, drop: tuple[int, ...] = (), spacing_ms: int = 250) -> EventSet:
    """`count` events of 3 types x 2 versions; `duplicates` resent in a later transaction (a retried batch);
    the seqs in `drop` of the first producer never sent (loss); one undecodable record."""
    encoder = Encoder(register_catalog(registry_url))
    events = list(generate(count, start_ms=start_ms, spacing_ms=spacing_ms, seed=start_ms % 10_000))
    first = str(events[0].record["producer_id"])
    kept = [e for e in events if not (e.record["producer_id"] == first and e.record["seq"] in drop)]
    payloads = [(e.key, encoder.encode(e), e.headers) for e in kept]
    payloads += payloads[: duplicates]
    payloads.append((b"bad", b"\x00\x7f\xff\xff\xffnot avro", []))
    produce(bootstrap, topic, payloads, batch=max(1, len(payloads) // 3))
    return EventSet(kept, {first: list(drop)})


def produce_events(bootstrap: str, registry_url: str, topic: str, events: list[Event]) -> None:
    encoder = Encoder(register_catalog(registry_url))
    produce(bootstrap, topic, [(e.key, encoder.encode(e), e.headers) for e in events])


def live_aggregates(bootstrap: str, topic: str) -> dict[Key, dict[str, Any]]:
    """The last record per key of the aggregates topic (update mode: the newest value of each window)."""
    parsed = fastavro.parse_schema(AGGREGATE_SCHEMA)
    latest: dict[Key, dict[str, Any]] = {}
    for msg in consume_all(bootstrap, topic):
        value = msg.value()
        assert value is not None and schema_id_of(value) > 0
        row: dict[str, Any] = read_body(body_of(value), parsed, parsed)
        start = int(row["window_start"].timestamp() * 1000)
        latest[(row["granularity"], start, row["event_type"], row["region"])] = row
    return latest
