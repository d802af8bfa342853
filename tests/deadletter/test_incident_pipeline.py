"""The whole incident through the Spark pipeline: a producer's events dead-lettered for a version not registered
yet open a seq gap in the loss audit; after the fix and the replay the audit reports the gap `arrived_late` and
the aggregates count every recovered event exactly once (the replay is run twice). The pipeline runs first as an
operator runs it (`python -m spark_pipeline --env-file ... run --available-now`); its second run, from the first's
checkpoints, is the same job on the test session's running Spark (no second JVM start-up and query planning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from common.envfile import read_env
from spark_pipeline import job
from spark_pipeline.config import PipelineConfig
from stack.config import REPO_ROOT
from tests.deadletter.incident import cli, json_batch, last_json, new_version_schema, post, register
from tests.spark_pipeline.truth import live_aggregates

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# A Spark process and the session's Spark on a shared 2-core machine: far beyond the suite's 300 s default.
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(1200)]
EVENTS = 30
LOST = range(10, 20)  # the seqs that named the unregistered version


def server_metrics(producer: str) -> list[dict[str, Any]]:
    props = json.loads((REPO_ROOT / "schemas" / "examples" / "server_metric.json").read_text())["properties"]
    now = int(time.time() * 1000)
    events = []
    for seq in range(EVENTS):
        event: dict[str, Any] = {"event_id": str(uuid.uuid4()), "event_type": "server_metric", "producer_id": producer,
                                 "seq": seq, "node_id": "node-0003", "created_at": now + seq, "properties": dict(props)}
        if seq in LOST:
            event["schema_version"] = 3
            event["properties"]["region_v3"] = "eu-west-1"
        events.append(event)
    return events


SETTINGS = {"HEADWATER_LOSS_GRACE": "0 seconds", "HEADWATER_LATENESS": "10 minutes"}


def run_pipeline(env: dict[str, str], out: Path) -> None:
    """`python -m spark_pipeline run --available-now` on the private stack, as an operator would run it."""
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_") and k not in (
        "KAFKA_BOOTSTRAP", "REGISTRY_URL")}
    proc_env |= SETTINGS
    done = subprocess.run([sys.executable, "-m", "spark_pipeline", "--env-file", env["ENV_FILE"], "run",
                           "--available-now", "--output", str(out)], cwd=REPO_ROOT, env=proc_env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def rerun_pipeline(spark: SparkSession, env: dict[str, str], out: Path) -> None:
    """The same job, with the same stack.env and settings, on `spark`: it restarts from the checkpoints in `out`."""
    cfg = PipelineConfig.from_env({**read_env(Path(env["ENV_FILE"])), **SETTINGS})
    job.run(cfg.with_overrides(output_dir=str(out)), available_now=True, spark=spark)


def audit_rows(out: Path, producer: str) -> list[tuple[int, int, int, str]]:
    table = pq.read_table(out / "loss_audit").to_pylist()
    return sorted((r["first_seq"], r["last_seq"], r["missing"], r["status"]) for r in table
                  if r["producer_id"] == producer)


def counted(env: dict[str, str], granularity: str) -> int:
    """Events of server_metric in eu-west (node-0003) counted by the live aggregates of one window kind."""
    rows = live_aggregates(env["KAFKA_BOOTSTRAP"], env["AGGREGATES_TOPIC"])
    return sum(int(r["events"]) for (g, _, et, region), r in rows.items()
               if g == granularity and et == "server_metric" and region == "eu-west")


def test_replayed_dead_letters_close_the_loss_audit_gap_and_count_once(spark: SparkSession,
                                                                       incident_env: dict[str, str],
                                                                       tmp_path: Path) -> None:
    env, out = incident_env, tmp_path / "pipeline"
    since = str(int(time.time() * 1000) - 1)
    producer = str(uuid.uuid4())
    events = server_metrics(producer)
    status, body = post(env, json_batch(events))
    assert status == 200 and len(body["rejected"]) == len(LOST), body

    run_pipeline(env, out)
    assert audit_rows(out, producer) == [(10, 19, 10, "missing")]
    assert counted(env, "1m") == EVENTS - len(LOST)

    register(env, "server_metric", new_version_schema("server_metric", "region_v3"))
    args = ["replay", "--run", "incident-spark", "--since", since, "--event-type", "server_metric"]
    first = cli(env, *args)
    assert first.returncode == 0 and last_json(first.stdout)["replayed"] == len(LOST), first.stdout + first.stderr
    again = cli(env, *args)  # idempotent: nothing is written twice
    assert last_json(again.stdout)["replayed"] == 0, again.stdout

    rerun_pipeline(spark, env, out)
    assert audit_rows(out, producer) == [(10, 19, 10, "arrived_late"), (10, 19, 10, "missing")]
    assert counted(env, "1m") == EVENTS  # every recovered event counted, and once
    assert counted(env, "10s") == EVENTS
    ids = [r["event_id"] for r in pq.read_table(out / "events").to_pylist() if r["producer_id"] == producer]
    assert len(ids) == len(set(ids)) == EVENTS
