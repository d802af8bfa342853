"""Wires the rule manager into the running pipeline: its settings from the environment, Kafka, the registry, Spark.

`start_manager()` is what `spark_pipeline/job.py` calls beside the built-in queries (and stops on shutdown).
Settings (docs/rules-runtime.md): HEADWATER_RULES=0 turns rules off; HEADWATER_RULE_TRIGGER (default the live
trigger), HEADWATER_RULE_STARTING_OFFSETS (where a rule with a new checkpoint starts reading: `latest`, the
default, or `earliest`), HEADWATER_RULE_STATUS_S, HEADWATER_RULE_BACKOFF_S, HEADWATER_RULE_BACKOFF_MAX_S,
HEADWATER_RULE_MAX_STATE_ROWS, HEADWATER_RULE_MAX_BATCH_S (a longer micro-batch quarantines its rule); the registry is
polled every HEADWATER_REGISTRY_POLL_S like the built-in queries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

from common.kafka_security import KafkaSecurity
from common.registry_client import RegistryClient
from spark_pipeline import metrics
from spark_pipeline.config import PipelineConfig, number, switch
from spark_pipeline.metrics import RuleFigures
from spark_pipeline.rules import model, warmup
from spark_pipeline.rules.analyse import analyse
from spark_pipeline.rules.checks import Analyser, Checked, CheckService
from spark_pipeline.rules.journal import CheckpointJournal
from spark_pipeline.rules.launch import SparkLauncher, rules_checkpoints
from spark_pipeline.rules.manager import RuleManager, Settings
from spark_pipeline.rules.model import MAX_STATE_ROWS, RULES_TOPIC, Rule
from spark_pipeline.rules.progress import HighWatermarks
from spark_pipeline.rules.store import RuleStore, TopicFollower
from spark_pipeline.snapshot import SchemaSnapshot, take_snapshot

log = logging.getLogger("spark_pipeline.rules")


class KafkaWatermarks:
    """High watermarks of topic partitions, each asked of the broker at most once per `max_age_s`."""

    def __init__(self, bootstrap: str, max_age_s: float = 1.0, security: KafkaSecurity | None = None) -> None:
        self._consumer = Consumer({"bootstrap.servers": bootstrap, **(security or KafkaSecurity()).librdkafka(),
                                   "group.id": "headwater-rules-lag", "enable.auto.commit": False})
        self._max_age_s = max_age_s
        self._cache: dict[tuple[str, int], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def high(self, topic: str, partition: int) -> int | None:
        with self._lock:
            now = time.monotonic()
            cached = self._cache.get((topic, partition))
            if cached is not None and now - cached[0] < self._max_age_s:
                return cached[1]
            try:
                _, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5,
                                                               cached=False)
            except Exception as exc:  # lag is informative only
                log.debug("no high watermark for %s/%d: %s", topic, partition, exc)
                return None
            self._cache[(topic, partition)] = (now, int(high))
            return int(high)

    def close(self) -> None:
        self._consumer.close()


def settings_from_env(env: Mapping[str, str], cfg: PipelineConfig) -> Settings:
    """The rule manager's settings (ConfigError, a ValueError, when one is out of its range)."""
    return Settings(status_s=number(env, "HEADWATER_RULE_STATUS_S", 5.0, 0.05, 3600.0),
                    registry_poll_s=cfg.registry_poll_s,
                    backoff_s=number(env, "HEADWATER_RULE_BACKOFF_S", 5.0, 0.05, 3600.0),
                    backoff_max_s=number(env, "HEADWATER_RULE_BACKOFF_MAX_S", 300.0, 0.05, 86400.0),
                    max_state_rows=int(number(env, "HEADWATER_RULE_MAX_STATE_ROWS", MAX_STATE_ROWS, 1, 1e12,
                                              what="rows")),
                    max_batch_s=number(env, "HEADWATER_RULE_MAX_BATCH_S", 300.0, 0.05, 86400.0))


def enabled(env: Mapping[str, str]) -> bool:
    return switch(env, "HEADWATER_RULES", True)


class PipelineRules(RuleManager):
    """The rule manager with the Spark launcher it owns: stopping it also stops the packed real-time query."""

    spark_launcher: SparkLauncher
    checks: CheckService | None = None  # answers `rules apply`'s analysis requests (checks.py)
    _prepared: object = None  # the snapshot the launcher last prepared the realtime views of

    def tick(self) -> None:
        """A round (RuleManager.tick), then the realtime views of a new schema snapshot are built before any rule
        needs them (SparkLauncher.prepare), so that applying a rule does not wait for them."""
        super().tick()
        if self.snapshot is not None and self.snapshot is not self._prepared:
            self._prepared = self.snapshot
            try:
                self.spark_launcher.prepare(self.snapshot)
            except Exception as exc:  # the rules then build them when they start, as without this
                log.warning("cannot prepare the realtime views ahead of the rules: %s", str(exc).strip()[:300])

    def stop(self, timeout_s: float = 120.0) -> None:
        try:
            if self.checks is not None:
                self.checks.stop()
            super().stop(timeout_s)
        finally:
            self.spark_launcher.close()

    def tier(self, name: str) -> str:
        placement = self.spark_launcher.placements.get(name)
        return placement.tier if placement is not None else "none"

    def figures(self, watermarks: HighWatermarks) -> list[RuleFigures]:
        """Each rule's state, tier, failures in a row and its query's last figures, for the metrics."""
        out = []
        for name, slot in list(self.slots.items()):
            q = slot.query
            f = metrics.figures(q.lastProgress, watermarks) if q is not None else None
            matched = None
            if f is not None:
                matched = f.matched_per_s.get(name, f.matched_per_s.get(f"{name}.v{slot.rule.version}"))
            out.append(RuleFigures(name, self.tier(name), slot.state, slot.failures, f, matched))
        return out


def start_manager(spark: SparkSession, cfg: PipelineConfig, env: Mapping[str, str],
                  settings: Settings | None = None) -> RuleManager:
    """Start the rule manager's thread for the pipeline `cfg` (creates the rule topics if missing)."""
    store = RuleStore(cfg.bootstrap, security=cfg.kafka_security)
    registry = RegistryClient.of(cfg.registry_url, cfg.registry_access)

    def snapshot(bad: frozenset[int]) -> SchemaSnapshot:
        return take_snapshot(registry, cfg.subject_prefix, bad)

    trigger = env.get("HEADWATER_RULE_TRIGGER", "").strip() or cfg.live_trigger
    offsets = env.get("HEADWATER_RULE_STARTING_OFFSETS", "").strip() or "latest"
    launcher = SparkLauncher(spark, cfg, trigger, offsets)
    follower = TopicFollower(cfg.bootstrap, RULES_TOPIC, Rule.from_json, security=cfg.kafka_security)
    manager = PipelineRules(follower, launcher, store, snapshot,
                            watermarks=KafkaWatermarks(cfg.bootstrap, security=cfg.kafka_security),
                            settings=settings or settings_from_env(env, cfg),
                            journal=CheckpointJournal(spark, rules_checkpoints(cfg)))
    manager.spark_launcher = launcher
    warmup.start(spark)  # a rule calling `upper` would otherwise pay ICU's loading on its first record
    log.info("rule manager: following %s (new rules start from the %s offsets)", RULES_TOPIC, offsets)
    if switch(env, "HEADWATER_RULES_CHECKS", True):
        try:
            service = CheckService(cfg.bootstrap, check_analyser(spark, cfg, store), security=cfg.kafka_security)
            service.start()
            manager.checks = service
        except Exception as exc:  # `rules apply` then analyses in its own JVM, as without the service
            log.warning("rule checks are not answered here: %s", str(exc).strip()[:300])
    return manager.start()


def check_analyser(spark: SparkSession, cfg: PipelineConfig, store: RuleStore) -> Analyser:
    """(name, sql) -> the analysis `rules apply` would make itself: the same live views (`cli.live_views`) over the
    registry's and the rules topic's current contents, in a session of its own; RuleError when refused."""
    from spark_pipeline.rules.cli import live_views  # noqa: PLC0415 - the command's module, only needed here

    def analyser(name: str, sql: str) -> Checked:
        session = spark.newSession()
        rules = store.latest_rules()  # a reader of its own per call
        model.check_acyclic(name, sql, rules)
        live_views(session, cfg, {n: r for n, r in rules.items() if n != name}, sql=sql)
        a = analyse(session, sql)
        return Checked(a.schema, a.key_columns, a.aggregation, a.output_mode)

    return analyser


# pyspark names the loggers its exceptions log through with a process-wide logging.setLoggerClass swap that is not
# thread-safe: a plain Logger under one of these names (seen here when threads raced) makes pyspark raise TypeError
# ("unexpected keyword argument 'errorClass'") while converting any Java exception with a SQL context, so a failed
# rule query's exception() itself raised. Created properly, once, before the manager's thread starts.
PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def ensure_pyspark_loggers() -> None:
    from pyspark.logger import PySparkLogger  # noqa: PLC0415 - pyspark's logging module, only needed here

    for name in PYSPARK_ERROR_LOGGERS:
        current = logging.Logger.manager.loggerDict.get(name)
        if isinstance(current, (PySparkLogger, logging.PlaceHolder)):
            continue
        logger = PySparkLogger(name)
        logger.parent = logging.getLogger()
        logger.propagate = False
        logging.Logger.manager.loggerDict[name] = logger


_running: list[RuleManager] = []


def running() -> list[RuleManager]:
    """The rule managers started by `maybe_start` in this process and not stopped yet (tests and benchmarks look
    at their queries)."""
    return [m for m in _running if not m.stopped]


def maybe_start(spark: SparkSession, cfg: PipelineConfig, env: Mapping[str, str]) -> RuleManager | None:
    """The manager, unless HEADWATER_RULES=0 or it cannot start (logged: the built-in queries run anyway)."""
    if not enabled(env):
        log.info("rules are off (HEADWATER_RULES=0)")
        return None
    try:
        ensure_pyspark_loggers()
        manager = start_manager(spark, cfg, env)
    except Exception:
        log.exception("the rule manager did not start; the built-in queries run without rules")
        return None
    _running[:] = [*running(), manager]
    return manager
