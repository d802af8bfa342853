"""The rule part of `make demo`: apply an example rule while the pipeline runs, then show its output from Kafka."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from demo.topic import latest_rows
from stack.config import REPO_ROOT

RULE_NAME = "top_pages"
RULE_FILE = Path("spark_pipeline/rules/examples/top_pages.sql")


def pipeline_env() -> dict[str, str]:
    """The demo pipeline's environment: a rule applied while it runs reads the events topic from its beginning,
    so its output covers the demo's events however long the apply takes on a small machine."""
    return {**os.environ, "HEADWATER_RULE_STARTING_OFFSETS": "earliest"}


class RuleApply:
    """`python -m spark_pipeline rules apply` of the example rule, in a thread (its analysis takes a while)."""

    def __init__(self, env_file: Path) -> None:
        self.ok = threading.Event()
        self.done = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self._thread = threading.Thread(target=self._apply, args=(env_file,), daemon=True)

    def start(self) -> None:
        print(f"applying the rule {RULE_FILE} as `{RULE_NAME}` while the pipeline runs "
              f"(python -m spark_pipeline rules apply {RULE_FILE} --name {RULE_NAME})", flush=True)
        self._thread.start()

    def wait(self, say: Callable[[str], None], progress_every_s: float = 15.0) -> bool:
        """Wait until the apply ends, however long its analysis takes on a busy host, saying so while it runs
        (Ctrl-C gives up); True if applied."""
        t0 = time.monotonic()
        while not self.done.wait(progress_every_s):
            say(f"waiting for `rules apply` ({time.monotonic() - t0:.0f} s: it analyses the rule with Spark)")
        return self.ok.is_set()

    def stop(self) -> None:
        """End the apply if it still runs (the demo is stopping)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()

    def _apply(self, env_file: Path) -> None:
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "spark_pipeline", "--env-file", str(env_file), "rules", "apply",
                 str(RULE_FILE), "--name", RULE_NAME], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            stdout, stderr = self._proc.communicate()
            for line in stdout.splitlines():
                print(f"  rules apply: {line}", flush=True)
            if self._proc.returncode == 0:
                self.ok.set()
            else:
                print(f"  rules apply failed ({self._proc.returncode}): {stderr.strip()[-500:]}", flush=True)
        finally:
            self.done.set()


def show_output(env: dict[str, str], wait_s: float = 90.0, top: int = 10) -> None:
    """Print the newest complete-looking minute of the rule's output: the top pages per region by views."""
    topic = f"headwater.rule.{RULE_NAME}"
    deadline = time.monotonic() + wait_s
    rows = latest_rows(env, topic)
    while not rows and time.monotonic() < deadline:
        time.sleep(5)
        rows = latest_rows(env, topic)
    if not rows:
        print(f"no output in {topic} yet: see `python -m spark_pipeline rules list` for the rule's state")
        return
    windows = sorted({r["window"]["start"] for r in rows.values()})
    shown = windows[-2] if len(windows) > 1 else windows[-1]  # the last full minute, if there is one
    best = sorted((r for r in rows.values() if r["window"]["start"] == shown), key=lambda r: -int(r["views"]))[:top]
    print(f"rule {RULE_NAME}: {len(rows)} (window, region, path) rows in {topic}; top pages of the minute "
          f"{shown:%H:%M} UTC, read back from Kafka:")
    print(f"  {'region':<10} {'path':<42} {'views':>6} {'sessions':>8}")
    for r in best:
        print(f"  {r['region']!s:<10} {r['path']!s:<42} {r['views']:>6} {r['sessions']:>8}")
    print(f"  (rules list: .venv/bin/python -m spark_pipeline rules list; remove it: .venv/bin/python -m "
          f"spark_pipeline rules delete {RULE_NAME})")
