"""ops/alerts.yml is valid for Prometheus (`promtool check rules`) and each alert fires on its failure mode and
stays quiet otherwise (`promtool test rules ops/alerts_test.yml`)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from stack.config import REPO_ROOT

pytestmark = pytest.mark.unit
OPS = REPO_ROOT / "ops"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("promtool")
    assert exe, "promtool is not installed: run `bash setup/setup-browser.sh` (make setup does)"
    return subprocess.run([exe, *args], cwd=OPS, capture_output=True, text=True, timeout=120, check=False)


def test_alert_rules_are_valid() -> None:
    done = promtool("check", "rules", "alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 11 rules found" in done.stdout


def test_alert_rules_fire_on_their_failure_modes() -> None:
    done = promtool("test", "rules", "alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_unit_test() -> None:
    rules = (OPS / "alerts.yml").read_text()
    tests = (OPS / "alerts_test.yml").read_text()
    names = [line.split(":", 1)[1].strip() for line in rules.splitlines() if line.strip().startswith("- alert:")]
    assert len(names) == 11
    assert [n for n in names if f"alertname: {n}" not in tests] == []
