"""What the console reads from Kafka: the newest window aggregates, dead letters by reason, topic end offsets.

Blocking (confluent-kafka): the app calls `poll` on a worker thread. Each call reads at most `budget`
records, so a long topic is caught up over several samples rather than in one long stall.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from common.avro_frame import HEADER_BYTES, FrameError, WriterSchemas, read_body, schema_id_of
from common.kafka_read import TopicMissing, end_offsets
from common.registry_client import RegistryClient
from console.config import ConsoleConfig

AggKey = tuple[str, int, str, str]  # granularity, window start (epoch ms), event type, region
MAX_WINDOWS = 400
# Dead-letter reasons are the gateway's rejection codes; anyone who can write to the topic can write others.
# Beyond MAX_REASONS distinct codes, or for a reason that is not code-shaped, the count goes to OTHER_REASON,
# so the page and /metrics stay small whatever the topic holds.
MAX_REASONS = 32
REASON = re.compile(r"[a-z][a-z0-9_]{0,63}")
OTHER_REASON = "other"


@dataclass
class KafkaFigures:
    """What one poll leaves behind (cumulative)."""

    aggregates: dict[AggKey, dict[str, Any]] = field(default_factory=dict)
    deadletters_by_reason: Counter[str] = field(default_factory=Counter)
    deadletters_total: int = 0
    events_end: dict[int, int] = field(default_factory=dict)
    error: str | None = None


def window_row(value: bytes, schemas: WriterSchemas) -> tuple[AggKey, dict[str, Any]] | None:
    """An aggregates record (Confluent framing, Avro) as its key and the figures the page shows."""
    try:
        schema_id = schema_id_of(value)
    except FrameError:
        return None
    row: dict[str, Any] = read_body(value[HEADER_BYTES:], schemas.parsed(schema_id))
    start = row["window_start"]
    start_ms = int(start.timestamp() * 1000) if hasattr(start, "timestamp") else int(start)
    key = (str(row["granularity"]), start_ms, str(row["event_type"]), str(row["region"]))
    return key, {"events": int(row["events"]), "distinct_users": int(row.get("distinct_users") or 0)}


class KafkaView:
    def __init__(self, cfg: ConsoleConfig, budget: int = 5000) -> None:
        self.topics = (cfg.events_topic, cfg.deadletter_topic, cfg.aggregates_topic)
        self.budget = budget
        self.figures = KafkaFigures()
        self._schemas = WriterSchemas(RegistryClient.of(cfg.registry_url, cfg.registry_access, timeout_s=5))
        self._consumer = Consumer({
            "bootstrap.servers": cfg.bootstrap, **cfg.kafka_security.librdkafka(),
            "group.id": f"headwater.console.{uuid.uuid4()}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        })
        self._assigned = False

    def _assign(self) -> None:
        _, dl, agg = self.topics
        meta = self._consumer.list_topics(timeout=5).topics
        parts = [TopicPartition(t, p, -2) for t in (dl, agg) if t in meta for p in meta[t].partitions]
        if parts:
            self._consumer.assign(parts)
            self._assigned = True

    def poll(self) -> KafkaFigures:
        """Read what arrived since the last call (up to the budget) and the events topic's end offsets."""
        f = self.figures
        try:
            if not self._assigned:
                self._assign()
            f.events_end = self._end_offsets(self.topics[0])
            for msg in self._consumer.consume(self.budget, timeout=0.5) if self._assigned else []:
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        f.error = str(err)
                    continue
                self._take(msg.topic() or "", msg.value() or b"")
            f.error = None
        except Exception as exc:  # Kafka or registry down: the page says so, the next poll tries again
            f.error = f"{type(exc).__name__}: {exc}"
        return f

    def _end_offsets(self, topic: str) -> dict[int, int]:
        try:
            return end_offsets(self._consumer, topic, timeout_s=5)
        except TopicMissing:
            return {}

    def _take(self, topic: str, value: bytes) -> None:
        f = self.figures
        if topic == self.topics[1]:
            f.deadletters_by_reason[bounded_reason(value, f.deadletters_by_reason)] += 1
            f.deadletters_total += 1
        elif topic == self.topics[2]:
            parsed = window_row(value, self._schemas)
            if parsed is not None:
                f.aggregates[parsed[0]] = parsed[1]
                if len(f.aggregates) > MAX_WINDOWS:
                    for key in sorted(f.aggregates, key=lambda k: k[1])[:len(f.aggregates) - MAX_WINDOWS]:
                        del f.aggregates[key]

    def close(self) -> None:
        self._consumer.close()


def bounded_reason(value: bytes, seen: Counter[str]) -> str:
    """The dead letter's reason code as a label: a code already counted, a new code while fewer than MAX_REASONS
    are, `unreadable` for a value that is not a JSON object, else OTHER_REASON (pure)."""
    try:
        reason = json.loads(value).get("reason")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return "unreadable"
    if not isinstance(reason, str) or not REASON.fullmatch(reason):
        return OTHER_REASON
    if reason in seen or len(seen) < MAX_REASONS - 2:  # room kept for `other` and `unreadable`
        return reason
    return OTHER_REASON


def newest_windows(aggregates: dict[AggKey, dict[str, Any]], granularity: str) -> dict[str, Any]:
    """The newest window of `granularity`: its start and events per (event type, region)."""
    starts = [k[1] for k in aggregates if k[0] == granularity]
    if not starts:
        return {"granularity": granularity, "window_start": None, "rows": []}
    newest = max(starts)
    rows = [{"event_type": k[2], "region": k[3], **v} for k, v in aggregates.items()
            if k[0] == granularity and k[1] == newest]
    rows.sort(key=lambda r: (r["event_type"], r["region"]))
    return {"granularity": granularity, "window_start": newest, "rows": rows}
