"""The streaming job killed with SIGKILL mid-batch and restarted from its checkpoints ends with exact aggregates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds  # type: ignore[import-untyped]
import pytest

from bench.spark.generate import generate
from spark_pipeline.session import REPO_ROOT
from tests.spark_pipeline.truth import Key, live_aggregates, new_topic, produce_event_set, produce_events

pytestmark = [pytest.mark.spark, pytest.mark.integration]

START_MS = 1_790_000_400_000
# Three batches of every query in all (900 events, then the sentinel): killed once the first is committed, the
# restart replays the batch already planned and does the rest. The cost is the number of batches (five queries
# each on two cores), not the number of events: 120 per batch took the test past 300 s, 300 per batch 257 s.
PER_BATCH = 450


def committed(sink: Path) -> ds.Dataset:
    """The files of a Spark file sink that its `_spark_metadata` log lists, as Spark itself reads them.

    A kill -9 can leave a part-written file in the folder: a batch that did not commit is not in the log
    (its files are rewritten when the batch is re-run), so a reader must go by the log, not the listing.
    """
    added: set[str] = set()
    deleted: set[str] = set()
    for log in sorted((sink / "_spark_metadata").iterdir()):
        if log.name.startswith("."):
            continue
        for line in log.read_text().splitlines()[1:]:  # the first line is the format version, "v1"
            entry = json.loads(line)
            (added if entry["action"] == "add" else deleted).add(entry["path"].removeprefix("file://"))
    files = sorted(added - deleted)
    assert files, f"no committed files in {sink}"
    return ds.dataset(files, format="parquet", partitioning=ds.partitioning(flavor="hive"),
                      partition_base_dir=str(sink))


def final_windows(out: Path) -> dict[Key, int]:
    table = committed(out / "aggregates_final").to_table()
    rows = table.select(["granularity", "window_start", "event_type", "region", "events"]).to_pylist()
    return {(r["granularity"], int(r["window_start"].timestamp() * 1000), r["event_type"], r["region"]): r["events"]
            for r in rows}


@pytest.mark.timeout(600)  # two Spark starts; the second replays the rest of the topic
def test_kill_9_mid_batch_and_restart_from_the_checkpoints(bootstrap: str, registry_url: str, tmp_path: Path) -> None:
    topic, aggregates_topic = new_topic(bootstrap, "test.crash"), new_topic(bootstrap, "test.crash.aggregates")
    truth = produce_event_set(bootstrap, registry_url, topic, count=900, start_ms=START_MS)
    sentinel = list(generate(1, start_ms=truth.max_time_ms + 20 * 60_000, seed=6))
    produce_events(bootstrap, registry_url, topic, sentinel)
    truth.events += sentinel
    out = tmp_path / "out"
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url, "EVENTS_TOPIC": topic,
           "AGGREGATES_TOPIC": aggregates_topic, "HEADWATER_PIPELINE_DIR": str(out),
           "HEADWATER_LATENESS": "10 minutes", "HEADWATER_MAX_OFFSETS_PER_TRIGGER": str(PER_BATCH),
           "HEADWATER_FILE_TRIGGER": "0 seconds", "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "spark_pipeline", "run"]
    with (tmp_path / "first.log").open("w") as log:
        proc = subprocess.Popen(command, env=env, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            # Kill (driver and JVM, the whole process group) once some batches are committed, not all.
            commits = out / "checkpoints" / "aggregates_final" / "commits"
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and not (commits / "0").exists():
                assert proc.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
                time.sleep(0.2)
            assert (commits / "0").exists(), "no batch committed in time"
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    assert not (commits / "2").exists()  # 900+ records at 450 per batch: the job was killed part-way

    # The restart drains the rest in larger batches (the batch already planned is replayed as planned).
    second = subprocess.run([*command, "--available-now"], env={**env, "HEADWATER_MAX_OFFSETS_PER_TRIGGER": "1000"},
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=400, check=False)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]

    assert final_windows(out) == truth.windows(max_end_ms=truth.max_time_ms - 10 * 60_000)
    assert {k: int(r["events"]) for k, r in live_aggregates(bootstrap, aggregates_topic).items()} == truth.windows()
    ids = committed(out / "events").to_table(columns=["event_id"])
    assert ids.num_rows == len(set(ids.column("event_id").to_pylist())) == len(truth.events)
