"""Starts a rule where its tier runs it: into the packed real-time query, or as a micro-batch query of its own.

`tiers.place` decides (realtime: a filter or projection that cannot fail; microbatch: everything else, with the
reason). Both read the shared enriched stream (`shared.py`: the internal topic the built-in query `enriched`
writes), never the events topic. A realtime rule becomes a member of the one packed query (`packed.py`); a
microbatch rule runs in its own SparkSession (`spark.newSession()`: same SparkContext, its own temp views,
functions and SQL confs) so one rule's views or failure never reach another query. Checkpoints:
`<checkpoints>/rules/<name>/<Rule.checkpoint_id>` (`v<version>-<uid>`, unique per apply) per microbatch rule (a
realtime rule's folder only marks its apply, so a replacement says it starts fresh), `<checkpoints>/rules/_realtime`
and `_aggregate_<id>` for the packed queries.

Every start passes the rule through the sandbox gate first (`analyse`, the same as `rules apply`): over the
realtime views for the realtime tier, in the rule's own session for the microbatch tier; a refused rule raises
RuleError and runs in no tier.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from common.registry_client import RegistryClient
from spark_pipeline import enrich
from spark_pipeline.checkpoint import clear_interrupted_first_batch, hadoop_path
from spark_pipeline.config import PipelineConfig, join
from spark_pipeline.extract import NO_JMX
from spark_pipeline.rules import functions, output, store, views
from spark_pipeline.rules.aggregates import AggregatePlan
from spark_pipeline.rules.analyse import analyse, analysed, precheck
from spark_pipeline.rules.manager import Started
from spark_pipeline.rules.model import Rule, RuleError, referenced_rules
from spark_pipeline.rules.packed import Member, Pack, packed_records, packed_writer
from spark_pipeline.rules.plans import Catalyst
from spark_pipeline.rules.tiers import MICROBATCH, REALTIME, Placement, place
from spark_pipeline.snapshot import SchemaSnapshot

log = logging.getLogger("spark_pipeline.rules")
POOL = "rules"  # the FAIR scheduler pool of rule queries (spark_pipeline/data/fairscheduler.xml)
REALTIME_QUERY = "rules.realtime"
AGGREGATE_QUERY = "rules.aggregate"
REALTIME_CHECKPOINT = "_realtime"  # not a rule name (those start with a letter)


# What `prepare` passes through the gate and the tier decision: a filter with a projection and a windowed count, the
# kinds most rules are (their first pass warms the code a rule's own pass then runs).
WARM_RULES = (
    Rule("warm_up", "SELECT event_id, created_at, upper(event_type) AS kind, concat(node_id, '/', event_type) AS place "
                    "FROM events WHERE producer_id IN ('warm', 'up') AND event_type <> 'warm_up'", 1, 0,
         "the pipeline", 0, ("event_id",)),
    Rule("warm_up_counts", "SELECT window(event_time, '10 seconds') AS w, producer_id, count(*) AS events FROM events "
                           "WHERE producer_id IN ('warm', 'up') GROUP BY window(event_time, '10 seconds'), producer_id",
         1, 0, "the pipeline", 0, ("w", "producer_id"), True, "update"),
)  # schema id 0: planned only, never started


def query_name(rule: Rule) -> str:
    return f"rule.{rule.name}.v{rule.version}"


def rules_checkpoints(cfg: PipelineConfig) -> str:
    return join(cfg.checkpoint_dir, "rules")


def checkpoint(cfg: PipelineConfig, rule: Rule) -> str:
    return join(rules_checkpoints(cfg), rule.name, rule.checkpoint_id)


@dataclass(frozen=True)
class RealtimeContext:
    """The views of one schema snapshot over the shared stream, in a session of their own, that realtime rules are
    planned against: `boundary` is the shared stream's plan, `number` tells contexts apart (newest highest)."""

    key: Any
    number: int
    session: SparkSession
    base: DataFrame
    catalyst: Catalyst
    boundary: Any


class SparkLauncher:
    """Starts rules on the pipeline's SparkSession (the manager's seam to Spark): places each in its tier."""

    def __init__(self, spark: SparkSession, cfg: PipelineConfig, trigger: str, starting_offsets: str) -> None:
        self.spark = spark
        self.cfg = cfg.with_overrides(starting_offsets=starting_offsets)
        self.starting_offsets = starting_offsets
        self.trigger = trigger
        self.registry = RegistryClient.of(cfg.registry_url, cfg.registry_access)
        self.placements: dict[str, Placement] = {}
        self._context: RealtimeContext | None = None
        self.pack = Pack(REALTIME_QUERY, partial(self._start_pack, REALTIME_QUERY, REALTIME_CHECKPOINT),
                         reset=partial(self.drop_checkpoints, REALTIME_CHECKPOINT))
        self.aggregate_packs: dict[str, Pack] = {}
        self._holding = False  # inside `holding()`: packs made now start held

    def context(self, snapshot: SchemaSnapshot) -> RealtimeContext:
        """The realtime views of `snapshot` (built once per snapshot: packed rules share its base)."""
        key = (snapshot.fingerprint(), tuple(sorted((s, w.schema_id) for s, w in snapshot.readers.items())))
        if self._context is None or self._context.key != key:
            session = self.spark.newSession()  # the shared stream is enriched already: no inventory here
            base = views.pipeline_events(session, self.cfg, snapshot, None, streaming=True, realtime=True,
                                         starting_offsets=self.starting_offsets)
            functions.register_functions(session)
            views.register_views(session, base, snapshot, {}, bootstrap=self.cfg.bootstrap,
                                 subject_prefix=self.cfg.subject_prefix, lateness=self.cfg.lateness,
                                 registry=self.registry, security=self.cfg.kafka_security)
            catalyst = Catalyst(session)
            number = self._context.number + 1 if self._context is not None else 1
            self._context = RealtimeContext(key, number, session, base, catalyst, catalyst.analyzed(base))
        return self._context

    def prepare(self, snapshot: SchemaSnapshot) -> None:
        """Build the realtime views of `snapshot` and pass known rules through the gate and the tier decision over
        them, ahead of any rule: the first rule applied then starts in about a second, not after the tens of
        seconds the first plan of the shared stream's views takes (the manager calls this when its snapshot
        changes)."""
        if not self.cfg.rules_realtime:
            return
        started = time.monotonic()
        for rule in WARM_RULES:
            self.place(rule, snapshot)
        log.debug("realtime views of the schema snapshot built and the gate warmed in %.2f s",
                  time.monotonic() - started)

    def place(self, rule: Rule, snapshot: SchemaSnapshot) -> tuple[Placement, DataFrame | None]:
        """The rule's tier, and for the realtime tier its DataFrame over the realtime views."""
        if not self.cfg.rules_realtime:
            return Placement(MICROBATCH, "the real-time tier is off (HEADWATER_RULES_REALTIME=1 turns it on)"), None
        if reads := sorted(referenced_rules(rule.sql)):
            return Placement(MICROBATCH, f"reads the output of rule {reads[0]} (another topic)"), None
        if older := snapshot.older_readers():  # the packs share one context: every type at its newest version
            named = ", ".join(older[:3]) + (f" and {len(older) - 3} more" if len(older) > 3 else "")
            return Placement(MICROBATCH, f"keeps the schema versions it started with ({named}): the shared "
                                         "real-time views read each type's newest"), None
        ctx = self.context(snapshot)
        try:  # the sandbox gate over the realtime views (`analysed`: never spark.sql)
            df = analysed(ctx.session, rule.sql)
        except RuleError as exc:  # e.g. a view the realtime views lack: the microbatch tier's gate decides
            return Placement(MICROBATCH, f"does not plan over the shared stream: {exc.message[:200]}"), None
        placement = place(ctx.catalyst, rule, df, ctx.boundary)
        return placement, df if placement.tier == REALTIME else None

    def frame(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> DataFrame:
        """The rule's result as a micro-batch streaming DataFrame in a session of its own."""
        session = self.spark.newSession()
        precheck(session, rule.sql)  # the gate's checks that need no view, before the views are built
        inventory = (enrich.read_inventory(session, self.cfg.nodes_file)
                     if views.inventory_needed(self.cfg, streaming=True) else None)
        enriched = views.pipeline_events(session, self.cfg, snapshot, inventory, streaming=True,
                                         starting_offsets=self.starting_offsets)
        names = views.named_in(rule.sql)  # only the views and functions the rule can name: it plans the same
        functions.register_functions(session, [f for f in functions.load_functions() if f.name.lower() in names])
        others = {name: r for name, r in rules.items() if name != rule.name}
        views.register_views(session, enriched, snapshot, others, bootstrap=self.cfg.bootstrap,
                             subject_prefix=self.cfg.subject_prefix, lateness=self.cfg.lateness,
                             registry=self.registry, security=self.cfg.kafka_security, only=names)
        # The sandbox gate (analyse.py), again here: a stored rule may never have passed `rules apply` (anyone who
        # reaches the broker can write the rules topic). RuleError: refused, never reaches Spark's SQL execution.
        return analyse(session, rule.sql).frame

    def output_schema(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> StructType:
        """The columns the rule would produce over `snapshot` (plans only; starts nothing)."""
        _, df = self.place(rule, snapshot)
        return df.schema if df is not None else self.frame(rule, snapshot, rules).schema

    def start(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> Started:
        if rule.output_schema_id is None:
            raise ValueError(f"rule {rule.name} has no output schema: apply it again")
        # The sandbox gate first, in either tier: a refused rule creates nothing (`place` gates the realtime tier).
        began = time.monotonic()
        placement, packed = self.place(rule, snapshot)
        df = packed if packed is not None else self.frame(rule, snapshot, rules)
        log.debug("rule %s version %d: gated and placed in %.2f s", rule.name, rule.version, time.monotonic() - began)
        self.placements[rule.name] = placement
        # `rules apply` created it; again here in case it was deleted since (Kafka's auto-creation is off).
        store.ensure_output_topic(self.cfg.bootstrap, rule.name, compacted=rule.aggregation,
                                  security=self.cfg.kafka_security)
        location = checkpoint(self.cfg, rule)
        fs, path = hadoop_path(self.spark, location)
        fresh = not fs.exists(path) and self.older_versions(rule)
        if packed is not None and placement.plan is not None:
            fs.mkdirs(path)  # marks the version (a packed rule keeps no state of its own)
            assert self._context is not None
            member = Member(rule, placement.plan, packed.schema, self._context.number)
            log.info("rule %s version %d: realtime tier (%s)", rule.name, rule.version, placement.reason)
            return Started(self.pack_of(member).add(member), packed.schema, fresh, placement.tier, placement.reason)
        log.info("rule %s version %d: microbatch tier (%s)", rule.name, rule.version, placement.reason)
        if removed := clear_interrupted_first_batch(self.spark, location):
            log.warning("rule %s: removed %s, left by its first batch's interrupted log write", rule.name, removed)
        records = output.encode_columns(df, rule.output_schema_id, rule.key_columns)
        writer = (records.writeStream.format("kafka").queryName(query_name(rule))
                  .options(**self.cfg.spark_kafka()).option("topic", rule.topic)
                  .option("kafka.enable.idempotence", "true").option("kafka.acks", "all").options(**NO_JMX)
                  .option("checkpointLocation", location).trigger(processingTime=self.trigger))
        # The mode the analysis chose: aggregations in update mode (a window re-emitted as it grows, keyed: the
        # latest record per key is the result); filters, routing and time-bounded joins in append mode.
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
        return Started(writer.outputMode(rule.output_mode).start(), df.schema, fresh, placement.tier,
                       placement.reason)

    def pack_of(self, member: Member) -> Pack:
        """The stateless pack, or the aggregation pack of the member's signature (made on first use)."""
        if not isinstance(member.plan, AggregatePlan):
            return self.pack
        pack_id = member.plan.pack_id
        if pack_id not in self.aggregate_packs:
            name = f"{AGGREGATE_QUERY}.{pack_id}"
            folder = f"_aggregate_{pack_id}"
            pack = Pack(name, partial(self._start_pack, name, folder),
                        reset=partial(self.drop_checkpoints, folder))
            if self._holding:
                pack.hold()  # released with the others at the end of the hold
            self.aggregate_packs[pack_id] = pack
            log.info("pack %s: aggregations %s", name, member.plan.signature)
        return self.aggregate_packs[pack_id]

    def _start_pack(self, name: str, folder: str, members: list[Member]) -> Any:
        """Start packed real-time query `name` of `members` (planned in the newest context) from its checkpoint."""
        ctx = self._context
        assert ctx is not None
        location = join(rules_checkpoints(self.cfg), folder)
        if removed := clear_interrupted_first_batch(self.spark, location):
            log.warning("pack %s: removed %s, left by its first batch's interrupted log write", name, removed)
        writer = (packed_writer(packed_records(ctx.base, members), self.cfg.spark_kafka()).queryName(name)
                  .option("checkpointLocation", location).trigger(realTime=self.cfg.rules_realtime_batch))  # type: ignore[call-overload]
        ctx.session.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
        return writer.start()

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Each pack restarts once for the changes made inside (a manager's round), after it, not once per rule."""
        if self._holding:  # already held by an outer round
            yield
            return
        self._holding = True
        for pack in [self.pack, *self.aggregate_packs.values()]:
            pack.hold()
        try:
            yield
        finally:
            self._holding = False
            for pack in [self.pack, *self.aggregate_packs.values()]:  # with those made inside, held at creation
                pack.release()

    def close(self) -> None:
        """Stop the packed queries (the rules' checkpoints stay)."""
        for pack in [self.pack, *self.aggregate_packs.values()]:
            pack.close()

    def older_versions(self, rule: Rule) -> bool:
        """Whether checkpoints of other versions of the rule exist (its replacement then starts fresh)."""
        fs, folder = hadoop_path(self.spark, join(rules_checkpoints(self.cfg), rule.name))
        if not fs.exists(folder):
            return False
        return any(s.getPath().getName() != rule.checkpoint_id for s in fs.listStatus(folder))

    def drop_checkpoints(self, name: str, keep: str | None = None) -> None:
        """Delete the checkpoints of rule `name` (its whole folder, or every version but the `keep` checkpoint id),
        or a packed query's folder (`_realtime`, `_aggregate_<id>`: its last rule left)."""
        fs, folder = hadoop_path(self.spark, join(rules_checkpoints(self.cfg), name))
        if not fs.exists(folder):
            return
        if keep is None:
            fs.delete(folder, True)
            return
        for status in fs.listStatus(folder):
            if status.getPath().getName() != keep:
                fs.delete(status.getPath(), True)
