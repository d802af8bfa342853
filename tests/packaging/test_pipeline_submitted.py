"""The pipeline as a cluster runs it: the artefact of `make pipeline-artifact` (zip + entry file) given to a real
`spark-submit`, from an empty folder with no repository on the Python path; the node inventory and the scheduler
pools come from inside the zip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.spark.generate import generate
from spark_pipeline.session import connector_jars
from stack import pipeline_artifact
from tests.spark_pipeline.truth import new_topic, produce_events

pytestmark = [pytest.mark.integration, pytest.mark.spark]
VENV_BIN = Path(sys.executable).parent  # the virtualenv running the tests: pyspark, its deps and spark-submit


def spark_submit(artefact: Path, workdir: Path, *args: str, env: dict[str, str] | None = None) -> str:
    python = str(VENV_BIN / "python")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "PYSPARK", "HEADWATER_"))}
    command = [str(VENV_BIN / "spark-submit"), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
               "--jars", ",".join(str(j) for j in connector_jars()),
               "--py-files", str(artefact / pipeline_artifact.ZIP_NAME), str(artefact / pipeline_artifact.ENTRY_NAME),
               *args]
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=600, check=False,
                          env={**clean, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, **(env or {})})
    assert done.returncode == 0, f"spark-submit {args} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


def test_spark_submit_runs_a_replay_from_the_artefact(tmp_path: Path, bootstrap: str, registry_url: str) -> None:
    artefact, workdir = tmp_path / "artefact", tmp_path / "empty"
    workdir.mkdir()
    pipeline_artifact.build(artefact)
    assert "usage: headwater-pipeline" in spark_submit(artefact, workdir, "--help")

    topic = new_topic(bootstrap, "test.packaged", partitions=1)
    events = list(generate(12, start_ms=1_790_000_000_000, seed=5))
    produce_events(bootstrap, registry_url, topic, events)
    out = tmp_path / "replay"
    stdout = spark_submit(artefact, workdir, "replay", "--output", str(out),
                          env={"KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url, "EVENTS_TOPIC": topic})
    summary = [line for line in stdout.splitlines() if line.startswith('{"replay"')]
    assert summary, stdout
    counts = json.loads(summary[-1])
    assert counts["events"] == len(events) and counts["deadletter"] == 0
    assert counts["aggregates"] > 0  # joined with the inventory read from inside the zip
