"""The pipeline on a Spark standalone cluster: the documented recipe run as it stands (docs/spark-pipeline.md, "On a
Spark standalone cluster"), and fault 5 of issue 18: the worker killed with SIGKILL mid-batch while SDK producers
send 30,000 events through the gateway; the job recovers on a new worker and a batch replay over the same offsets
equals the streaming outputs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from stack.spark_standalone import SparkStandalone
from tests.cluster.spark_fault import FaultRun
from tests.cluster.spark_recipe import Recipe, spark_processes
from tests.spark_pipeline.truth import EventSet, Key, new_topic, produce_event_set

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(1200)]

START_MS = 1_790_000_800_000


@pytest.fixture(scope="module")
def truth(bootstrap: str, registry_url: str) -> tuple[str, EventSet]:
    """A fresh topic holding a known event set (with duplicates and one undecodable record)."""
    topic = new_topic(bootstrap, "test.cluster")
    return topic, produce_event_set(bootstrap, registry_url, topic, count=600, start_ms=START_MS)


@pytest.fixture(scope="module")
def cluster(stack_env: dict[str, str], truth: tuple[str, EventSet],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Recipe, SparkStandalone]]:
    """The cluster the recipe's first lines start (its stack.env names the truth topic); its last line stops it."""
    state = tmp_path_factory.mktemp("state")
    (state / "stack.env").write_text("".join(f"{k}={v}\n" for k, v in {**stack_env, "EVENTS_TOPIC": truth[0]}.items()))
    recipe = Recipe.from_doc(state)
    try:
        recipe.run(recipe.start)
        yield recipe, SparkStandalone(state, worker_cores=2, worker_memory="1g")  # what the recipe's `up` offers
    finally:
        recipe.run(recipe.stop)
    assert SparkStandalone(state).running() == {"spark-master": False, "spark-worker": False}
    assert spark_processes(state) == []


def test_the_documented_recipe_replays_on_the_cluster(cluster: tuple[Recipe, SparkStandalone],
                                                      truth: tuple[str, EventSet]) -> None:
    recipe, spark = cluster
    assert len(spark.alive_workers()) == 1
    stdout = recipe.run(recipe.submit)
    counts = Recipe.summary(stdout)
    events = truth[1]
    assert counts["events"] == len(events.events) and counts["deadletter"] == 1
    out = recipe.state / "replay"
    aggregates = pq.read_table(out / "aggregates").to_pylist()
    found = {(r["granularity"], int(r["window_start"].timestamp() * 1000), r["event_type"], r["region"]): r["events"]
             for r in aggregates}
    assert found == events.windows()  # the regions come from the packaged inventory, joined on the executor
    assert {r for _, _, _, r in found} - {"unknown"}
    minutes = {(int(r["window_start"].timestamp() * 1000), r["event_type"]): r["count"]
               for r in pq.read_table(out / "counts_1m").to_pylist()}
    assert minutes == events.minute_counts()
    # The executor ran on the worker with the zip that --py-files shipped, fetched into its own folder.
    apps = sorted(spark.work_dir.glob("app-*"))
    assert apps, f"no application folder in {spark.work_dir}"
    executors = [d for d in apps[-1].iterdir() if d.is_dir()]
    assert executors and all((d / "headwater_pipeline.zip").is_file() for d in executors)
    assert any("Finished task" in (d / "stderr").read_text() for d in executors)


@pytest.mark.skipif(not os.environ.get("HEADWATER_CHAOS_SPARK"),
                    reason="fault 5 runs in `make chaos-spark` (30,000 events; over 10 minutes on 2 cores)")
def test_fault5_worker_killed_mid_batch_and_replaced(cluster: tuple[Recipe, SparkStandalone],
                                                     stack_env: dict[str, str], tmp_path: Path) -> None:
    recipe, spark = cluster
    run = FaultRun(recipe, spark, stack_env, tmp_path)
    run.start_job()
    try:
        run.produce_and_kill()
        run.wait_caught_up()
    finally:
        run.stop_job()
    replay = run.replay()
    streamed = run.streamed_events()
    # No duplicates, nothing missing: every acknowledged (producer, seq) once in the streaming output.
    ids = streamed.column("event_id").to_pylist()
    assert len(ids) == len(set(ids)) == run.acknowledged == run.total
    for producer, tracked in run.tracked.items():
        seqs = pc.filter(streamed, pc.equal(streamed["producer_id"], producer)).column("seq").to_pylist()
        assert sorted(seqs) == list(range(tracked)), producer
    assert replay.summary["events"] == run.total and replay.summary["deadletter"] == 0
    # Counts per window and type: the streaming outputs equal the replay's.
    assert run.streamed_minutes(streamed) == replay.minutes
    live: dict[Key, int] = run.live_windows()
    assert live == replay.windows
    final = run.final_windows()
    assert all(replay.windows[k] == v for k, v in final.items())
    run.report(final_windows=len(final), windows=len(live))
