"""The rule part of `make demo`: apply an example rule while the pipeline runs, then show its output from Kafka."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import fastavro
from confluent_kafka import Consumer, KafkaError, TopicPartition

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


def _schema(registry_url: str, schema_id: int, cache: dict[int, Any]) -> Any:
    if schema_id not in cache:
        with urllib.request.urlopen(f"{registry_url.rstrip('/')}/schemas/ids/{schema_id}", timeout=10) as resp:
            cache[schema_id] = fastavro.parse_schema(json.loads(json.loads(resp.read())["schema"]))
    return cache[schema_id]


def latest_rows(env: dict[str, str], topic: str) -> dict[bytes, dict[str, Any]]:
    """The latest record per key of a rule's output topic (what a compacted topic converges to), decoded."""
    consumer = Consumer({"bootstrap.servers": env["KAFKA_BOOTSTRAP"], "group.id": f"demo-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    cache: dict[int, Any] = {}
    rows: dict[bytes, dict[str, Any]] = {}
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return rows
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        pending, deadline = set(meta.partitions), time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                continue
            value = msg.value()
            if value:
                parsed = _schema(env["REGISTRY_URL"], int.from_bytes(value[1:5], "big"), cache)
                rows[msg.key() or b""] = dict(fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed))  # type: ignore[arg-type]
    finally:
        consumer.close()
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
