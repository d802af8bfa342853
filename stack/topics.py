"""The topics Headwater needs, with their documented configurations, and their idempotent creation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from stack.config import StackConfig

EVENTS_TOPIC = "headwater.events"
DEADLETTER_TOPIC = "headwater.deadletter"
SCHEMAS_TOPIC = "_schemas"
AGGREGATES_TOPIC = "headwater.aggregates"

DAY_MS = 24 * 3600 * 1000
# One event is at most a few KB; 1 MiB per record bounds a dead-letter record carrying a large payload.
MAX_MESSAGE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class TopicSpec:
    """A topic's name, partition count and the configs it is created with."""

    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


def topic_specs(cfg: StackConfig, replication_factor: int | None = None) -> list[TopicSpec]:
    """Every topic the launcher creates, for `replication_factor` (default: the stack's) replicas;
    docs/local-stack.md's "Topics" table documents the same values."""
    rf = cfg.replication_factor if replication_factor is None else replication_factor
    common = {
        "min.insync.replicas": str(min(cfg.min_insync_replicas, rf)),
        "max.message.bytes": str(MAX_MESSAGE_BYTES),
        "message.timestamp.type": "CreateTime",
        # Keep whatever compression the producer chose (the gateway: none by default): no broker re-compression.
        "compression.type": "producer",
    }
    if cfg.kafka_flush_messages > 0:
        common["flush.messages"] = str(cfg.kafka_flush_messages)
    return [
        TopicSpec(EVENTS_TOPIC, cfg.events_partitions,
                  {**common, "cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS)}),
        # Dead letters are kept longer: they are replayed after a schema fix.
        TopicSpec(DEADLETTER_TOPIC, cfg.deadletter_partitions,
                  {**common, "cleanup.policy": "delete", "retention.ms": str(30 * DAY_MS)}),
        # The registry's log: compacted, one partition (total order of writes), kept forever.
        TopicSpec(SCHEMAS_TOPIC, 1,
                  {**common, "cleanup.policy": "compact", "retention.ms": "-1"}),
        TopicSpec(AGGREGATES_TOPIC, cfg.aggregates_partitions,
                  {**common, "cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS)}),
    ]


def ensure_topics(bootstrap: str, specs: list[TopicSpec], timeout_s: float = 30.0, *,
                  replication_factor: int = 1, client: Mapping[str, Any] | None = None) -> list[str]:
    """Create the topics that do not exist yet; return the names created. Existing ones are left as they are.
    `client`: librdkafka settings to add (a secured stack's administrator)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [NewTopic(s.name, num_partitions=s.partitions, replication_factor=replication_factor, config=s.config)
         for s in missing],
        operation_timeout=timeout_s,
        request_timeout=timeout_s,
    )
    for fut in futures.values():
        fut.result(timeout=timeout_s)
    return [s.name for s in missing]
