"""The rule part of `make demo`: apply an example rule while the pipeline runs, then show its output from Kafka."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common.avro_frame import WriterSchemas
from common.kafka_read import read_to_end
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
        self._thread = threading.Thread(target=self._apply, args=(env_file,), daemon=True)

    def start(self) -> None:
        print(f"applying the rule {RULE_FILE} as `{RULE_NAME}` while the pipeline runs "
              f"(python -m spark_pipeline rules apply {RULE_FILE} --name {RULE_NAME})", flush=True)
        self._thread.start()

    def _apply(self, env_file: Path) -> None:
        try:
            done = subprocess.run([sys.executable, "-m", "spark_pipeline", "--env-file", str(env_file), "rules",
                                   "apply", str(RULE_FILE), "--name", RULE_NAME], cwd=REPO_ROOT, capture_output=True,
                                  text=True, timeout=600, check=False)
            for line in done.stdout.splitlines():
                print(f"  rules apply: {line}", flush=True)
            if done.returncode == 0:
                self.ok.set()
            else:
                print(f"  rules apply failed ({done.returncode}): {done.stderr.strip()[-500:]}", flush=True)
        finally:
            self.done.set()


def latest_rows(env: dict[str, str], topic: str) -> dict[bytes, dict[str, Any]]:
    """The latest record per key of a rule's output topic (what a compacted topic converges to), decoded."""
    schemas = WriterSchemas(env["REGISTRY_URL"])
    rows: dict[bytes, dict[str, Any]] = {}
    for msg in read_to_end(env["KAFKA_BOOTSTRAP"], topic, committed=False, timeout_s=30, missing_ok=True):
        value = msg.value()
        if value:
            rows[msg.key() or b""] = dict(schemas.decode(value))
    return rows


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
