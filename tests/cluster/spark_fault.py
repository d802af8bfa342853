"""Fault 5 of issue 18, step by step: the streaming job submitted to the standalone cluster as the recipe says, Python
SDK producers sending through the test session's gateway, the worker (and its executor) killed with SIGKILL while a
micro-batch runs, a new worker started, then a batch replay over the same offsets to compare with."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import headwater
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from stack.spark_standalone import SparkStandalone
from tests.cluster.spark_recipe import REPO_ROOT, Recipe, offsets_json
from tests.spark_pipeline.test_crash_recovery import committed
from tests.spark_pipeline.truth import Key, live_aggregates, new_topic
from tests.support.events import page_view_properties
from tests.support.kafka import end_offsets
from tests.support.processes import stop
from tests.support.wait import wait_for as support_wait_for

PRODUCERS = 3
PER_PRODUCER = int(os.environ.get("HEADWATER_SPARK_FAULT_EVENTS", "10000"))  # at least this many each
QUERIES = ("events", "deadletter", "aggregates_final", "loss_audit", "aggregates_live")
WAIT_S = 600.0


def page_view(i: int, run: str) -> dict[str, Any]:
    return page_view_properties(i, run, user_agent="headwater-spark-fault")


def wait_for(what: str, check: Any, timeout: float = WAIT_S, job: subprocess.Popen[bytes] | None = None,
             log: Path | None = None) -> None:
    """tests/support/wait.py's wait, failing at once (with the job's log) when the Spark job exits."""
    def alive() -> None:
        if job is not None and job.poll() is not None:
            raise AssertionError(f"the job exited ({job.returncode}) waiting for {what}: "
                                 f"{log.read_text()[-4000:] if log else ''}")

    support_wait_for(what, check, timeout, interval_s=0.2, alive=alive)


@dataclass
class Replayed:
    summary: dict[str, int]
    windows: dict[Key, int]
    minutes: dict[tuple[int, str], int]


@dataclass
class Producer:
    """A Python SDK client tracking page views (paced) until told to stop, at least PER_PRODUCER of them."""

    client: headwater.Client
    stop: threading.Event
    tracked: int = 0
    errors: list[BaseException] = field(default_factory=list)

    def __call__(self) -> None:
        """About 100 events a second: PER_PRODUCER take long enough for the kill to land while they send. Past
        PER_PRODUCER, the producer goes on until told to stop, up to 3x as many."""
        run = uuid.uuid4().hex
        while self.tracked < 3 * PER_PRODUCER and not (self.tracked >= PER_PRODUCER and self.stop.is_set()):
            for _ in range(25):
                self.client.track("page_view", page_view(self.tracked, run))
                self.tracked += 1
            time.sleep(0.25)


class FaultRun:
    def __init__(self, recipe: Recipe, spark: SparkStandalone, env: dict[str, str], tmp: Path) -> None:
        self.recipe, self.spark, self.tmp = recipe, spark, tmp
        self.bootstrap, self.topic = env["KAFKA_BOOTSTRAP"], env["EVENTS_TOPIC"]
        self.gateway, self.write_key = env["GATEWAY_URL"], env["HEADWATER_WRITE_KEY"]
        self.start = end_offsets(self.bootstrap, self.topic)
        self.end: dict[int, int] = {}
        self.aggregates_topic = new_topic(self.bootstrap, "test.cluster.aggregates")
        self.out = tmp / "out"
        self.log = tmp / "job.log"
        self.job_env = {
            "EVENTS_TOPIC": self.topic, "AGGREGATES_TOPIC": self.aggregates_topic,
            "HEADWATER_PIPELINE_DIR": str(self.out),
            "HEADWATER_STARTING_OFFSETS": offsets_json(self.topic, self.start),
            # Small batches back to back, so that the kill lands inside one.
            "HEADWATER_MAX_OFFSETS_PER_TRIGGER": "3000", "HEADWATER_FILE_TRIGGER": "0 seconds",
            "HEADWATER_LATENESS": "2 minutes",
        }
        self.job: subprocess.Popen[bytes] | None = None
        self.stop_producing = threading.Event()
        self.tracked: dict[str, int] = {}  # producer id -> events it tracked (seqs 0 .. n-1)
        self.acknowledged = self.total = 0
        self.figures: dict[str, Any] = {}

    def start_job(self) -> None:
        with self.log.open("wb") as log:
            command = self.recipe.script(self.recipe.submit_with("run"))
            self.job = subprocess.Popen(["bash", "-c", command], cwd=REPO_ROOT, env=self.recipe.env(self.job_env),
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for("the job's queries to start", lambda: self.log.read_text().count("started query") >= len(QUERIES),
                 job=self.job, log=self.log)

    def checkpoint(self, query: str) -> Path:
        return self.out / "checkpoints" / query

    def batches(self, query: str, log: str) -> list[int]:
        folder = self.checkpoint(query) / log
        return sorted(int(p.name) for p in folder.glob("[0-9]*")) if folder.is_dir() else []

    def produce_and_kill(self) -> None:
        clients = [headwater.Client(self.gateway, self.write_key, spool_dir=str(self.tmp / f"spool-{i}"),
                                    linger_s=0.05, max_queue_events=50_000) for i in range(PRODUCERS)]
        producers = [Producer(c, self.stop_producing) for c in clients]
        threads = [threading.Thread(target=p, daemon=True) for p in producers]
        for t in threads:
            t.start()
        try:
            self._kill_mid_batch(threads)
        finally:
            self.stop_producing.set()
            for t in threads:
                t.join(WAIT_S)
            for c in clients:
                assert c.flush(WAIT_S), c.metrics()
                assert c.close(60), c.metrics()
        self.tracked = {c.producer_id: p.tracked for c, p in zip(clients, producers, strict=True)}
        self.total = sum(self.tracked.values())
        self.acknowledged = sum(c.metrics().acknowledged for c in clients)
        assert all(c.metrics().dropped == {} for c in clients)
        self.figures["events"] = self.total

    def _kill_mid_batch(self, producers: list[threading.Thread]) -> None:
        # Some batches committed, then one planned (its offsets logged) and not committed: its tasks are running.
        wait_for("two committed batches", lambda: len(self.batches("events", "commits")) >= 2, job=self.job,
                 log=self.log)
        wait_for("a batch in flight", lambda: set(self.batches("events", "offsets"))
                 - set(self.batches("events", "commits")), job=self.job, log=self.log)
        in_flight = max(set(self.batches("events", "offsets")) - set(self.batches("events", "commits")))
        killed_at = time.monotonic()
        self.figures["producers_sending_at_kill"] = sum(t.is_alive() for t in producers)
        self.figures["killed_worker_pid"] = self.spark.kill_worker()
        self.figures["in_flight_batch"] = in_flight
        self.spark.start_worker()
        self.figures["new_worker_s"] = round(time.monotonic() - killed_at, 1)
        wait_for(f"batch {in_flight} to commit", lambda: in_flight in self.batches("events", "commits"), job=self.job,
                 log=self.log)
        self.figures["recovery_s"] = round(time.monotonic() - killed_at, 1)
        assert any(w["coresused"] > 0 for w in self.spark.alive_workers()), self.spark.state()  # the new executor

    def _consumed(self, query: str) -> dict[int, int] | None:
        """The topic offsets the latest committed batch of `query` read up to."""
        commits = self.batches(query, "commits")
        if not commits:
            return None
        for line in (self.checkpoint(query) / "offsets" / str(commits[-1])).read_text().splitlines()[2:]:
            source = json.loads(line)
            if isinstance(source, dict) and self.topic in source:
                return {int(p): int(o) for p, o in source[self.topic].items()}
        return None

    def wait_caught_up(self) -> None:
        self.end = end_offsets(self.bootstrap, self.topic)
        for query in QUERIES:
            wait_for(f"{query} to reach {self.end}", lambda q=query: self._consumed(q) == self.end,
                     job=self.job, log=self.log)
        durations = [self._duration(b) for b in self.batches("events", "commits")]
        self.figures["batches"] = len(durations)
        self.figures["batch_s_median"] = round(statistics.median(durations), 2)
        self.figures["batch_s_faulted"] = round(self._duration(self.figures["in_flight_batch"]), 2)

    def _duration(self, batch: int) -> float:
        """Seconds from a batch's offsets log entry to its commit entry (the events query)."""
        folder = self.checkpoint("events")
        return (folder / "commits" / str(batch)).stat().st_mtime - (folder / "offsets" / str(batch)).stat().st_mtime

    def stop_job(self) -> None:
        if self.job is not None:
            stop(self.job, 120, group=True, kill_wait_s=30)

    def replay(self) -> Replayed:
        output = self.tmp / "replay"
        stdout = self.recipe.run(self.recipe.submit_with(
            "replay", "--output", str(output), "--starting-offsets", offsets_json(self.topic, self.start),
            "--ending-offsets", offsets_json(self.topic, self.end)), extra=self.job_env)
        windows = {(r["granularity"], ms(r["window_start"]), r["event_type"], r["region"]): r["events"]
                   for r in pq.read_table(output / "aggregates").to_pylist()}
        minutes = {(ms(r["window_start"]), r["event_type"]): r["count"]
                   for r in pq.read_table(output / "counts_1m").to_pylist()}
        return Replayed(Recipe.summary(stdout), windows, minutes)

    def streamed_events(self) -> pa.Table:
        return committed(self.out / "events").to_table(columns=["event_id", "producer_id", "seq", "event_type",
                                                                "event_time"])

    @staticmethod
    def streamed_minutes(events: pa.Table) -> dict[tuple[int, str], int]:
        per_ms = {"s": 1 / 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[events.schema.field("event_time").type.unit]
        times = [int(t // per_ms) for t in pc.cast(events["event_time"], pa.int64()).to_pylist()]
        return dict(Counter((t - t % 60_000, e) for t, e in zip(times, events["event_type"].to_pylist(), strict=True)))

    def live_windows(self) -> dict[Key, int]:
        return {k: int(r["events"]) for k, r in live_aggregates(self.bootstrap, self.aggregates_topic).items()}

    def final_windows(self) -> dict[Key, int]:
        try:
            rows = committed(self.out / "aggregates_final").to_table().to_pylist()
        except (AssertionError, FileNotFoundError):  # no window final yet (the lateness is longer than the run)
            return {}
        return {(r["granularity"], ms(r["window_start"]), r["event_type"], r["region"]): r["events"] for r in rows}

    def report(self, **more: Any) -> None:
        print("fault5 figures:", json.dumps({**self.figures, **more}))


def ms(value: Any) -> int:
    return int(value.timestamp() * 1000)
