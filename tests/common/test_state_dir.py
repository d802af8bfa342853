"""One state directory, honoured everywhere: with HEADWATER_STATE_DIR set, every command finds the stack's
endpoints there, the pipeline writes its outputs where the console reads them, and `make clean` deletes what the
variable names (and nothing else)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.envfile import pipeline_dir, stack_env_file, stack_settings, state_dir, write_env
from console.config import ConsoleConfig
from deadletter.config import ToolConfig
from schemas.cli import registry_url
from spark_pipeline.config import PipelineConfig
from stack.config import REPO_ROOT, StackConfig

STACK_VARS = ("KAFKA_BOOTSTRAP", "REGISTRY_URL", "GATEWAY_URL", "DEADLETTER_TOPIC", "EVENTS_TOPIC")


def _clean_env(**extra: str) -> dict[str, str]:
    """The process environment without any stack setting, plus `extra`."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_") and k not in STACK_VARS}
    return {**keep, **extra}


@pytest.mark.unit
def test_every_reader_takes_the_state_directory_from_the_variable(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"HEADWATER_STATE_DIR": str(tmp_path)}
    assert state_dir(env) == tmp_path and stack_env_file(env) == tmp_path / "stack.env"
    assert StackConfig.from_env(env).env_file == stack_env_file(env)
    # The pipeline writes where the console reads (it wrote to ./.headwater/pipeline, the console read the state dir).
    assert PipelineConfig.from_env(env).output_dir == str(ConsoleConfig.from_env(env).pipeline_dir) \
        == pipeline_dir(env) == str(tmp_path / "pipeline")
    assert pipeline_dir({**env, "HEADWATER_PIPELINE_DIR": "hdfs://nn:8020/hw"}) == "hdfs://nn:8020/hw"
    write_env(tmp_path / "stack.env", {"KAFKA_BOOTSTRAP": "127.0.0.1:1", "REGISTRY_URL": "http://127.0.0.1:2"})
    for name in STACK_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HEADWATER_STATE_DIR", str(tmp_path))
    assert ToolConfig.load(None).bootstrap == "127.0.0.1:1"  # once: "KAFKA_BOOTSTRAP is not set"
    assert registry_url(None) == "http://127.0.0.1:2"
    assert stack_settings(None, {**env, "KAFKA_BOOTSTRAP": "b:9"})["KAFKA_BOOTSTRAP"] == "b:9"  # the env wins


@pytest.mark.integration
def test_the_dead_letter_tool_finds_the_stack_by_the_state_directory(stack_env: dict[str, str],
                                                                      tmp_path: Path) -> None:
    write_env(tmp_path / "stack.env", stack_env)
    done = subprocess.run([sys.executable, "-m", "deadletter", "summary"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False,
                          env=_clean_env(HEADWATER_STATE_DIR=str(tmp_path), PYTHONPATH=str(REPO_ROOT)))
    assert done.returncode == 0, done.stderr


@pytest.mark.integration  # runs make and the stack's command line, no broker
def test_make_clean_deletes_what_the_variable_names(tmp_path: Path) -> None:
    for folder in ("data/kafka", "logs", "run", "pipeline/checkpoints", "conf"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "x").write_text("x")
    (tmp_path / "gateway").mkdir()
    (tmp_path / "gateway" / "dev-write-key").write_text("hw_kept\n")
    done = subprocess.run(["make", "--no-print-directory", "clean"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, check=False, env=_clean_env(HEADWATER_STATE_DIR=str(tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gateway"]
    assert (tmp_path / "gateway" / "dev-write-key").read_text() == "hw_kept\n"
