"""Unit tests of the rule manager's decisions (start, replace, delete, fail and retry with backoff, limits,
schema changes, statuses) with a fake launcher and fake queries; the real thing runs in test_runtime_stack.py."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from spark_pipeline.rules.manager import RuleManager, Settings, Started
from spark_pipeline.rules.model import Rule, RuleStatus
from spark_pipeline.rules.progress import error_chain, health
from spark_pipeline.snapshot import SchemaSnapshot, WriterSchema

pytestmark = pytest.mark.unit

SCHEMA = StructType([StructField("event_type", StringType()), StructField("n", LongType())])


class FakeQuery:
    def __init__(self, name: str) -> None:
        self.name = name
        self.isActive = True
        self.error: Exception | None = None
        self.lastProgress: dict[str, Any] | None = None
        self.stopped = False

    def exception(self) -> Exception | None:
        return self.error

    def stop(self) -> None:
        self.stopped, self.isActive = True, False

    def fail(self, error: Exception) -> None:
        self.error, self.isActive = error, False

    def progress(self, batch: int, rows: int = 10, state_rows: int = 0) -> None:
        self.lastProgress = {"batchId": batch, "numInputRows": rows, "processedRowsPerSecond": 20.0,
                             "timestamp": "2026-11-23T23:00:00.000Z",
                             "stateOperators": [{"numRowsTotal": state_rows}],
                             "sources": [{"endOffset": {"headwater.events": {"0": 90, "1": 100}}}]}


@dataclass
class FakeLauncher:
    started: list[FakeQuery] = field(default_factory=list)
    snapshots: list[SchemaSnapshot] = field(default_factory=list)
    dropped: list[tuple[str, str | None]] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    schema: StructType = SCHEMA
    checkpoints: set[tuple[str, str]] = field(default_factory=set)
    holds: int = 0
    held_starts: list[int] = field(default_factory=list)  # how many queries had started at the end of each hold

    def start(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> Started:
        if rule.name in self.refuse:
            raise RuntimeError(f"cannot plan {rule.name}\njava stack trace")
        ck = rule.checkpoint_id
        fresh = (rule.name, ck) not in self.checkpoints and any(n == rule.name for n, _ in self.checkpoints)
        self.checkpoints.add((rule.name, ck))
        q = FakeQuery(f"rule.{rule.name}.v{rule.version}")
        self.started.append(q)
        self.snapshots.append(snapshot)
        return Started(q, SCHEMA, fresh, "microbatch", f"{rule.name} is a test rule")

    def output_schema(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> StructType:
        return self.schema

    def drop_checkpoints(self, name: str, keep: str | None = None) -> None:
        self.dropped.append((name, keep))
        self.checkpoints = {(n, v) for n, v in self.checkpoints if n != name or v == keep}

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Records which starts happened inside a hold (every start of a round should)."""
        self.holds += 1
        try:
            yield
        finally:
            self.held_starts.append(len(self.started))


@dataclass
class FakeSource:
    pending: dict[str, Rule | None] = field(default_factory=dict)

    def read_to_end(self) -> Mapping[str, Rule | None]:
        out, self.pending = self.pending, {}
        return out


@dataclass
class FakeStatuses:
    puts: list[RuleStatus] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def put_status(self, status: RuleStatus) -> None:
        self.puts.append(status)

    def delete_status(self, name: str) -> None:
        self.deleted.append(name)

    def last(self, name: str) -> RuleStatus:
        return [s for s in self.puts if s.name == name][-1]


class Marks:
    def high(self, topic: str, partition: int) -> int | None:
        return 100


class UnknownId(Exception):
    """Like pyspark's CapturedException of Spark's raise_error with the decoder's marker."""

    def getCondition(self) -> str:
        return "USER_RAISED_EXCEPTION"

    def getMessageParameters(self) -> dict[str, str]:
        return {"errorMessage": "HEADWATER_UNKNOWN_SCHEMA_ID=7"}


def snap(*ids: int) -> SchemaSnapshot:
    writers = {i: WriterSchema(i, "headwater.events.page_view", n, "{}") for n, i in enumerate(ids, 1)}
    return SchemaSnapshot(writers, {"headwater.events.page_view": writers[max(ids)]})


def rule(name: str, version: int = 1, applied_at: int = 1) -> Rule:
    return Rule(name, f"SELECT {version}", version, applied_at, "test", 5, ("event_type",), True)


class Harness:
    def __init__(self, **settings: Any) -> None:
        self.now = 1000.0
        self.source, self.launcher, self.statuses = FakeSource(), FakeLauncher(), FakeStatuses()
        self.registry = [snap(1)]
        self.manager = RuleManager(self.source, self.launcher, self.statuses, lambda bad: self.registry[-1],
                                   watermarks=Marks(), settings=Settings(**settings), clock=lambda: self.now)

    def apply(self, *rules: Rule) -> None:
        self.source.pending.update({r.name: r for r in rules})

    def tick(self, advance: float = 1.0) -> None:
        self.now += advance
        self.manager.tick()


def test_rules_start_report_running_and_stop_when_deleted() -> None:
    h = Harness()
    h.apply(rule("a"), rule("b"))
    h.tick()
    assert [q.name for q in h.launcher.started] == ["rule.a.v1", "rule.b.v1"]
    assert h.launcher.held_starts == [2]  # both started in one hold: a pack they share restarts once, after it
    assert h.statuses.last("a").state == "starting"
    h.launcher.started[0].progress(0)
    h.tick()
    a = h.statuses.last("a")
    assert (a.state, a.rows_per_s, a.lag, a.fresh_start) == ("running", 20.0, 10, False)
    assert a.last_batch_at == 1_795_474_800_000
    assert (a.tier, a.tier_reason) == ("microbatch", "a is a test rule")  # `rules list` says where and why
    h.source.pending["b"] = None
    h.tick()
    assert h.launcher.started[1].stopped and h.statuses.deleted == ["b"] and ("b", None) in h.launcher.dropped
    assert not h.launcher.started[0].stopped


def test_a_replaced_rule_starts_fresh_and_says_so() -> None:
    h = Harness()
    h.apply(rule("a"))
    h.tick()
    h.apply(rule("a", version=2))
    h.tick()
    first, second = h.launcher.started
    assert first.stopped and second.name == "rule.a.v2" and not second.stopped
    status = h.statuses.last("a")
    assert (status.version, status.fresh_start) == (2, True)
    assert ("a", "v2") in h.launcher.dropped  # the old version's checkpoint removed, the new one kept


def test_a_failing_rule_is_isolated_and_retried_with_backoff() -> None:
    h = Harness(backoff_s=5.0, backoff_max_s=12.0)
    h.apply(rule("good"), rule("bad"))
    h.tick()
    bad, good = h.launcher.started
    bad.fail(RuntimeError("[CAST_INVALID_INPUT] The value 'page_view' cannot be cast to INT\n\tat org..."))
    h.tick()
    status = h.statuses.last("bad")
    assert status.state == "failed" and status.error is not None and "CAST_INVALID_INPUT" in status.error
    assert status.retry_at == int((h.now + 5.0) * 1000) and "\tat" not in status.error
    assert good.isActive and not good.stopped and h.statuses.last("good").state == "starting"
    h.tick(4.0)
    assert len(h.launcher.started) == 2  # not before retry_at
    h.tick(1.5)
    retried = h.launcher.started[-1]
    assert retried.name == "rule.bad.v1" and not h.statuses.last("bad").fresh_start  # same checkpoint
    retried.fail(RuntimeError("again"))
    h.tick()
    assert h.statuses.last("bad").retry_at == int((h.now + 10.0) * 1000)  # doubled
    h.tick(10.5)
    h.launcher.started[-1].fail(RuntimeError("again"))
    h.tick()
    assert h.statuses.last("bad").retry_at == int((h.now + 12.0) * 1000)  # capped


def test_a_rule_that_cannot_start_is_failed_not_raised() -> None:
    h = Harness()
    h.launcher.refuse.add("x")
    h.apply(rule("x"), rule("y"))
    h.tick()
    x = h.statuses.last("x")
    assert x.state == "failed" and x.error == "RuntimeError: cannot plan x" and x.retry_at is not None
    assert h.statuses.last("y").state == "starting"


def test_limits_rules_per_pipeline_and_state_rows() -> None:
    h = Harness(max_rules=2, max_state_rows=100)
    h.apply(rule("a", applied_at=1), rule("b", applied_at=2), rule("c", applied_at=3))
    h.tick()
    assert [q.name for q in h.launcher.started] == ["rule.a.v1", "rule.b.v1"]
    c = h.statuses.last("c")
    assert c.state == "failed" and c.error is not None and c.error.startswith("too_many_rules") and c.retry_at is None
    h.launcher.started[0].progress(3, state_rows=101)
    h.tick()
    a = h.statuses.last("a")
    assert a.state == "failed" and a.error is not None and a.error.startswith("state_limit") and a.retry_at is None
    assert h.launcher.started[0].stopped and not h.launcher.started[1].stopped


def test_unknown_schema_ids_restart_rules_from_their_checkpoints() -> None:
    h = Harness()
    h.apply(rule("a"))
    h.tick()
    h.registry.append(snap(1, 7))
    h.launcher.started[0].fail(UnknownId("unknown id"))
    h.tick()
    assert len(h.launcher.started) == 2 and h.statuses.last("a").state == "starting"
    assert set(h.launcher.snapshots[-1].writers) == {1, 7} and not h.statuses.last("a").fresh_start


def test_a_new_version_changing_the_output_keeps_the_old_reader() -> None:
    h = Harness(registry_poll_s=10.0)
    h.apply(rule("a"))
    h.tick()
    h.registry.append(snap(1, 7))
    h.launcher.schema = StructType([*SCHEMA.fields, StructField("extra", StringType())])
    h.tick(11.0)
    last = h.launcher.snapshots[-1]
    assert set(last.writers) == {1, 7} and last.readers["headwater.events.page_view"].schema_id == 1
    h.launcher.schema = SCHEMA
    h.registry.append(snap(1, 7, 9))
    h.tick(11.0)
    assert h.launcher.snapshots[-1].readers["headwater.events.page_view"].schema_id == 9


def test_stop_stops_every_rule_and_says_so() -> None:
    h = Harness()
    h.apply(rule("a"))
    h.tick()
    h.manager.stop()
    assert h.launcher.started[0].stopped and h.statuses.last("a").state == "stopped"


def test_health_and_error_chain_read_pyspark_shapes() -> None:
    class Cause(Exception):
        pass

    outer = RuntimeError("query failed\nstack")
    outer._cause = Cause("root cause")  # type: ignore[attr-defined]
    assert error_chain(outer) == "Cause: root cause <- RuntimeError: query failed"
    wrapper = RuntimeError("Job aborted: org.apache.kafka.TimeoutException: Topic t not present\n\tat x")
    wrapper._cause = RuntimeError("org.apache.kafka.TimeoutException: Topic t not present")  # type: ignore[attr-defined]
    assert error_chain(wrapper) == "org.apache.kafka.TimeoutException: Topic t not present"
    assert len(error_chain(RuntimeError("x" * 5000))) <= 600
    assert health(None, Marks()).batch_id is None
    h = health({"batchId": 4, "sources": [{"endOffset": '{"t": {"0": 95}}'}]}, Marks())
    assert (h.batch_id, h.lag) == (4, 5)


def test_a_query_whose_error_cannot_be_read_is_failed_and_the_round_goes_on() -> None:
    class Unreadable(FakeQuery):
        def exception(self) -> Exception | None:
            raise TypeError("Logger._log() got an unexpected keyword argument 'errorClass'")

    h = Harness()
    h.apply(rule("a"), rule("b"))
    h.tick()
    broken = Unreadable("rule.a.v1")
    broken.isActive = False
    h.manager.slots["a"].query = broken
    h.launcher.started[1].progress(0)
    h.tick()
    assert h.statuses.last("a").state == "failed" and "errorClass" in (h.statuses.last("a").error or "")
    assert h.statuses.last("b").state == "running"
