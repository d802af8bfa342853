"""Unit tests of the rule manager against hostile rules (fakes behind its protocols; the real thing runs in
test_hostile_stack.py): a rule the sandbox refuses at start is failed for good, a stalled rule is quarantined, a
rule the pipeline died in is quarantined at the next start and stays so until applied again, a rule over the
limit starts when a slot frees, orphan checkpoints are removed at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from spark_pipeline.rules import model
from spark_pipeline.rules.model import Rule, RuleError
from spark_pipeline.snapshot import SchemaSnapshot, WriterSchema
from tests.spark_pipeline.rules.test_runtime_manager import FakeLauncher, FakeQuery, Harness, rule

pytestmark = pytest.mark.unit


@dataclass
class MemoryJournal:
    running: dict[str, str] | None = None  # what the last run left (None: a clean stop)
    flying: set[str] = field(default_factory=set)
    held: dict[str, tuple[str, str]] = field(default_factory=dict)
    orphans_seen: list[set[str]] = field(default_factory=list)
    clean: bool = False

    def unclean_running(self) -> dict[str, str]:
        return dict(self.running or {})

    def record_running(self, running: Mapping[str, str]) -> None:
        self.running, self.clean = dict(running), False

    def clean_stop(self) -> None:
        self.running, self.clean = None, True

    def in_flight(self, rule: Rule) -> bool:
        return rule.name in self.flying

    def quarantined(self) -> dict[str, tuple[str, str]]:
        return dict(self.held)

    def quarantine(self, rule: Rule, reason: str) -> None:
        self.held[rule.name] = (rule.checkpoint_id, reason)

    def release(self, name: str) -> None:
        self.held.pop(name, None)

    def drop_orphans(self, rules: Mapping[str, Rule]) -> list[str]:
        self.orphans_seen.append(set(rules))
        return []


class RefusingLauncher(FakeLauncher):
    def start(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> Any:
        if rule.name.startswith("evil"):
            raise RuleError(model.FORBIDDEN_FUNCTION, 1, "function reflect is not allowed: calls any Java method")
        return super().start(rule, snapshot, rules)


class BusyQuery(FakeQuery):
    """A query whose current micro-batch never ends."""

    status: ClassVar[dict[str, Any]] = {"message": "Processing new data", "isDataAvailable": True,
                                         "isTriggerActive": True}


def harness(journal: MemoryJournal, **settings: Any) -> Harness:
    h = Harness(**settings)
    h.manager.journal = journal
    return h


def test_a_rule_refused_at_start_is_failed_for_good() -> None:
    h = Harness(backoff_s=1.0)
    h.manager.launcher = h.launcher = RefusingLauncher()
    h.apply(rule("evil"), rule("good"))
    h.tick()
    status = h.statuses.last("evil")
    assert status.state == "failed" and status.retry_at is None
    assert status.error == "refused at start: line 1: forbidden_function: function reflect is not allowed: calls " \
                           "any Java method"
    for _ in range(5):
        h.tick(60)
    assert [q.name for q in h.launcher.started] == ["rule.good.v1"]  # never retried


def test_a_stalled_rule_is_quarantined_and_stays_so() -> None:
    journal = MemoryJournal()
    h = harness(journal, max_batch_s=30.0)
    h.apply(rule("slow"), rule("fine"))
    h.tick()
    slow = next(q for q in h.launcher.started if q.name == "rule.slow.v1")
    slow.__class__ = BusyQuery
    h.tick(10)  # the manager sees the batch running from here
    h.tick(25)
    assert h.statuses.last("slow").state == "starting"
    h.tick(10)  # 35 s in the same batch
    status = h.statuses.last("slow")
    assert slow.stopped and status.state == "quarantined" and status.error is not None
    assert status.error.startswith("stalled: a micro-batch ran over 30 s") and status.retry_at is None
    assert journal.held["slow"][0] == "v1" and not any(q.stopped for q in h.launcher.started if q is not slow)
    for _ in range(3):
        h.tick(600)
    assert len(h.launcher.started) == 2  # not retried
    h.manager.stop()
    assert h.statuses.last("slow").state == "quarantined" and journal.clean


def test_a_rule_the_pipeline_died_in_is_quarantined_at_the_next_start() -> None:
    journal = MemoryJournal(running={"crashy": "v1", "bystander": "v1", "other": "v1"}, flying={"crashy"})
    h = harness(journal)
    h.apply(rule("crashy"), rule("bystander"), rule("other", version=2))
    h.tick()
    assert [q.name for q in h.launcher.started] == ["rule.bystander.v1", "rule.other.v2"]
    status = h.statuses.last("crashy")
    assert status.state == "quarantined" and status.error is not None and status.error.startswith("crashed")
    assert journal.orphans_seen == [{"crashy", "bystander", "other"}]
    assert journal.running == {"bystander": "v1", "other": "v2"}  # what a crash now would leave

    again = harness(journal)  # a later restart: still quarantined, without new evidence
    again.apply(rule("crashy"), rule("bystander"), rule("other", version=2))
    again.tick()
    assert again.statuses.last("crashy").state == "quarantined"
    assert "crashy" not in {q.name.split(".")[1] for q in again.launcher.started}

    again.apply(rule("crashy", version=2))  # applied again: a new version runs, the quarantine is lifted
    again.tick()
    assert again.launcher.started[-1].name == "rule.crashy.v2" and "crashy" not in journal.held


def test_deleting_a_quarantined_rule_releases_it() -> None:
    journal = MemoryJournal(held={"x": ("v1", "stalled: ...")})
    h = harness(journal)
    h.apply(rule("x"))
    h.tick()
    assert h.statuses.last("x").state == "quarantined" and not h.launcher.started
    h.source.pending["x"] = None
    h.tick()
    assert "x" not in journal.held and h.statuses.deleted == ["x"]


def test_a_rule_over_the_limit_starts_when_a_slot_frees() -> None:
    h = Harness(max_rules=2)
    h.apply(rule("a", applied_at=1), rule("b", applied_at=2), rule("c", applied_at=3))
    h.tick()
    assert [q.name for q in h.launcher.started] == ["rule.a.v1", "rule.b.v1"]
    waiting = h.statuses.last("c")
    assert waiting.state == "failed" and waiting.error is not None and waiting.error.startswith("too_many_rules")
    h.source.pending["a"] = None
    h.tick()
    assert h.launcher.started[-1].name == "rule.c.v1" and h.statuses.last("c").state == "starting"


def test_checkpoint_ids_are_unique_per_apply() -> None:
    old = Rule("r", "SELECT 1", 1, 1, "t", 5, uid="aaaa")
    new = Rule("r", "SELECT 2", 1, 2, "t", 5, uid="bbbb")
    legacy = Rule("r", "SELECT 1", 3, 1, "t", 5)
    assert (old.checkpoint_id, new.checkpoint_id, legacy.checkpoint_id) == ("v1-aaaa", "v1-bbbb", "v3")
    assert Rule.from_json(new.to_json()) == new and Rule.from_json(legacy.to_json()) == legacy


def test_every_refusal_code_is_documented() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[3] / "docs" / "rules.md").read_text()
    assert all(f"| `{code}` |" in docs for code in model.CODES), [c for c in model.CODES if f"| `{c}` |" not in docs]


def test_a_schema_change_does_not_restart_a_quarantined_rule() -> None:
    from tests.spark_pipeline.rules.test_runtime_manager import snap

    h = harness(MemoryJournal(held={"x": ("v1", "stalled: ...")}), registry_poll_s=5.0)
    h.apply(rule("x"), rule("y"))
    h.tick()
    h.registry.append(snap(1, 2))
    h.tick(10)
    assert [q.name for q in h.launcher.started] == ["rule.y.v1", "rule.y.v1"]  # y restarted, x left alone
    assert h.statuses.last("x").state == "quarantined"


class ViewsLauncher(FakeLauncher):
    """Refuses a rule naming a view (event type) its snapshot lacks, as the sandbox gate does."""

    def start(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> Any:
        if rule.name.startswith("probe") and "headwater.events.probe" not in snapshot.readers:
            raise RuleError(model.UNKNOWN_VIEW, 1, "[TABLE_OR_VIEW_NOT_FOUND] The view `probe` cannot be found")
        return super().start(rule, snapshot, rules)


def with_probe(s: SchemaSnapshot, schema_id: int) -> SchemaSnapshot:
    probe = WriterSchema(schema_id, "headwater.events.probe", 1, "{}")
    return SchemaSnapshot({**s.writers, schema_id: probe}, {**s.readers, probe.subject: probe})


def test_a_rule_naming_a_type_registered_after_the_last_poll_starts_over_the_new_schemas() -> None:
    h = Harness(registry_poll_s=300.0)
    h.manager.launcher = h.launcher = ViewsLauncher()
    h.apply(rule("other"))
    h.tick()
    h.registry.append(with_probe(h.registry[-1], 9))  # registered, then applied, before the manager polls again
    h.apply(rule("probe"))
    h.tick()
    assert h.statuses.last("probe").state == "starting"
    assert [q.name for q in h.launcher.started] == ["rule.other.v1", "rule.other.v1", "rule.probe.v1"]
    assert all("headwater.events.probe" in s.readers for s in h.launcher.snapshots[1:])  # one snapshot for all


def test_a_rule_naming_a_type_the_registry_lacks_is_failed_for_good() -> None:
    h = Harness(registry_poll_s=300.0)
    h.manager.launcher = h.launcher = ViewsLauncher()
    h.apply(rule("probe"))
    for _ in range(5):
        h.tick(60)
    status = h.statuses.last("probe")
    assert status.state == "failed" and status.retry_at is None and "unknown_view" in (status.error or "")
    assert h.launcher.started == []
