"""The pack's bookkeeping (spark_pipeline/rules/packed.py) with a fake query: membership changes gathered into one
restart, each rule's query-like view, failures reported to every member, removal and shutdown."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql.types import StructType

from spark_pipeline.rules.model import Rule
from spark_pipeline.rules.packed import Member, Pack, StalePlan
from tests.support.wait import wait_for

pytestmark = pytest.mark.unit


@dataclass
class FakeQuery:
    """What the pack reads of a StreamingQuery."""

    members: list[str]
    name: str = "rules.realtime"
    runId: str = field(default_factory=lambda: str(time.monotonic_ns()))
    isActive: bool = True
    error: object | None = None
    lastProgress: dict[str, Any] | None = field(default_factory=lambda: {"batchId": 3})
    recentProgress: list[dict[str, Any]] = field(default_factory=list)

    def exception(self) -> object | None:
        return self.error

    def stop(self) -> None:
        self.isActive = False


@dataclass
class Starter:
    started: list[FakeQuery] = field(default_factory=list)
    fail_with: Exception | None = None
    changed: threading.Condition = field(default_factory=threading.Condition)

    def __call__(self, members: list[Member]) -> FakeQuery:
        if self.fail_with is not None:
            raise self.fail_with
        q = FakeQuery(sorted(m.rule.name for m in members))
        with self.changed:
            self.started.append(q)
            self.changed.notify_all()
        return q

    def wait(self, check: Callable[[], bool], timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while not check():
                left = deadline - time.monotonic()
                assert left > 0, f"timed out; started {self.started}"
                self.changed.wait(left)


def member(name: str, context: int = 1, version: int = 1) -> Member:
    rule = Rule(name=name, sql="SELECT 1", version=version, applied_at=0, applied_by="t", output_schema_id=1)
    return Member(rule, None, StructType([]), context)  # type: ignore[arg-type]


@pytest.fixture
def starter() -> Starter:
    return Starter()


@pytest.fixture
def pack(starter: Starter) -> Iterator[Pack]:
    p = Pack("rules.realtime", starter, debounce_s=0.05)
    try:
        yield p
    finally:
        p.close()


def test_rules_added_together_start_one_query(pack: Pack, starter: Starter) -> None:
    views = [pack.add(member(n)) for n in ("a", "b", "c")]
    assert all(v.isActive for v in views)  # pending: starting
    starter.wait(lambda: len(starter.started) == 1)
    wait_for("the pack on the started query", lambda: pack.query() is starter.started[0], 10, interval_s=0.01)
    assert starter.started[0].members == ["a", "b", "c"]
    assert [v.name for v in views] == ["rule.a.v1", "rule.b.v1", "rule.c.v1"]
    assert all(v.isActive and v.exception() is None and v.runId == starter.started[0].runId for v in views)
    assert views[0].lastProgress == {"batchId": 3}
    starter.started[0].lastProgress = None  # inside its first real-time batch: running, no report yet
    assert views[0].lastProgress == {"batchId": -1}


def test_a_replaced_rule_reports_progress_only_once_the_query_runs_the_new_version(starter: Starter) -> None:
    gate = threading.Event()

    def slow(members: list[Member]) -> FakeQuery:
        assert gate.wait(10)
        return starter(members)

    p = Pack("rules.realtime", slow, debounce_s=0.05)
    try:
        gate.set()
        first = p.add(member("a"))
        wait_for("the first version running", lambda: first.lastProgress == {"batchId": 3}, 10, interval_s=0.01)
        gate.clear()  # the restart for the second version waits
        first.stop()
        second = p.add(member("a", version=2))
        # Until the restart, the old query runs on with version 1's condition: none of it is version 2's progress.
        assert p.query() is starter.started[0] and second.isActive and second.lastProgress is None
        time.sleep(0.3)  # the restart stopped the old query and waits to start the new one
        assert second.isActive and second.lastProgress is None
        gate.set()
        wait_for("the second version running", lambda: second.lastProgress == {"batchId": 3}, 10, interval_s=0.01)
        assert len(starter.started) == 2 and p.query() is starter.started[1]
    finally:
        gate.set()
        p.close()


def test_a_removed_rule_restarts_the_query_without_it(pack: Pack, starter: Starter) -> None:
    a, b = pack.add(member("a")), pack.add(member("b"))
    starter.wait(lambda: len(starter.started) == 1)
    a.stop()
    starter.wait(lambda: len(starter.started) == 2)
    wait_for("the first query stopped for the second",
             lambda: not starter.started[0].isActive and pack.query() is starter.started[1], 10, interval_s=0.01)
    assert starter.started[1].members == ["b"]
    assert not a.isActive and b.isActive
    b.stop()
    wait_for("no query", lambda: pack.query() is None, 10, interval_s=0.01)
    assert not starter.started[1].isActive and len(starter.started) == 2  # nothing left to run


def test_a_held_pack_restarts_once_after_the_hold_for_every_change_made_in_it(pack: Pack, starter: Starter) -> None:
    """A manager's round places its rules one after another (each a plan's time, longer than the debounce)."""
    pack.hold()
    views = []
    for name in ("a", "b", "c"):
        views.append(pack.add(member(name)))
        time.sleep(0.15)  # three debounces
    assert starter.started == [] and all(v.isActive for v in views)  # pending, starting
    pack.release()
    starter.wait(lambda: len(starter.started) == 1)
    time.sleep(0.2)
    assert len(starter.started) == 1 and starter.started[0].members == ["a", "b", "c"]
    for _ in range(5):  # holds without a change (the manager's idle rounds) restart nothing
        pack.hold()
        time.sleep(0.06)
        pack.release()
    time.sleep(0.2)
    assert len(starter.started) == 1


def test_rounds_held_while_a_restart_runs_do_not_restart_it_again(starter: Starter) -> None:
    def slow(members: list[Member]) -> FakeQuery:
        time.sleep(0.3)  # a real start takes 0.2-0.8 s; the manager's rounds go on meanwhile
        return starter(members)

    p = Pack("rules.realtime", slow, debounce_s=0.02)
    try:
        p.add(member("a"))
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # idle rounds every 50 ms, during the start and after it
            p.hold()
            time.sleep(0.01)
            p.release()
            time.sleep(0.04)
        assert len(starter.started) == 1
    finally:
        p.close()


def test_a_pack_forgets_its_checkpoint_when_its_last_rule_leaves(starter: Starter) -> None:
    """Its next rule then starts from the configured offsets instead of replaying every event since the last
    batch end (hours of them, when the pack stood empty)."""
    resets: list[bool] = []  # per reset: whether a query still ran then (it must be stopped first)
    p = Pack("rules.realtime", starter, debounce_s=0.05, reset=lambda: resets.append(
        any(q.isActive for q in starter.started)))
    try:
        a, b = p.add(member("a")), p.add(member("b"))
        starter.wait(lambda: len(starter.started) == 1)
        a.stop()
        starter.wait(lambda: len(starter.started) == 2)
        assert resets == []  # a rule left, another runs on from the checkpoint
        b.stop()
        wait_for("the checkpoint forgotten", lambda: resets == [False], 10, interval_s=0.01)
        c = p.add(member("c"))
        starter.wait(lambda: len(starter.started) == 3)
        wait_for("the next rule running", lambda: c.lastProgress == {"batchId": 3}, 10, interval_s=0.01)
        assert resets == [False]
    finally:
        p.close()
    assert resets == [False]  # a shutdown keeps the checkpoint (the pipeline resumes from it)


def test_a_failed_query_is_every_members_failure(pack: Pack, starter: Starter) -> None:
    a, b = pack.add(member("a")), pack.add(member("b"))
    starter.wait(lambda: len(starter.started) == 1)
    wait_for("the pack on the started query", lambda: pack.query() is starter.started[0], 10, interval_s=0.01)
    boom = RuntimeError("kafka down")
    starter.started[0].error, starter.started[0].isActive = boom, False
    assert (a.isActive, a.exception(), b.isActive, b.exception()) == (False, boom, False, boom)
    assert a.lastProgress is None  # a failed member has no progress to report


def test_a_query_that_cannot_start_fails_its_members(pack: Pack, starter: Starter) -> None:
    starter.fail_with = RuntimeError("cannot plan")
    a = pack.add(member("a"))
    wait_for("the view inactive", lambda: not a.isActive, 10, interval_s=0.01)
    assert a.exception() is starter.fail_with


def test_only_the_newest_context_runs_and_the_members_left_out_say_so(pack: Pack, starter: Starter) -> None:
    old, new = pack.add(member("old", context=1)), pack.add(member("new", context=2))
    starter.wait(lambda: len(starter.started) == 1)
    assert starter.started[0].members == ["new"]
    wait_for("the pack on the started query", lambda: pack.query() is starter.started[0], 10, interval_s=0.01)
    assert new.isActive and not old.isActive  # never "running" while its rows are not evaluated
    err = old.exception()
    assert isinstance(err, StalePlan) and "rule old was planned over schema versions" in str(err)
    old.stop()  # the manager fails and retries it: leaving needs no restart of the query that never ran it
    time.sleep(0.3)
    assert len(starter.started) == 1 and new.isActive
    pack.add(member("old", context=2))  # the retry, planned over the newest views, joins
    starter.wait(lambda: len(starter.started) == 2)
    assert starter.started[1].members == ["new", "old"]


def test_close_stops_the_query(starter: Starter) -> None:
    p = Pack("rules.realtime", starter, debounce_s=0.05)
    p.add(member("a"))
    starter.wait(lambda: len(starter.started) == 1)
    wait_for("a query", lambda: p.query() is not None, 10, interval_s=0.01)
    p.close()
    assert not starter.started[0].isActive and p.query() is None


def test_state_tells_members_running_pending_and_the_start_error(pack: Pack, starter: Starter) -> None:
    pack.add(member("b"))
    pack.add(member("a"))
    assert pack.state().pending and pack.state().members == ("a", "b")
    starter.wait(lambda: len(starter.started) == 1)
    wait_for("the restart done", lambda: not pack.state().pending, 10, interval_s=0.01)
    st = pack.state()
    assert (st.running, st.error, st.query) == (("a", "b"), None, starter.started[0])
    starter.fail_with = RuntimeError("no slots")
    pack.add(member("c"))
    wait_for("the failed start", lambda: pack.state().error is not None and not pack.state().pending, 10,
             interval_s=0.01)
    st = pack.state()
    assert st.running == ("a", "b", "c") and st.query is None and str(st.error) == "no slots"
