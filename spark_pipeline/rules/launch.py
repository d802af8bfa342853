"""Builds and starts one rule's streaming query: its SQL over the views, written by Spark's Kafka sink.

Each rule runs in its own SparkSession (`spark.newSession()`: same SparkContext, its own temp views, functions
and SQL confs), over its own read of the events topic (decoded with the schema snapshot the manager gives it,
watermarked with the pipeline's lateness, deduplicated and enriched like the built-in queries), so one rule's
views or failure never reach another query. Its checkpoint is `<checkpoints>/rules/<name>/v<version>`: a new
version starts fresh; the same version resumes where it left off.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from common.registry_client import RegistryClient
from spark_pipeline import enrich
from spark_pipeline.checkpoint import clear_interrupted_first_batch, hadoop_path
from spark_pipeline.config import PipelineConfig, join
from spark_pipeline.rules import functions, output, store, views
from spark_pipeline.rules.manager import Started
from spark_pipeline.rules.model import Rule
from spark_pipeline.snapshot import SchemaSnapshot

log = logging.getLogger("spark_pipeline.rules")
POOL = "rules"  # the FAIR scheduler pool of rule queries (not in fairscheduler.xml: Spark's defaults, weight 1)


def query_name(rule: Rule) -> str:
    return f"rule.{rule.name}.v{rule.version}"


def rules_checkpoints(cfg: PipelineConfig) -> str:
    return join(cfg.checkpoint_dir, "rules")


def checkpoint(cfg: PipelineConfig, rule: Rule) -> str:
    return join(rules_checkpoints(cfg), rule.name, f"v{rule.version}")


class SparkLauncher:
    """Starts rule queries on the pipeline's SparkSession (the manager's seam to Spark)."""

    def __init__(self, spark: SparkSession, cfg: PipelineConfig, trigger: str, starting_offsets: str) -> None:
        self.spark = spark
        self.cfg = cfg.with_overrides(starting_offsets=starting_offsets)
        self.trigger = trigger
        self.registry = RegistryClient.of(cfg.registry_url, cfg.registry_access)

    def frame(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> DataFrame:
        """The rule's result, a streaming DataFrame in a session of its own."""
        session = self.spark.newSession()
        inventory = enrich.read_inventory(session, self.cfg.nodes_file)
        enriched = views.pipeline_events(session, self.cfg, snapshot, inventory, streaming=True)
        functions.register_functions(session)
        others = {name: r for name, r in rules.items() if name != rule.name}
        views.register_views(session, enriched, snapshot, others, bootstrap=self.cfg.bootstrap,
                             subject_prefix=self.cfg.subject_prefix, lateness=self.cfg.lateness,
                             registry=self.registry, security=self.cfg.kafka_security)
        return session.sql(rule.sql)

    def output_schema(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> StructType:
        """The columns the rule would produce over `snapshot` (plans only; starts nothing)."""
        return self.frame(rule, snapshot, rules).schema

    def start(self, rule: Rule, snapshot: SchemaSnapshot, rules: Mapping[str, Rule]) -> Started:
        if rule.output_schema_id is None:
            raise ValueError(f"rule {rule.name} has no output schema: apply it again")
        # `rules apply` created it; again here in case it was deleted since (Kafka's auto-creation is off).
        store.ensure_output_topic(self.cfg.bootstrap, rule.name, compacted=rule.aggregation,
                                  security=self.cfg.kafka_security)
        location = checkpoint(self.cfg, rule)
        fs, path = hadoop_path(self.spark, location)
        fresh = not fs.exists(path) and self.older_versions(rule)
        if removed := clear_interrupted_first_batch(self.spark, location):
            log.warning("rule %s: removed %s, left by its first batch's interrupted log write", rule.name, removed)
        df = self.frame(rule, snapshot, rules)
        records = output.encode_columns(df, rule.output_schema_id, rule.key_columns)
        writer = (records.writeStream.format("kafka").queryName(query_name(rule))
                  .options(**self.cfg.spark_kafka()).option("topic", rule.topic)
                  .option("kafka.enable.idempotence", "true").option("kafka.acks", "all")
                  .option("checkpointLocation", location).trigger(processingTime=self.trigger))
        # The mode the analysis chose: aggregations in update mode (a window re-emitted as it grows, keyed: the
        # latest record per key is the result); filters, routing and time-bounded joins in append mode.
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
        return Started(writer.outputMode(rule.output_mode).start(), df.schema, fresh)

    def older_versions(self, rule: Rule) -> bool:
        """Whether checkpoints of other versions of the rule exist (its replacement then starts fresh)."""
        fs, folder = hadoop_path(self.spark, join(rules_checkpoints(self.cfg), rule.name))
        if not fs.exists(folder):
            return False
        return any(s.getPath().getName() != f"v{rule.version}" for s in fs.listStatus(folder))

    def drop_checkpoints(self, name: str, keep_version: int | None = None) -> None:
        """Delete the checkpoints of rule `name` (its whole folder, or every version but `keep_version`)."""
        fs, folder = hadoop_path(self.spark, join(rules_checkpoints(self.cfg), name))
        if not fs.exists(folder):
            return
        if keep_version is None:
            fs.delete(folder, True)
            return
        for status in fs.listStatus(folder):
            if status.getPath().getName() != f"v{keep_version}":
                fs.delete(status.getPath(), True)
