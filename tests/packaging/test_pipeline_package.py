"""The pipeline from its own package, with no repository on the Python path, both ways it deploys: pip-installed
into a fresh virtualenv (`headwater-pipeline`, building its own local session), and as a cluster runs it, the
artefact of `make pipeline-artifact` (zip + entry file) given to a real `spark-submit`, the node inventory and the
scheduler pools read from inside the zip. Both replay the same small topic from an empty folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.spark.generate import generate
from deploy import pipeline_artifact
from spark_pipeline.session import connector_jars
from tests.packaging.installs import Installed, install
from tests.spark_pipeline.truth import new_topic, produce_events

# pip installing pyspark and starting Spark twice take minutes on a loaded 2-core machine (default timeout 300 s).
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1200)]
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


def entry_help(artefact: Path, workdir: Path) -> str:
    """The entry file's --help with only the zip on the Python path, as spark-submit's --py-files sets it (argument
    parsing runs before any Spark session, so no JVM is started for it: the replay below goes through spark-submit)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "PYSPARK", "HEADWATER_"))}
    done = subprocess.run([str(VENV_BIN / "python"), str(artefact / pipeline_artifact.ENTRY_NAME), "--help"],
                          cwd=workdir, capture_output=True, text=True, timeout=120, check=False,
                          env={**clean, "PYTHONPATH": str(artefact / pipeline_artifact.ZIP_NAME)})
    assert done.returncode == 0, f"--help exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


EVENTS = 12


@pytest.fixture(scope="module")
def topic(bootstrap: str, registry_url: str) -> str:
    """A topic holding EVENTS generated events (3 types x 2 versions) and nothing else."""
    name = new_topic(bootstrap, "test.packaged", partitions=1)
    produce_events(bootstrap, registry_url, name, list(generate(EVENTS, start_ms=1_790_000_000_000, seed=5)))
    return name


def replay_counts(stdout: str) -> dict[str, int]:
    summary = [line for line in stdout.splitlines() if line.startswith('{"replay"')]
    assert summary, stdout
    counts: dict[str, int] = json.loads(summary[-1])
    assert counts["events"] == EVENTS and counts["deadletter"] == 0
    assert counts["aggregates"] > 0  # joined with the packaged inventory
    return counts


def test_spark_submit_runs_a_replay_from_the_artefact(tmp_path: Path, bootstrap: str, registry_url: str,
                                                      topic: str) -> None:
    artefact, workdir = tmp_path / "artefact", tmp_path / "empty"
    workdir.mkdir()
    pipeline_artifact.build(artefact)
    assert "usage: headwater-pipeline" in entry_help(artefact, workdir)
    stdout = spark_submit(artefact, workdir, "replay", "--output", str(tmp_path / "replay"),
                          env={"KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url, "EVENTS_TOPIC": topic})
    replay_counts(stdout)


def test_the_installed_package_runs_a_replay(tmp_path: Path, bootstrap: str, registry_url: str, topic: str) -> None:
    venv: Installed = install(tmp_path / "pkg", "spark_pipeline", "common")
    assert "usage: headwater-pipeline" in venv.run(venv.bin("headwater-pipeline"), "--help")
    jars = str(connector_jars()[0].parent)
    stdout = venv.run(venv.bin("headwater-pipeline"), "replay", "--output", tmp_path / "replay", timeout=600,
                      extra={"KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url, "EVENTS_TOPIC": topic,
                             "HEADWATER_SPARK_JARS_DIR": jars, "SPARK_MASTER": "local[1]"})
    replay_counts(stdout)
