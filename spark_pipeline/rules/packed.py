"""Runs the realtime tier: every packed rule in one real-time query over the shared stream, and a query-like view of
it per rule for the rule manager.

The query reads the shared stream once and evaluates each member rule's condition and columns on every row
(`explode` of one struct per matching rule: the Kafka topic, key and value of its output record), so N rules cost
N predicates, not N reads. Spark's Kafka sink writes each record to the topic its row names. Adding or removing a
rule restarts the query from its checkpoint with the new set (a stateless query: only the offsets are kept); changes
that arrive together (a pipeline start, a schema change) are gathered into one restart.

The manager keeps one `PackedRule` per rule, which answers like a StreamingQuery: active while the pack runs with
the rule in it, the pack's failure as its exception, the pack's progress as its own, and `stop()` takes the rule
out. Only rules that cannot fail the query are packed (`tiers.py`), so a failure here is the pack's own (Kafka, the
JVM) and every member reports it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import to_avro
from pyspark.sql.streaming.readwriter import DataStreamWriter
from pyspark.sql.types import StructType

from spark_pipeline.extract import NO_JMX
from spark_pipeline.load import confluent_frame
from spark_pipeline.metrics import observe_latency
from spark_pipeline.rules import output
from spark_pipeline.rules.aggregates import AggregatePlan, aggregated_records
from spark_pipeline.rules.model import Rule
from spark_pipeline.rules.tiers import StatelessPlan

log = logging.getLogger("spark_pipeline.rules")


@dataclass(frozen=True)
class Member:
    """A rule in the pack: its plan over the shared stream of context `context` (a base DataFrame's views)."""

    rule: Rule
    plan: StatelessPlan | AggregatePlan
    schema: StructType
    context: int


def record(member: Member, plan: StatelessPlan) -> Any:
    """The member's output record for a row that meets its condition: struct(topic, key, value), else null."""
    rule, columns = member.rule, plan.columns
    if rule.output_schema_id is None:
        raise ValueError(f"rule {rule.name} has no output schema: apply it again")
    names = [f.name for f in member.schema.fields]
    schema_json = output.avro_schema_json("rule", member.schema)
    value = confluent_frame(to_avro(F.struct(*columns), schema_json), rule.output_schema_id)
    if rule.key_columns:
        key = F.to_json(F.struct(*[columns[names.index(k)] for k in rule.key_columns])).cast("binary")
    else:
        key = F.lit(None).cast("binary")
    out = F.struct(F.lit(rule.topic).alias("topic"), key.alias("key"), value.alias("value"))
    return out if plan.condition is None else F.when(plan.condition, out)


def packed_records(base: DataFrame, members: list[Member]) -> DataFrame:
    """Kafka rows (topic, key, value) of every member's records for each row of `base` (all stateless members, or
    all aggregation members of one signature)."""
    stateless = [(m, m.plan) for m in members if isinstance(m.plan, StatelessPlan)]
    if not stateless:
        return aggregated_records(base, [m.plan for m in members if isinstance(m.plan, AggregatePlan)])
    records = F.filter(F.array(*[record(m, p) for m, p in stateless]), lambda r: r.isNotNull())
    rows = base.select(F.explode(records).alias("r"), F.unix_millis("created_at").alias("created_ms"))
    counts = {m.rule.name: F.col("r.topic") == F.lit(m.rule.topic) for m, _ in stateless}
    return observe_latency(rows, F.col("created_ms"), counts).select("r.topic", "r.key", "r.value")


class StalePlan(RuntimeError):
    """A member planned over schema views the pack's query no longer reads (a newer context's rules run)."""


@dataclass(frozen=True)
class PackState:
    """A pack at one moment: its members, those its query runs, whether a restart is pending, the error of the
    last start (None if it started), and the query (None while stopped)."""

    members: tuple[str, ...]
    running: tuple[str, ...]
    pending: bool
    error: object | None
    query: Any


class Pack:
    """One packed query and its members; restarts it (in a thread of its own) when the members change."""

    def __init__(self, name: str, start: Callable[[list[Member]], Any], debounce_s: float = 0.05,
                 reset: Callable[[], None] | None = None) -> None:
        self.name = name
        self._start = start  # members -> a started StreamingQuery
        self._reset = reset  # forgets the query's checkpoint once its last member left
        self._debounce_s = debounce_s
        self._members: dict[str, Member] = {}
        self._lock = threading.RLock()
        self._query: Any = None
        self._running: dict[str, Member] = {}  # the members in `_query` (or whose start failed), by rule name
        self._error: object | None = None
        self._pending = False
        self._holds = 0  # while above 0 (a rule manager's round), changes gather and the query is not restarted
        self._changed = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"headwater-pack-{name}", daemon=True)
        self._thread.start()

    # -- membership -------------------------------------------------------------------------------------------
    def add(self, member: Member) -> PackedRule:
        with self._lock:
            self._members[member.rule.name] = member
            self._touch()
        return PackedRule(self, member)

    def remove(self, name: str) -> None:
        with self._lock:
            # A member the query does not run (left out, or not started yet) needs no restart to leave.
            if self._members.pop(name, None) is not None and name in self._running:
                self._touch()

    def members(self) -> list[Member]:
        with self._lock:
            return list(self._members.values())

    def _touch(self) -> None:
        self._pending = True
        self._changed.set()

    def hold(self) -> None:
        """Gather the changes that follow into one restart, made at the matching `release` (a manager's round
        places its rules one after another, each taking a plan's time: without a hold, each would restart the
        query, and every restart re-sends the batch in progress)."""
        with self._lock:
            self._holds += 1

    def release(self) -> None:
        with self._lock:  # a change made in the hold woke the loop already: it waits for this release
            self._holds = max(0, self._holds - 1)

    def _held(self) -> bool:
        with self._lock:
            return self._holds > 0

    # -- the query --------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._closed.is_set():
            self._changed.wait()
            if self._closed.is_set():
                return
            # Gather the changes of one round into one restart: those a hold covers, and those close together.
            while (self._changed.is_set() or self._held()) and not self._closed.is_set():
                self._changed.clear()
                time.sleep(self._debounce_s)
            if self._closed.is_set():
                return
            try:
                self._restart()
            except Exception:  # never let the thread die: the members report the error
                log.exception("pack %s: restart failed", self.name)

    def _restart(self) -> None:
        with self._lock:
            members = self.members()
            newest = max((m.context for m in members), default=0)
            current = [m for m in members if m.context == newest]
            old, self._query = self._query, None
        began = time.monotonic()
        if old is not None:
            _stop(old, self.name)
        stopped = time.monotonic()
        query, error = None, None
        if not current and self._reset is not None:
            # No rule left: what the checkpoint holds (offsets, the removed rules' state) serves no one, and a rule
            # applied later must start from the configured offsets, not replay everything since this pack's last
            # batch ended.
            try:
                self._reset()
                log.info("pack %s: no rules left, its query stopped and its checkpoint removed", self.name)
            except Exception as exc:
                log.warning("pack %s: cannot remove its checkpoint: %s", self.name, exc)
        if current:
            try:
                query = self._start(current)
                log.info("pack %s: query %s started with %d rules (stop %.2f s, start %.2f s)", self.name, query.name,
                         len(current), stopped - began, time.monotonic() - stopped)
            except Exception as exc:
                error = exc
                log.error("pack %s: cannot start the query with %d rules: %s", self.name, len(current),
                          str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__)
        with self._lock:
            self._query, self._error = query, error
            self._running = {m.rule.name: m for m in current}
            self._pending = self._changed.is_set()

    def query(self) -> Any:
        with self._lock:
            return self._query

    def state(self) -> PackState:
        """What the pack holds now, read under its lock (for status pages and diagnostics)."""
        with self._lock:
            return PackState(tuple(sorted(self._members)), tuple(sorted(self._running)), self._pending, self._error,
                             self._query)

    def runs(self, member: Member) -> bool:
        """Whether the pack's query evaluates this very member (not an earlier version or plan of its rule: after a
        replace, the query keeps running the old one until its restart)."""
        with self._lock:
            return self._query is not None and self._running.get(member.rule.name) is member

    def status(self, name: str) -> tuple[bool, object | None]:
        """(active, exception) of member `name`: active while its restart is pending or the query runs."""
        with self._lock:
            if name not in self._members:
                return False, None
            if self._pending:
                return True, None
            if name not in self._running:  # left out: planned in an older context than the query's members
                return False, StalePlan(
                    f"rule {name} was planned over schema versions that the shared real-time query {self.name} no "
                    "longer reads (the rules planned over newer ones run in it); it is retried over the newest")
            q = self._query
            if q is None:
                return False, self._error
        if q.isActive:
            return True, None
        try:
            return False, q.exception()
        except Exception as exc:  # pyspark failing to convert the error
            return False, exc

    def close(self) -> None:
        self._closed.set()
        self._changed.set()
        self._thread.join(30)
        with self._lock:
            q, self._query = self._query, None
            self._members.clear()
        if q is not None:
            _stop(q, self.name)


def _stop(query: Any, name: str) -> None:
    try:
        query.stop()
    except Exception as exc:  # stopping a failed query can raise again
        log.warning("pack %s: stopping its query: %s", name, str(exc).splitlines()[0][:200] if str(exc) else exc)


class PackedRule:
    """One rule's view of its pack, with the StreamingQuery attributes the rule manager reads."""

    def __init__(self, pack: Pack, member: Member) -> None:
        self.pack = pack
        self.member = member
        self.rule = member.rule
        self.name = f"rule.{self.rule.name}.v{self.rule.version}"

    @property
    def isActive(self) -> bool:
        return self.pack.status(self.rule.name)[0]

    def exception(self) -> object | None:
        active, error = self.pack.status(self.rule.name)
        return None if active else error

    @property
    def lastProgress(self) -> Any:
        """The pack query's last progress; while its first real-time batch runs (it reports only at its end, after
        HEADWATER_REALTIME_BATCH), a report of batch -1: the query runs and processes records as they come. None
        until the query runs this member: the manager says "running" only once its rows are evaluated."""
        q = self.pack.query()
        if q is None or not self.pack.runs(self.member) or self.pack.status(self.rule.name)[1] is not None:
            return None
        progress = q.lastProgress
        return progress if progress is not None or not q.isActive else {"batchId": -1}

    @property
    def recentProgress(self) -> list[Any]:
        q = self.pack.query()
        return [] if q is None else list(q.recentProgress)

    @property
    def runId(self) -> Any:
        q = self.pack.query()
        return None if q is None else q.runId

    def stop(self) -> None:
        self.pack.remove(self.rule.name)


def packed_writer(records: DataFrame, kafka: dict[str, str]) -> DataStreamWriter:
    """Spark's Kafka sink for rows that name their topic (at least once, like every rule output); `kafka`: where
    Kafka is and how to authenticate (`PipelineConfig.spark_kafka`)."""
    return (records.writeStream.format("kafka").options(**kafka)
            .option("kafka.enable.idempotence", "true").option("kafka.acks", "all").option("kafka.linger.ms", "0")
            .options(**NO_JMX).outputMode("update"))
