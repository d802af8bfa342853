"""Pipeline throughput with 0, 1, 5, 20, 50 rules running: one pipeline over a private events topic, rules added
between rounds, a burst of generated events per round.

A round: rules applied up to N (a mix of packable filters, projections and windowed counts), a small warm-up
burst, the outputs quiet; then `events` events produced at once. Done when no output topic (the built-in
aggregates, the shared enriched stream, every rule's) has grown for a few seconds and the built-in 1-minute
counts of the burst's windows add up to the events sent. events/s = events / (the last output record's Kafka
timestamp - the start of the produce).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

from bench.rules.common import Running, apply_rule, log, quiet, records, wait
from bench.spark.generate import Encoder, generate, produce
from common.avro_frame import WriterSchemas
from common.kafka_read import read_to_end, topic_end_offsets
from common.registry_client import RegistryClient
from spark_pipeline.config import PipelineConfig
from spark_pipeline.rules.store import RuleStore

TEMPLATES = [
    "SELECT window(event_time, '1 minute') AS w, event_type, region, count(*) AS events FROM events "
    "GROUP BY window(event_time, '1 minute'), event_type, region",
    "SELECT event_id, event_type, node_id FROM events WHERE event_type = 'purchase'",
    "SELECT window(event_time, '10 seconds') AS w, node_id, count(*) AS events FROM events "
    "GROUP BY window(event_time, '10 seconds'), node_id",
    "SELECT event_id, upper(event_type) AS kind, concat(node_id, '/', region) AS place FROM events "
    "WHERE metric_value >= 0.0",
]
MINUTE_MS = 60_000


def last_timestamp(cfg: PipelineConfig, topic: str) -> int:
    """The Kafka timestamp of the newest record of `topic` (0: none)."""
    ends = topic_end_offsets(cfg.bootstrap, topic)
    start = {p: max(0, e - 1) for p, e in ends.items()}
    return max((m.timestamp()[1] for m in read_to_end(cfg.bootstrap, topic, start=start, timeout_s=60)
                if m.value() is not None), default=0)


def minute_counts(cfg: PipelineConfig, since_ms: int, windows: range, schemas: WriterSchemas) -> int:
    """The events the built-in aggregates count in the 1-minute windows starting in `windows` (latest per key)."""
    latest: dict[Any, int] = {}
    for _, row in records(cfg, cfg.aggregates_topic, since_ms, schemas):
        start = int(row["window_start"].timestamp() * 1000)
        if row["granularity"] == "1m" and start in windows:
            latest[(start, row["event_type"], row["region"])] = int(row["events"])
    return sum(latest.values())


class Rounds:
    """The cost phase's pipeline, its rules and its bursts."""

    def __init__(self, pipeline: Running, store: RuleStore, encoder: Encoder) -> None:
        self.pipeline = pipeline
        self.store = store
        self.encoder = encoder
        self.names: list[str] = []
        self.topics: list[str] = []
        self.next_ms = 0  # event times of the next burst start here (each burst in windows of its own)
        self.schemas = WriterSchemas(RegistryClient.of(pipeline.cfg.registry_url, pipeline.cfg.registry_access))

    @property
    def cfg(self) -> PipelineConfig:
        return self.pipeline.cfg

    def grow(self, n: int) -> None:
        while len(self.names) < n:
            name = f"bench_cost_{uuid.uuid4().hex[:6]}_{len(self.names)}"
            rule = apply_rule(self.cfg, TEMPLATES[len(self.names) % len(TEMPLATES)], name, self.store)
            self.names.append(name)
            self.topics.append(rule.topic)
        wait(f"{n} rules started", lambda: self.pipeline.active(self.names), 600)

    def burst(self, events: int, seed: int) -> tuple[float, range]:
        """Produce `events` events at once (event times spaced within fresh minutes); (wall start, their windows)."""
        now = int(time.time() * 1000)
        start = max(now, self.next_ms)
        start += -start % MINUTE_MS
        spacing = max(1, 30_000 // max(1, events))
        payloads = [(e.key, self.encoder.encode(e), e.headers)
                    for e in generate(events, start_ms=start, spacing_ms=spacing, seed=seed)]
        end = start + events * spacing
        self.next_ms = end + MINUTE_MS
        t0 = time.time()
        produce(self.cfg.bootstrap, self.cfg.events_topic, payloads)
        return t0, range(start, end + 1, MINUTE_MS)

    def outputs(self) -> list[str]:
        return [self.cfg.aggregates_topic, self.cfg.enriched_topic, *self.topics]

    def round(self, n: int, events: int) -> dict[str, Any]:
        self.grow(n)
        self.burst(max(500, events // 20), seed=n + 1000)  # warm-up: new packs start and compile
        if not quiet(self.cfg, self.outputs(), 5.0, 600):
            log.warning("%d rules: the outputs did not settle after the warm-up", n)
        t0, windows = self.burst(events, seed=n)
        settled = quiet(self.cfg, self.outputs(), 5.0, 1800)
        counted = minute_counts(self.cfg, int(t0 * 1000) - 1000, windows, self.schemas)
        deadline = time.monotonic() + 120
        while counted < events and time.monotonic() < deadline:  # a stall is not completion
            settled = quiet(self.cfg, self.outputs(), 5.0, 120)
            counted = minute_counts(self.cfg, int(t0 * 1000) - 1000, windows, self.schemas)
        last = max(last_timestamp(self.cfg, t) for t in self.outputs())
        seconds = last / 1000 - t0
        row = {"rules": n, "events": events, "seconds": round(seconds, 2),
               "events_per_s": round(events / seconds) if seconds > 0 else None,
               "counted": counted, "settled": settled, "tiers": self.pipeline.tiers_of(self.names)}
        log.info("cost: %s", row)
        return row

    def delete(self) -> None:
        for name in self.names:
            self.store.delete(name)


def run(pipeline: Running, store: RuleStore, encoder: Encoder, counts: Iterable[int], events: int
        ) -> list[dict[str, Any]]:
    rounds = Rounds(pipeline, store, encoder)
    try:
        rows = [rounds.round(n, events) for n in sorted(counts)]
    finally:
        rounds.delete()
    base = rows[0]["events_per_s"] if rows and rows[0]["rules"] == 0 else None
    for row in rows:
        row["vs_none"] = round(row["events_per_s"] / base, 3) if base and row["events_per_s"] else None
    return rows
