"""Reads and writes the rules and their statuses in their two compacted Kafka topics (key = rule name).

Each topic has one partition (a total order of writes, like the registry's `_schemas`), `cleanup.policy=compact`
and no retention limit; a tombstone (null value) deletes a key. Both are created when missing, with a replication
factor of min(3, brokers). `latest_*` read a topic from its beginning to its end offset at the time of the call,
so they see every write acknowledged before it; `TopicFollower` keeps reading for the pipeline's watcher.

Anyone who reaches the broker can write these topics until Kafka has authentication and ACLs (docs/rules.md,
"Who can deploy rules"), so a record is trusted for nothing: one whose key is not a rule name, whose value this
version cannot read, or whose value names another rule than its key is skipped with a warning and listed in
`TopicFollower.skipped` (`rules list` shows them; `rules delete` can tombstone them): it never stops the reader
nor hides the other rules. A topic just created has no partition leader for a moment: creation waits for one,
and reads retry the broker's transient refusals (NOT_LEADER_FOR_PARTITION, ...) until their timeout.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from common import kafka_read
from common.kafka_security import KafkaSecurity
from spark_pipeline.rules.model import (
    RULES_TOPIC,
    STATUS_TOPIC,
    ModelError,
    Rule,
    RuleError,
    RuleStatus,
    check_name,
    output_topic,
)

log = logging.getLogger("spark_pipeline.rules")
LEADER_POLL_S = 0.1  # between two metadata reads while a topic just created has no leader


class Named(Protocol):
    """A stored value: it names the rule it belongs to (and must be stored under that key)."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)
TOPIC_CONFIG = {"cleanup.policy": "compact", "retention.ms": "-1", "min.insync.replicas": "1",
                "max.message.bytes": str(1024 * 1024)}
OUTPUT_PARTITIONS = 3
OUTPUT_RETENTION_MS = 7 * 24 * 3600 * 1000


class StoreError(RuntimeError):
    """Kafka refused or timed out a read or a write of the rule topics; the message says which."""


def _client(bootstrap: str, security: KafkaSecurity | None, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, **(security or KafkaSecurity()).librdkafka(), **extra}


def wait_for_leaders(admin: AdminClient, topics: list[str], timeout_s: float) -> Any:
    """Wait until every partition of `topics` has a leader (a topic just created has none for a moment: a read
    then fails with NOT_LEADER_FOR_PARTITION or UNKNOWN_TOPIC_OR_PART); the cluster's metadata that showed them."""
    deadline = time.monotonic() + timeout_s
    pending = list(topics)
    try:
        for attempt in Retrying(stop=stop_after_delay(timeout_s), wait=wait_fixed(LEADER_POLL_S),
                                retry=retry_if_exception_type(_Leaderless), reraise=True):
            with attempt:
                try:
                    meta = admin.list_topics(timeout=max(1.0, deadline - time.monotonic()))
                except KafkaException as exc:
                    raise StoreError(f"cannot read the metadata of {', '.join(pending)}: {exc}") from None
                pending = [t for t in pending if not _led(meta, t)]
                if pending:
                    raise _Leaderless
                return meta
    except _Leaderless:
        raise StoreError(f"no partition leader for {', '.join(pending)} after {timeout_s:.0f} s") from None


class _Leaderless(Exception):
    """A partition of the topics waited for has no leader yet (retried until the timeout)."""


def _led(meta: Any, topic: str) -> bool:
    t = meta.topics.get(topic)
    return t is not None and t.error is None and bool(t.partitions) and all(
        p.leader >= 0 and p.error is None for p in t.partitions.values())


@dataclass(frozen=True)
class TopicSpec:
    """How a topic of the rules is created when missing (its replication factor: min(3, brokers))."""

    partitions: int
    config: dict[str, str]


RULE_TOPICS = {RULES_TOPIC: TopicSpec(1, TOPIC_CONFIG), STATUS_TOPIC: TopicSpec(1, TOPIC_CONFIG)}


def output_spec(*, compacted: bool, partitions: int = OUTPUT_PARTITIONS) -> TopicSpec:
    """A rule's output topic: compacted for an aggregation, whose records are upserts by key; else kept
    OUTPUT_RETENTION_MS."""
    return TopicSpec(partitions, {"cleanup.policy": "compact"} if compacted else
                     {"cleanup.policy": "delete", "retention.ms": str(OUTPUT_RETENTION_MS)})


class Topics:
    """One admin client and the cluster's metadata as first read, for a process's topic work: which topics exist,
    and creating the missing ones. A command makes one and asks it everything (each admin client and metadata read
    is a round trip or more on a loaded broker)."""

    def __init__(self, bootstrap: str, security: KafkaSecurity | None = None, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self.admin = AdminClient(_client(bootstrap, security))
        try:
            self._meta = self.admin.list_topics(timeout=timeout_s)
        except KafkaException as exc:
            raise StoreError(f"cannot reach Kafka at {bootstrap}: {exc}") from None

    def exists(self, topic: str) -> bool:
        """Whether `topic` existed when this was made, or was created through it."""
        return topic in self._meta.topics

    def ensure(self, specs: dict[str, TopicSpec]) -> list[str]:
        """Create the topics of `specs` that are missing and wait until every partition of all of them has a
        leader; the names created (a topic another process creates meanwhile is not one of them)."""
        missing = [t for t in specs if t not in self._meta.topics]
        created: list[str] = []
        if missing:
            rf = max(1, min(3, len(self._meta.brokers)))
            futures = self.admin.create_topics(
                [NewTopic(t, num_partitions=specs[t].partitions, replication_factor=rf, config=specs[t].config)
                 for t in missing], operation_timeout=self.timeout_s, request_timeout=self.timeout_s)
            for name, fut in futures.items():
                try:
                    fut.result(timeout=self.timeout_s)
                    created.append(name)
                except Exception as exc:
                    err = exc.args[0] if exc.args else None
                    if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                        raise StoreError(f"cannot create topic {name}: {exc}") from None
        if missing or not all(_led(self._meta, t) for t in specs):
            self._meta = wait_for_leaders(self.admin, list(specs), self.timeout_s)
        return created


def ensure_topics(bootstrap: str, timeout_s: float = 30.0, security: KafkaSecurity | None = None) -> list[str]:
    """Create RULES_TOPIC and STATUS_TOPIC if missing (compacted, one partition) and wait for their leaders;
    return the names created."""
    return Topics(bootstrap, security, timeout_s).ensure(RULE_TOPICS)


def ensure_output_topic(bootstrap: str, name: str, *, compacted: bool, partitions: int = OUTPUT_PARTITIONS,
                        timeout_s: float = 30.0, security: KafkaSecurity | None = None,
                        topics: Topics | None = None) -> bool:
    """Create rule `name`'s output topic if missing (`output_spec`); whether it was created."""
    topic = output_topic(name)
    topics = topics or Topics(bootstrap, security, timeout_s)
    return bool(topics.ensure({topic: output_spec(compacted=compacted, partitions=partitions)}))


class TopicFollower(Generic[T]):
    """Reads one compacted topic from its beginning and keeps its latest value per key (None: deleted).

    `read_to_end()` returns the keys that changed since the last call (the first call: every key), after
    reading up to the end offset the broker reports at the time of the call. `skipped` holds the keys whose
    latest record was skipped (module doc), with the reason.
    """

    def __init__(self, bootstrap: str, topic: str, parse: Callable[[bytes], T], timeout_s: float = 30.0,
                 security: KafkaSecurity | None = None) -> None:
        self.topic = topic
        self.parse = parse
        self.timeout_s = timeout_s
        self.latest: dict[str, T] = {}
        self.skipped: dict[str, str] = {}
        self._consumer = Consumer({
            # A fetch the broker holds for want of data delays the end-offset query of the next round behind it
            # (a connection's requests are answered in order): held 50 ms at most, not librdkafka's 500.
            **kafka_read.consumer_config(bootstrap, group_id=f"headwater-rules-{uuid.uuid4().hex}"),
            "fetch.wait.max.ms": 50,
            **(security or KafkaSecurity()).librdkafka()})
        self._position = kafka_read.OFFSET_BEGINNING  # then the offset after the last one read

    def _high(self) -> int:
        """The end offset, retrying the broker's transient refusals (a topic just created) until the timeout."""
        try:
            return kafka_read.end_offsets(self._consumer, self.topic, [0], self.timeout_s)[0]
        except kafka_read.KafkaReadError as exc:
            raise StoreError(f"cannot read the end offset of {self.topic}: {exc}") from None

    def read_to_end(self) -> dict[str, T | None]:
        high = self._high()
        changed: dict[str, T | None] = {}
        if self._position != kafka_read.OFFSET_BEGINNING and self._position >= high:
            return changed  # read before and nothing new: no assignment, no fetch
        try:
            for msg in kafka_read.drain(self._consumer, self.topic, {0: self._position}, {0: high},
                                        timeout_s=self.timeout_s, stall_s=self.timeout_s):
                self._position = int(msg.offset() or 0) + 1
                self._apply(msg.key(), msg.value(), changed)
        except kafka_read.KafkaReadError as exc:
            raise StoreError(f"reading {self.topic}: {exc}") from None
        finally:
            # Assigned, the consumer keeps a fetch waiting at the broker (up to fetch.wait.max.ms, 500 ms), and the
            # broker answers a connection's requests in order: the next round's end-offset query waited behind it.
            self._consumer.unassign()
        # Read to `high`: the offsets left (transaction markers, compacted away) hold no record to read again.
        self._position = max(self._position, high)
        return changed

    def _apply(self, raw_key: bytes | None, value: bytes | None, changed: dict[str, T | None]) -> None:
        key = (raw_key or b"").decode("utf-8", "replace")
        if value is None:
            self.skipped.pop(key, None)
            if self.latest.pop(key, None) is not None or key in changed:
                changed[key] = None
            return
        try:
            check_name(key)
            parsed = self.parse(value)
            if parsed.name != key:
                raise ModelError(f"the value names rule {parsed.name!r}")
        except (ModelError, RuleError) as exc:
            self._skip(key, exc.message if isinstance(exc, RuleError) else str(exc), changed)
            return
        except Exception as exc:  # a poisoned record must never stop the reader
            self._skip(key, f"unreadable: {type(exc).__name__}", changed)
            return
        self.skipped.pop(key, None)
        self.latest[key] = parsed
        changed[key] = parsed

    def _skip(self, key: str, reason: str, changed: dict[str, T | None]) -> None:
        log.warning("%s: skipping the record keyed %r: %s", self.topic, key[:100], reason[:300])
        self.skipped[key] = reason[:300]
        if self.latest.pop(key, None) is not None:  # a valid value replaced by a bad one: the key is gone
            changed[key] = None

    def close(self) -> None:
        self._consumer.close()


class RuleStore:
    """The rules and statuses of one pipeline (one Kafka cluster): read the latest, write, delete."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0, create: bool = True,
                 security: KafkaSecurity | None = None, topics: Topics | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.security = security
        if create:
            (topics or Topics(bootstrap, security, timeout_s)).ensure(RULE_TOPICS)
        self._producer = Producer({**_client(bootstrap, security), "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 0})

    @property
    def producer(self) -> Producer:
        """The store's producer (acks=all, idempotent), for a caller's other writes to the same cluster."""
        return self._producer

    def _read(self, topic: str, parse: Callable[[bytes], T]) -> tuple[dict[str, T], dict[str, str]]:
        follower = TopicFollower(self.bootstrap, topic, parse, self.timeout_s, self.security)
        try:
            follower.read_to_end()
            return dict(follower.latest), dict(follower.skipped)
        finally:
            follower.close()

    def latest_rules(self) -> dict[str, Rule]:
        """Every rule stored now, by name."""
        return self._read(RULES_TOPIC, Rule.from_json)[0]

    def rules_and_skipped(self) -> tuple[dict[str, Rule], dict[str, str]]:
        """Every rule stored now, and the keys of the records skipped (key -> why)."""
        return self._read(RULES_TOPIC, Rule.from_json)

    def statuses(self) -> dict[str, RuleStatus]:
        """The latest status of every rule that has one, by name."""
        return self._read(STATUS_TOPIC, RuleStatus.from_json)[0]

    def _send(self, topic: str, key: str, value: bytes | None) -> None:
        errors: list[str] = []

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                errors.append(str(err))

        self._producer.produce(topic, key=key.encode(), value=value, on_delivery=delivered)
        if self._producer.flush(self.timeout_s) > 0:
            raise StoreError(f"timed out writing {key!r} to {topic}")
        if errors:
            raise StoreError(f"writing {key!r} to {topic}: {errors[0]}")

    def put(self, rule: Rule) -> None:
        """Store `rule` (acknowledged by every in-sync replica when this returns)."""
        self._send(RULES_TOPIC, rule.name, rule.to_json())

    def delete(self, name: str) -> None:
        """Delete rule `name` (a tombstone); the pipeline then stops its query."""
        self._send(RULES_TOPIC, check_name(name), None)

    def delete_skipped(self, key: str) -> None:
        """Tombstone the record keyed `key` (one `rules_and_skipped` reported as skipped, any key)."""
        self._send(RULES_TOPIC, key, None)

    def put_status(self, status: RuleStatus) -> None:
        self._send(STATUS_TOPIC, status.name, status.to_json())

    def delete_status(self, name: str) -> None:
        self._send(STATUS_TOPIC, check_name(name), None)

    def close(self) -> None:
        self._producer.flush(self.timeout_s)
