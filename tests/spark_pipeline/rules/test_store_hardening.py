"""Unit tests of the rule store against poisoned records and a topic just created (fakes in place of the Kafka
consumer and admin client; the real broker runs in test_hostile_stack.py): a malformed record is skipped and
reported, never stops the reader or hides the other rules; the broker's transient refusals are retried."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from spark_pipeline.rules.model import Rule, RuleStatus
from spark_pipeline.rules.store import StoreError, TopicFollower, wait_for_leaders

pytestmark = pytest.mark.unit


@dataclass
class Message:
    k: bytes | None
    v: bytes | None
    at: int

    def key(self) -> bytes | None:
        return self.k

    def value(self) -> bytes | None:
        return self.v

    def offset(self) -> int:
        return self.at

    def partition(self) -> int:
        return 0

    def error(self) -> None:
        return None


@dataclass
class FakeConsumer:
    records: list[tuple[bytes | None, bytes | None]]
    refusals: int = 0  # NOT_LEADER_FOR_PARTITION answers before the broker has a leader
    read: int = 0
    assigned: bool = False
    assigns: int = 0

    def get_watermark_offsets(self, partition: Any, timeout: float, cached: bool = False) -> tuple[int, int]:
        if self.refusals:
            self.refusals -= 1
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
        return 0, len(self.records)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.read = max(0, partitions[0].offset)
        self.assigned, self.assigns = True, self.assigns + 1

    def unassign(self) -> None:
        self.assigned = False

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        got = [Message(*self.records[at], at) for at in range(self.read, len(self.records))][:num_messages]
        self.read += len(got)
        return got

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition, self.read) for p in partitions]

    def close(self) -> None:
        pass


def follower(records: list[tuple[bytes | None, bytes | None]], parse: Any = Rule.from_json,
             refusals: int = 0) -> TopicFollower[Any]:
    f: TopicFollower[Any] = TopicFollower("127.0.0.1:9", "_headwater_rules", parse, timeout_s=5)
    f._consumer.close()
    f._consumer = FakeConsumer(records, refusals)  # type: ignore[assignment]
    return f


def rule(name: str) -> bytes:
    return Rule(name, "SELECT event_id FROM events", 1, 1, "t", 5).to_json()


def test_malformed_records_are_skipped_and_reported() -> None:
    f = follower([(b"good", rule("good")), (b"BAD-KEY", rule("victim")), (b"garbage", b"{not json"),
                  (b"deep", b"[" * 100_000 + b"]" * 100_000), (b"other", rule("someone_else")),
                  (b"\x1b[2Jx", rule("x")), (None, rule("nokey")), (b"later", rule("later"))])
    changed = f.read_to_end()
    assert set(changed) == {"good", "later"} and set(f.latest) == {"good", "later"}
    assert set(f.skipped) == {"BAD-KEY", "garbage", "deep", "other", "\x1b[2Jx", ""}
    assert "names rule 'someone_else'" in f.skipped["other"] and "not JSON" in f.skipped["deep"]


def test_a_tombstone_clears_a_skipped_key_and_a_bad_value_hides_a_good_one() -> None:
    f = follower([(b"BAD-KEY", rule("victim")), (b"good", rule("good"))])
    f.read_to_end()
    consumer: Any = f._consumer
    consumer.records += [(b"BAD-KEY", None), (b"good", b"{broken")]
    changed = f.read_to_end()
    assert f.skipped == {"good": "rule: not JSON: JSONDecodeError"} and changed == {"good": None}


def test_the_follower_leaves_no_fetch_waiting_between_rounds() -> None:
    """An assigned consumer keeps a fetch waiting at the broker, and the next round's end-offset query waited
    behind it (0.5 s per round of the rule manager): after a read nothing stays assigned, and a round with nothing
    new assigns nothing."""
    f = follower([(b"good", rule("good"))])
    consumer: Any = f._consumer
    assert set(f.read_to_end()) == {"good"} and not consumer.assigned and consumer.assigns == 1
    assert f.read_to_end() == {} and consumer.assigns == 1
    consumer.records.append((b"later", rule("later")))
    assert set(f.read_to_end()) == {"later"} and not consumer.assigned and consumer.assigns == 2


def test_statuses_are_validated_and_bounded() -> None:
    ok = RuleStatus("r", 1, "running", rows_per_s=2.0).to_json()
    forged = [b'{"name": "r", "version": 1, "state": "running", "rows_per_s": 1e999}',
              b'{"name": "r", "version": 1, "state": "owned"}',
              b'{"name": "r", "version": 1, "state": "failed", "error": "' + b"x" * 5000 + b'"}',
              b'{"name": "r", "version": 1, "state": "running", "lag": -5}',
              b'{"name": "r", "version": 1, "state": "running", "updated_at": 99999999999999999999}']
    records: list[tuple[bytes | None, bytes | None]] = [(b"r", v) for v in forged]
    f = follower([*records, (b"s", ok)], RuleStatus.from_json)
    f.read_to_end()
    assert set(f.latest) == set() and "r" in f.skipped  # "s" names rule "r": skipped too
    f = follower([(b"r", ok)], RuleStatus.from_json)
    f.read_to_end()
    assert f.latest["r"].rows_per_s == 2.0


def test_a_topic_without_a_leader_yet_is_retried() -> None:
    f = follower([(b"good", rule("good"))], refusals=3)
    assert set(f.read_to_end()) == {"good"}
    stuck = follower([(b"good", rule("good"))], refusals=10_000)
    stuck.timeout_s = 0.5
    with pytest.raises(StoreError, match="end offset"):
        stuck.read_to_end()


@dataclass
class FakeAdmin:
    leaderless: int  # metadata answers before partition 0 has a leader
    calls: int = field(default=0)

    def list_topics(self, timeout: float) -> Any:
        self.calls += 1
        leader = -1 if self.calls <= self.leaderless else 1
        partition = SimpleNamespace(leader=leader, error=None)
        return SimpleNamespace(topics={"t": SimpleNamespace(error=None, partitions={0: partition})})


def test_topic_creation_waits_for_a_leader() -> None:
    admin = FakeAdmin(leaderless=3)
    wait_for_leaders(admin, ["t"], timeout_s=10)  # type: ignore[arg-type]
    assert admin.calls == 4
    with pytest.raises(StoreError, match="no partition leader"):
        wait_for_leaders(FakeAdmin(leaderless=10_000), ["t"], timeout_s=0.3)  # type: ignore[arg-type]
