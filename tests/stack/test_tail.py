"""`python -m stack tail <topic>` (docs/local-stack.md): a topic's newest records read back decoded, the events by
their writer schema, the dead letters as JSON; the stack found by HEADWATER_STATE_DIR."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from common.envfile import write_env
from stack.config import REPO_ROOT
from tests.deadletter.incident import json_batch, post

pytestmark = pytest.mark.integration


def page_view(producer: str, seq: int, **extra: Any) -> dict[str, Any]:
    props = json.loads((REPO_ROOT / "schemas" / "examples" / "page_view.json").read_text())["properties"]
    return {"event_id": str(uuid.uuid4()), "event_type": "page_view", "producer_id": producer, "seq": seq,
            "node_id": "node-0001", "created_at": int(time.time() * 1000), "properties": {**props, **extra}}


def tail(state: Path, *args: str) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_") and k != "KAFKA_BOOTSTRAP"}
    done = subprocess.run([sys.executable, "-m", "stack", "tail", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120, check=False, env={**env, "HEADWATER_STATE_DIR": str(state)})
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_tail_reads_events_and_dead_letters_back_decoded(stack_env: dict[str, str], tmp_path: Path) -> None:
    write_env(tmp_path / "stack.env", stack_env)
    producer = str(uuid.uuid4())
    good, bad = page_view(producer, 0), page_view(producer, 1, not_in_the_schema=1)
    status, body = post(stack_env, json_batch([good, bad]))
    assert status in (200, 422), body

    events = tail(tmp_path, stack_env["EVENTS_TOPIC"], "-n", "50")
    assert 0 < len(events) <= 50
    mine = [e for e in events if e["headers"].get("event_id") == good["event_id"]]
    assert mine and mine[0]["value"]["event_type"] == "page_view"
    assert mine[0]["value"]["properties"]["path"] == good["properties"]["path"]  # Avro, decoded
    dead = tail(tmp_path, stack_env["DEADLETTER_TOPIC"], "-n", "50")
    letter = next(d["value"] for d in dead if d["headers"].get("event_id") == bad["event_id"])
    assert letter["reason"] == "invalid_properties" and "not_in_the_schema" in letter["message"]
    assert tail(tmp_path, stack_env["EVENTS_TOPIC"], "-n", "0") == []
