"""Integration test: a tiny headless locust run against the real gateway, then the reconciliation against Kafka."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from common.envfile import write_env
from stack.config import REPO_ROOT

pytestmark = pytest.mark.integration


def test_tiny_headless_run_reconciles_with_nothing_missing(stack_env: dict[str, str], tmp_path: Path) -> None:
    # A failure, never a skip: the session's stack always runs a gateway, and a HEADWATER_TEST_STACK_ENV that
    # names a stack without one is a mistake to report.
    assert "GATEWAY_URL" in stack_env and "HEADWATER_WRITE_KEY" in stack_env, \
        f"the test stack has no gateway (GATEWAY_URL / HEADWATER_WRITE_KEY missing from {sorted(stack_env)})"
    env_file = tmp_path / "stack.env"
    write_env(env_file, stack_env)
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "loadtest.run", "--nodes", "300", "--rate", "1", "--batch", "5", "--users", "4",
         "--duration", "6", "--stack-env", str(env_file), "--runs-dir", str(runs), "--quiet"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = runs.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    report = summary["reconcile"]
    assert report["acknowledged"] > 0
    assert report["missing"] == 0 and report["found"] == report["acknowledged"]
    assert report["id_mismatches"] == 0
    assert summary["locust_exit"] == 0 and summary["requests"] > 0
    assert (run_dir / "report.html").exists() and (run_dir / "stats_stats.csv").exists()
    acked_nodes = {line.split("\t")[0] for f in run_dir.glob("acks-*.tsv") for line in f.read_text().splitlines()}
    # More producers than connections: multiplexed (how many more depends on how fast the host answers in 6 s).
    assert len(acked_nodes) > 4
