"""The rule manager inside the running pipeline: follows the rules topic and keeps one streaming query per rule.

A background thread (`RuleManager.start()`) reads `_headwater_rules` from its beginning, then every `poll_s`:
starts the query of a new rule, replaces the query of a changed one (new version: fresh checkpoint, said in the
status and the log), stops a deleted one (its checkpoints removed); watches every query (a failure marks the
rule `failed` with its cause chain and retries it with exponential backoff; a rule whose state outgrows
MAX_STATE_ROWS is stopped and failed, not retried); follows the registry (a new schema version restarts the
rules from their checkpoints, see `_adopt`); and writes each rule's `RuleStatus` to `_headwater_rules_status`
every `status_s` and on every change. The built-in queries never depend on it: whatever a rule does, the
manager only ever stops or starts rule queries. docs/rules-runtime.md describes the behaviour.

Hardening (docs/rules.md, "What a rule may call"; the `Journal` seam, journal.CheckpointJournal):
- every start passes the sandbox gate (the launcher runs analyse.analyse): a refused rule is failed with the
  reason and never retried;
- quarantine: a rule whose micro-batch ran longer than `max_batch_s` (it froze its cores) is stopped and
  quarantined; at start, a rule the previous run left in a micro-batch when it died (crash, OOM) is quarantined
  too, so one rule cannot crash-loop the pipeline. A quarantined rule is not started until it is applied again
  (a new checkpoint id) or deleted; its status says `quarantined` and why;
- a rule over `max_rules` waits (failed, `too_many_rules`) and starts when a slot frees;
- at start, checkpoint folders no stored rule version owns are removed (a rule deleted or re-applied while the
  pipeline was down never resumes an old checkpoint: ids are per apply, `Rule.checkpoint_id`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql.types import StructType

from spark_pipeline.rules.model import (
    MAX_RULES,
    MAX_STATE_ROWS,
    TOO_MANY_RULES,
    UNKNOWN_VIEW,
    Rule,
    RuleError,
    RuleStatus,
    State,
)
from spark_pipeline.rules.progress import ERROR_CHARS, HighWatermarks, error_chain, health
from spark_pipeline.rules.quarantine import STALLED, Journal, NoJournal, in_one_batch_since, recover
from spark_pipeline.snapshot import SchemaSnapshot
from spark_pipeline.supervisor import unknown_schema_ids

log = logging.getLogger("spark_pipeline.rules")


@dataclass(frozen=True)
class Started:
    """A started rule query and what it was built from."""

    query: Any  # a pyspark StreamingQuery
    schema: StructType  # the rule's result columns (before encoding)
    fresh_start: bool  # a new checkpoint while one of an older version existed
    tier: str | None = None  # where it runs (`tiers.REALTIME`, `tiers.MICROBATCH`) and why
    tier_reason: str | None = None


class Launcher(Protocol):
    """Starts rule queries (`launch.SparkLauncher`; a fake in unit tests). `start` raises RuleError when the
    sandbox refuses the rule; `drop_checkpoints` keeps the folder named `keep` (a `Rule.checkpoint_id`)."""

    def start(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> Started: ...
    def output_schema(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> StructType: ...
    def drop_checkpoints(self, name: str, keep: str | None = None) -> None: ...
    def holding(self) -> AbstractContextManager[None]:
        """Queries shared by several rules restart once for the changes made inside, at its end."""
        ...


class RuleSource(Protocol):
    """The rules topic: the rules changed since the last call (None: deleted); `store.TopicFollower`."""

    def read_to_end(self) -> Mapping[str, Rule | None]: ...


class StatusSink(Protocol):
    """The status topic (`store.RuleStore`)."""

    def put_status(self, status: RuleStatus) -> None: ...
    def delete_status(self, name: str) -> None: ...


@dataclass(frozen=True)
class Settings:
    """The manager's timings and limits (HEADWATER_RULE_* variables, docs/rules-runtime.md)."""

    poll_s: float = 0.25  # how often the rules topic and the queries are looked at (a new rule waits half of it)
    status_s: float = 5.0  # statuses are written this often, and on every change
    registry_poll_s: float = 30.0
    backoff_s: float = 5.0  # first retry delay; doubles per failure in a row
    backoff_max_s: float = 300.0
    max_rules: int = MAX_RULES
    max_state_rows: int = MAX_STATE_ROWS
    max_batch_s: float = 300.0  # a micro-batch running longer froze its task slots: the rule is quarantined


@dataclass
class Slot:
    """One rule as the manager runs it."""

    rule: Rule
    snapshot: SchemaSnapshot
    query: Any = None  # a StreamingQuery while started
    schema: StructType | None = None
    state: State = "starting"
    error: str | None = None
    failures: int = 0
    retry_at: float | None = None  # epoch s
    fresh_start: bool = False
    started_at: float = 0.0
    rows_per_s: float = 0.0
    last_batch_at: int | None = None
    batch_id: int | None = None
    lag: int | None = None
    changed: bool = True
    busy_since: float | None = None  # when the manager first saw the current micro-batch running
    busy_batch: int | None = None  # the last finished batch id then
    tier: str | None = None
    tier_reason: str | None = None
    unknown_view_in: object = None  # the snapshot fingerprint the rule last named an unknown view in


def _now() -> float:
    return time.time()


class RuleManager:
    """Keeps one query per stored rule; see the module doc. Thread-safe to `stop()` from any thread."""

    def __init__(self, source: RuleSource, launcher: Launcher, statuses: StatusSink,
                 take_snapshot: Callable[[frozenset[int]], SchemaSnapshot], *, watermarks: HighWatermarks,
                 settings: Settings = Settings(), clock: Callable[[], float] = _now,
                 journal: Journal | None = None) -> None:
        self.source, self.launcher, self.statuses = source, launcher, statuses
        self.journal: Journal = journal or NoJournal()
        self.quarantine: dict[str, tuple[str, str]] = {}  # name -> (checkpoint id, reason)
        self._recovered = False
        self._running: dict[str, str] = {}
        self.take_snapshot, self.watermarks, self.settings, self.clock = take_snapshot, watermarks, settings, clock
        self.rules: dict[str, Rule] = {}
        self.slots: dict[str, Slot] = {}
        self.bad_ids: frozenset[int] = frozenset()
        self.snapshot: SchemaSnapshot | None = None
        self._stop = threading.Event()
        self.stopped = False
        self._thread: threading.Thread | None = None
        self._next_status = 0.0
        self._next_registry = 0.0

    # -- the thread ---------------------------------------------------------------------------------------------
    def start(self) -> RuleManager:
        self._thread = threading.Thread(target=self._run, name="headwater-rule-manager", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 120.0) -> None:
        """Stop the thread, then every rule query (their checkpoints stay: the next start resumes them), and
        say so in their statuses."""
        self._stop.set()
        self.stopped = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        for slot in self.slots.values():
            self._stop_query(slot)
            if slot.state != "quarantined":
                slot.state, slot.rows_per_s, slot.retry_at = "stopped", 0.0, None
            self._put(slot)
        try:
            self.journal.clean_stop()
        except Exception as exc:
            log.warning("cannot record the clean stop of the rules: %s", exc)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # never let one bad round end the manager (the built-in queries go on anyway)
                log.exception("rule manager round failed; retrying")
            self._stop.wait(self.settings.poll_s)

    # -- one round ------------------------------------------------------------------------------------------------
    def tick(self) -> None:
        """One round: read rule changes, reconcile, watch the queries, follow the registry, report."""
        if self.snapshot is None:
            self.snapshot = self.take_snapshot(self.bad_ids)
            self._next_registry = self.clock() + self.settings.registry_poll_s
        for name, rule in self.source.read_to_end().items():
            if rule is None:
                self.rules.pop(name, None)
            else:
                self.rules[name] = rule
        if not self._recovered:
            self._recover()
        with self.launcher.holding():  # a pack restarts once per round, with every change of the round
            self._reconcile()
            unknown = self._watch()
            if unknown is not None or self.clock() >= self._next_registry:
                self._refresh(unknown or set())
            self._retry()
        self._record_running()
        self._report()

    def _recover(self) -> None:
        """Once, with every stored rule read (quarantine.recover)."""
        self.quarantine = recover(self.journal, self.rules)
        self._recovered = True

    def _record_running(self) -> None:
        running = {n: s.rule.checkpoint_id for n, s in self.slots.items()
                   if s.query is not None and s.state in ("starting", "running")}
        if running != self._running:
            try:
                self.journal.record_running(running)
                self._running = running
            except Exception as exc:  # the journal being away must not stop the rules
                log.warning("cannot record the running rules: %s", exc)

    def _reconcile(self) -> None:
        for name in [n for n in self.slots if n not in self.rules]:
            slot = self.slots.pop(name)
            self._stop_query(slot)
            self.launcher.drop_checkpoints(name)
            self._release(name)
            log.info("rule %s deleted: query stopped, checkpoints removed", name)
            try:
                self.statuses.delete_status(name)
            except Exception as exc:
                log.warning("cannot delete the status of rule %s: %s", name, exc)
        ordered = sorted(self.rules.values(), key=lambda r: (r.applied_at, r.name))
        allowed = {r.name for r in ordered[: self.settings.max_rules]}
        for rule in ordered:
            old = self.slots.get(rule.name)
            if old is not None and old.rule == rule:
                if old.state == "failed" and old.retry_at is None and rule.name in allowed and \
                        (old.error or "").startswith(TOO_MANY_RULES):
                    log.info("rule %s: a slot is free, starting it", rule.name)
                    self._launch(old)  # it waited for a slot
                continue
            assert self.snapshot is not None
            if old is not None:
                self._stop_query(old)
                log.info("rule %s replaced by version %d: stopping version %d", rule.name, rule.version,
                         old.rule.version)
            slot = self.slots[rule.name] = Slot(rule, self.snapshot)
            held = self.quarantine.get(rule.name)
            if held is not None and held[0] == rule.checkpoint_id:
                slot.state, slot.error, slot.retry_at = "quarantined", held[1], None
                log.warning("rule %s version %d is quarantined, not started: %s", rule.name, rule.version, held[1])
            elif held is not None:
                self._release(rule.name)  # applied again: a new version runs
                self._launch(slot)
            elif rule.name in allowed:
                self._launch(slot)
            else:
                self._fail(slot, f"{TOO_MANY_RULES}: over {self.settings.max_rules} rules in this pipeline; it "
                                 "starts when one is deleted", retry=False)

    def _release(self, name: str) -> None:
        if self.quarantine.pop(name, None) is not None:
            try:
                self.journal.release(name)
            except Exception as exc:
                log.warning("cannot release rule %s from quarantine: %s", name, exc)

    def _quarantine(self, slot: Slot, reason: str) -> None:
        """Stop the rule and keep it stopped until it is applied again (journal), its status saying why."""
        self._stop_query(slot)
        slot.state, slot.error, slot.retry_at, slot.changed = "quarantined", reason, None, True
        slot.rows_per_s, slot.busy_since = 0.0, None
        self.quarantine[slot.rule.name] = (slot.rule.checkpoint_id, reason)
        try:
            self.journal.quarantine(slot.rule, reason)
        except Exception as exc:
            log.warning("cannot record the quarantine of rule %s: %s", slot.rule.name, exc)
        log.error("rule %s version %d quarantined: %s", slot.rule.name, slot.rule.version, reason)

    def _launch(self, slot: Slot) -> None:
        try:
            started = self.launcher.start(slot.rule, slot.snapshot, self.rules)
        except RuleError as exc:  # the sandbox refused it: it never runs as it is (re-apply a changed rule)
            if self._newer_views(slot, exc):
                return
            self._fail(slot, f"refused at start: {exc.describe()}"[:ERROR_CHARS], retry=False)
            return
        except Exception as exc:
            self._fail(slot, error_chain(exc))
            return
        slot.query, slot.schema, slot.started_at = started.query, started.schema, self.clock()
        slot.tier, slot.tier_reason = started.tier, started.tier_reason
        slot.state, slot.error, slot.retry_at, slot.changed = "starting", None, None, True
        if started.fresh_start:
            slot.fresh_start = True
            log.warning("rule %s version %d starts fresh: a new checkpoint, from the %s offsets of the events "
                        "topic (the previous version's checkpoint is removed)", slot.rule.name, slot.rule.version,
                        "configured starting")
            self.launcher.drop_checkpoints(slot.rule.name, keep=slot.rule.checkpoint_id)
        log.info("rule %s version %d: query %s started", slot.rule.name, slot.rule.version, started.query.name)

    def _newer_views(self, slot: Slot, exc: RuleError) -> bool:
        """Whether a rule naming a view its snapshot lacks is retried at once, over the registry's schemas of now.

        `rules apply` plans against the registry itself, so a rule may name an event type registered after the
        manager's last poll: the registry is polled in this round (every rule adopts the new snapshot together,
        so a pack never mixes snapshots) and the rule retried after it, once per snapshot it was refused in."""
        fingerprint = slot.snapshot.fingerprint()
        if exc.code != UNKNOWN_VIEW or slot.unknown_view_in == fingerprint:
            return False
        slot.unknown_view_in = fingerprint
        self._next_registry = self.clock()
        self._fail(slot, f"refused at start: {exc.describe()}; retried over the registry's latest schemas"
                   [:ERROR_CHARS])
        slot.retry_at = self.clock()
        return True

    def _fail(self, slot: Slot, error: str, retry: bool = True) -> None:
        self._stop_query(slot)
        slot.failures += 1
        delay = min(self.settings.backoff_max_s, self.settings.backoff_s * 2 ** (slot.failures - 1))
        slot.state, slot.error, slot.changed = "failed", error, True
        slot.retry_at = self.clock() + delay if retry else None
        log.error("rule %s version %d failed (%d in a row)%s: %s", slot.rule.name, slot.rule.version, slot.failures,
                  f"; retry in {delay:.0f}s" if retry else "; not retried", error)

    def _watch(self) -> set[int] | None:
        """Look at every started query; the schema ids some met that the snapshot lacks (None: none did)."""
        unknown: set[int] | None = None
        for slot in self.slots.values():
            q = slot.query
            if q is None:
                continue
            if not q.isActive:
                try:
                    exc = q.exception()
                except Exception as raised:  # pyspark failing to convert the error must not stop the round
                    exc = raised
                ids = unknown_schema_ids(exc) if exc is not None else set()
                if ids:  # not the rule's fault: restart it from its checkpoint once the snapshot has the ids
                    unknown = (unknown or set()) | ids
                    slot.query = None
                    log.warning("rule %s met unknown schema ids %s: refreshing the snapshot", slot.rule.name, ids)
                else:
                    self._fail(slot, error_chain(exc) if exc is not None else "the query stopped by itself")
                continue
            try:
                h = health(q.lastProgress, self.watermarks)
            except Exception as exc:  # one query's odd progress report must not stop the others' round
                log.warning("rule %s: unreadable progress: %s", slot.rule.name, exc)
                continue
            if self._stalled(slot, q, h.batch_id):
                continue
            if h.batch_id is None:
                continue  # no progress report yet
            slot.rows_per_s, slot.lag = h.rows_per_s, h.lag
            if slot.state == "starting":
                slot.state, slot.changed = "running", True
            if h.batch_id != slot.batch_id or h.input_rows:
                slot.batch_id, slot.last_batch_at = h.batch_id, h.last_batch_at
                if slot.failures and (h.last_batch_at or 0) / 1000 > slot.started_at:
                    slot.failures = 0  # a batch went through since the retry: the next failure waits backoff_s
            if h.state_rows > self.settings.max_state_rows:
                self._fail(slot, f"state_limit: {h.state_rows} rows of state > {self.settings.max_state_rows} "
                                 "(HEADWATER_RULE_MAX_STATE_ROWS): narrow the windows or the keys, or lower the "
                                 "lateness", retry=False)
        return unknown

    def _stalled(self, slot: Slot, query: Any, batch_id: int | None) -> bool:
        """Quarantine the rule if one micro-batch has run over max_batch_s (quarantine.in_one_batch_since)."""
        since = in_one_batch_since(slot, query, batch_id, self.clock())
        if since is None or self.clock() - since <= self.settings.max_batch_s:
            return False
        self._quarantine(slot, STALLED.format(self.settings.max_batch_s))
        return True

    def _refresh(self, unknown: set[int]) -> None:
        """Take a new snapshot; adopt it in every rule if it differs (or a query met ids the old one lacked)."""
        self._next_registry = self.clock() + self.settings.registry_poll_s
        fresh = self.take_snapshot(self.bad_ids)
        missing = {i for i in unknown if i not in fresh.writers}
        if missing:  # ids the registry does not know either: the decoder treats them as dead letters
            self.bad_ids = frozenset(self.bad_ids | missing)
            fresh = self.take_snapshot(self.bad_ids)
        assert self.snapshot is not None
        if fresh.fingerprint() == self.snapshot.fingerprint() and not unknown:
            return
        self.snapshot = fresh
        for slot in self.slots.values():
            if slot.state not in ("failed", "quarantined"):  # a failed rule takes the snapshot when retried
                self._adopt(slot, fresh)

    def _adopt(self, slot: Slot, fresh: SchemaSnapshot) -> None:
        """Restart `slot` from its checkpoint over `fresh`. If the new latest versions would change the rule's
        output columns, the rule keeps reading each type through the version it started with (new writer ids
        are still decoded, resolved to that version by Avro); re-apply it under a new name to adopt them."""
        snap = fresh
        try:
            planned = self.launcher.output_schema(slot.rule, fresh, self.rules)
            changed = slot.schema is not None and planned != slot.schema
        except Exception as exc:
            changed = True
            log.warning("rule %s does not plan over the new schema versions (%s)", slot.rule.name, error_chain(exc))
        if changed:
            readers = {s: slot.snapshot.readers.get(s, w) for s, w in fresh.readers.items()}
            snap = SchemaSnapshot(fresh.writers, readers, fresh.bad_ids)
            log.warning("rule %s keeps the schema versions it started with: the new ones would change its output "
                        "columns (re-apply it under a new name to adopt them)", slot.rule.name)
        self._stop_query(slot)
        slot.snapshot = snap
        log.info("rule %s: restarting from its checkpoint for new schema versions", slot.rule.name)
        self._launch(slot)

    def _retry(self) -> None:
        now = self.clock()
        for slot in self.slots.values():
            if slot.state == "failed" and slot.retry_at is not None and now >= slot.retry_at:
                assert self.snapshot is not None
                slot.snapshot = self.snapshot
                log.info("rule %s: retrying (failure %d in a row)", slot.rule.name, slot.failures)
                self._launch(slot)

    def queries(self) -> dict[str, Any]:
        """The started rule queries by rule name (each runs in the rule's own session: the pipeline session's
        `spark.streams` does not list them)."""
        return {name: slot.query for name, slot in list(self.slots.items()) if slot.query is not None}

    # -- status -------------------------------------------------------------------------------------------------
    def status(self, slot: Slot) -> RuleStatus:
        return RuleStatus(name=slot.rule.name, version=slot.rule.version, state=slot.state, error=slot.error,
                          rows_per_s=round(slot.rows_per_s, 3), last_batch_at=slot.last_batch_at, lag=slot.lag,
                          fresh_start=slot.fresh_start, tier=slot.tier, tier_reason=slot.tier_reason,
                          retry_at=int(slot.retry_at * 1000) if slot.retry_at is not None else None,
                          updated_at=int(self.clock() * 1000))

    def _report(self) -> None:
        due = self.clock() >= self._next_status
        if due:
            self._next_status = self.clock() + self.settings.status_s
        for slot in self.slots.values():
            if due or slot.changed:
                self._put(slot)

    def _put(self, slot: Slot) -> None:
        try:
            self.statuses.put_status(self.status(slot))
            slot.changed = False
        except Exception as exc:  # the status topic being away must not stop the rules
            log.warning("cannot write the status of rule %s: %s", slot.rule.name, exc)

    def _stop_query(self, slot: Slot) -> None:
        q, slot.query = slot.query, None
        if q is None:
            return
        try:
            q.stop()
        except Exception as exc:  # stopping a failed query can raise again
            log.warning("stopping rule %s: %s", slot.rule.name, error_chain(exc))
