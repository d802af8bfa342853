"""The rules benchmark's shared parts: the pipeline in a thread, rules applied the CLI's way, output topics read back.

Output records are timed by their Kafka timestamp (the producer's create time, set when Spark's sink sends them),
read back after a measurement, so the benchmark decodes nothing while the pipeline is being measured.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import SparkSession

from common.avro_frame import WriterSchemas
from common.kafka_read import consumer_config, end_offsets, read_to_end
from spark_pipeline import job
from spark_pipeline.config import PipelineConfig
from spark_pipeline.rules import class_archive, cli, runtime
from spark_pipeline.rules.model import Rule
from spark_pipeline.rules.store import RuleStore

REPO = Path(__file__).resolve().parents[2]

log = logging.getLogger("bench.rules")


def new_topic(bootstrap: str, prefix: str, partitions: int = 3) -> str:
    name = f"{prefix}.{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        fut.result(30)
    return name


def drop_topics(bootstrap: str, prefixes: tuple[str, ...]) -> list[str]:
    """Delete every topic whose name starts with one of `prefixes`; the names deleted. The bench's own topics
    (its events, enriched and aggregates topics, its rules' outputs: millions of records a run) would otherwise
    stay on the stack's broker for their retention, gigabytes a run."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = sorted(t for t in admin.list_topics(timeout=30).topics if t.startswith(prefixes))
    if names:
        for fut in admin.delete_topics(names, operation_timeout=60).values():
            fut.result(60)
    return names


FAILED: list[BaseException] = []  # what stopped a pipeline: every wait gives up at once


def wait(what: str, check: Callable[[], Any], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if FAILED:
            raise RuntimeError(f"the pipeline stopped while waiting for {what}") from FAILED[0]
        if value := check():
            return value
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


def percentile(values: list[int], q: float) -> float | None:
    return float(values[min(len(values) - 1, int(q * len(values)))]) if values else None


def apply_rule(cfg: PipelineConfig, sql: str, name: str, store: RuleStore) -> Rule:
    """`rules apply` (analysis against the live views, output schema, topic, store); the stored rule."""
    path = Path(cfg.output_dir) / f"{name}.sql"
    path.write_text(sql, encoding="utf-8")
    if cli.apply(cfg, path, name) != 0:
        raise RuntimeError(f"rules apply {name} failed")
    return store.latest_rules()[name]


def apply_rule_cli(cfg: PipelineConfig, sql: str, name: str, store: RuleStore, env: dict[str, str]) -> Rule:
    """`python -m spark_pipeline rules apply` as the operator runs it, a process of its own with its own JVM (the
    JDK class archive of an earlier run, when there is one); the stored rule."""
    path = Path(cfg.output_dir) / f"{name}.sql"
    path.write_text(sql, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "spark_pipeline", "rules", "apply", str(path), "--name", name],
                          check=False, cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"rules apply {name} failed ({done.returncode}): {done.stderr[-1000:]}")
    log.info("rules apply %s: analysed by %s", name, "the running pipeline"
             if "analysed by the running pipeline" in done.stderr else "the command's own JVM")
    return store.latest_rules()[name]


def warm_cli(env: dict[str, str], folder: Path) -> float:
    """One untimed `rules apply` process of a rule it refuses (nothing is stored), so that the JDK class archive
    its JVM starts from is recorded before anything is measured (an operator's first apply records it); then wait
    until that JVM, exiting after the command, has written it. The command's seconds."""
    path = folder / "bench_warm.sql"
    path.write_text("SELECT no_such_column FROM events\n", encoding="utf-8")
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "spark_pipeline", "rules", "apply", str(path), "--name",
                           "bench_warm"], check=False, cwd=REPO, env={**env, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)
    took = time.monotonic() - began
    if done.returncode != 2:
        raise RuntimeError(f"the warm-up rules apply should be refused, exit {done.returncode}: {done.stderr[-1000:]}")
    wait("the JVM class archive", lambda: (class_archive.archive_path(cli.PLAN_ONLY_JAVA_OPTIONS, env) is None
                                          or class_archive.recorded(cli.PLAN_ONLY_JAVA_OPTIONS, env)), 120)
    return took


class Running:
    """job.run in a thread (the built-in live queries and the rule manager), stopped with its built-in queries."""

    def __init__(self, spark: SparkSession, cfg: PipelineConfig) -> None:
        self.spark = spark
        self.cfg = cfg
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        wait("the built-in live query", lambda: self.builtin("aggregates_live"), 300)

    def _run(self) -> None:
        try:
            job.run(self.cfg, spark=self.spark, group="live")
        except BaseException as exc:
            log.exception("the pipeline stopped")
            self.errors.append(exc)
            FAILED.append(exc)

    def builtin(self, name: str) -> Any:
        return next((q for q in self.spark.streams.active if q.name == name and q.isActive), None)

    def manager(self) -> Any:
        managers = runtime.running()
        return managers[-1] if managers else None

    def tiers(self) -> dict[str, str]:
        """Rule name -> the tier it runs in."""
        m = self.manager()
        return {} if m is None else {n: p.tier for n, p in m.spark_launcher.placements.items()}

    def tiers_of(self, names: list[str]) -> dict[str, int]:
        """How many of `names` run in each tier."""
        tiers = self.tiers()
        out: dict[str, int] = {}
        for n in names:
            out[tiers.get(n, "none")] = out.get(tiers.get(n, "none"), 0) + 1
        return out

    def active(self, names: list[str]) -> bool:
        """Whether every rule of `names` has a started, active query (its pack's, for a packed rule)."""
        m = self.manager()
        queries = {} if m is None else m.queries()
        return all(n in queries and queries[n].isActive for n in names)

    def stop(self) -> None:
        for q in self.spark.streams.active:
            if not str(q.name).startswith("rule"):
                q.stop()
        self.thread.join(180)
        if self.errors:
            raise self.errors[0]


def records(cfg: PipelineConfig, topic: str, since_ms: int, schemas: WriterSchemas | None = None
            ) -> Iterator[tuple[int, Any]]:
    """(Kafka timestamp ms, decoded value or None) of each record of `topic` from `since_ms` to its current end."""
    for msg in read_to_end(cfg.bootstrap, topic, since_ms=since_ms, timeout_s=300, stall_s=60):
        value = msg.value()
        if value is None:
            continue
        yield msg.timestamp()[1], (schemas.decode(value) if schemas is not None else None)


def quiet(cfg: PipelineConfig, topics: list[str], quiet_s: float, max_s: float) -> bool:
    """Wait until no record was added to `topics` for `quiet_s`; whether that happened within `max_s`."""
    consumer = Consumer(consumer_config(cfg.bootstrap))
    try:
        def ends() -> tuple[int, ...]:
            return tuple(sum(end_offsets(consumer, t).values()) for t in topics)

        deadline = time.monotonic() + max_s
        last, since = ends(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(1.0)
            now = ends()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return True
        return False
    finally:
        consumer.close()
