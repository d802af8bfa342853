"""The dead-letter CLI against a real stack: an incident's dead letters summarised, shown, and replayed exactly
once although the first replay is killed with SIGKILL mid-way (JSON and Avro fast path)."""

from __future__ import annotations

import copy
import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from typing import Any

import fastavro
import pytest
from confluent_kafka import Message

from common.avro_frame import frame, schema_id_of
from stack.config import REPO_ROOT
from tests.deadletter.incident import (
    AVRO_TYPE,
    PROPS,
    avro_batch,
    cli,
    cli_env,
    json_batch,
    last_json,
    max_schema_id,
    new_version_schema,
    post,
    register,
)
from tests.support.kafka import consume_all

pytestmark = pytest.mark.integration


def page_views(producer: str, seqs: range, version_of: Any) -> list[dict[str, Any]]:
    out = []
    for seq in seqs:
        event: dict[str, Any] = {
            "event_id": str(uuid.uuid4()), "event_type": "page_view", "producer_id": producer, "seq": seq,
            "node_id": "node-0001", "created_at": int(time.time() * 1000), "properties": dict(PROPS["page_view"])}
        version = version_of(seq)
        if version is not None:
            event["schema_version"] = version
            event["properties"]["referrer_v3"] = "newsletter"  # the field the producer shipped too early
        out.append(event)
    return out


def purchases(schema_text: str, schema_id: int, count: int) -> tuple[list[bytes], list[str]]:
    """Avro fast-path events framed with a schema id the registry does not hold yet."""
    base = json.loads((REPO_ROOT / "schemas" / "examples" / "purchase.json").read_text())
    parsed = fastavro.parse_schema(json.loads(schema_text))
    producer, framed, ids = str(uuid.uuid4()), [], []
    for seq in range(count):
        record = copy.deepcopy(base)
        record.update(event_id=str(uuid.uuid4()), producer_id=producer, seq=seq, node_id="node-0002",
                      created_at=int(time.time() * 1000))
        record["properties"]["coupon_v3"] = "SPRING"
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        framed.append(frame(schema_id, buf.getvalue()))
        ids.append(record["event_id"])
    return framed, ids


def run_until_killed(env: dict[str, str], args: list[str], after_transactions: int) -> list[str]:
    """Start the replay, SIGKILL it once it reported `after_transactions` commits; its output lines."""
    proc = subprocess.Popen([sys.executable, "-m", "deadletter", "--env-file", env["ENV_FILE"], *args],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env())
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if sum(x.startswith("transaction ") for x in lines) >= after_transactions:
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL, "\n".join(lines)
    return lines


def header(record: Message, name: str) -> str:
    value = dict(record.headers() or []).get(name)
    return value.decode() if isinstance(value, bytes) else str(value)


def test_incident_replay_survives_kill_9_and_writes_each_event_once(incident_env: dict[str, str]) -> None:
    env = incident_env
    since = str(int(time.time() * 1000) - 1)
    producer = str(uuid.uuid4())
    # seq 10..49 name version 3 of page_view, which is not registered yet: 40 dead letters.
    views = page_views(producer, range(60), lambda s: 3 if 10 <= s < 50 else None)
    for chunk in (views[:20], views[20:40], views[40:]):
        status, body = post(env, json_batch(chunk))
        assert status in (200, 422), body
    hopeless = page_views(str(uuid.uuid4()), range(3), lambda s: 9)  # version 9 will never exist
    assert post(env, json_batch(hopeless))[0] == 422
    purchase_id = max_schema_id(env) + 1
    purchase_schema = new_version_schema("purchase", "coupon_v3")
    framed, purchase_ids = purchases(purchase_schema, purchase_id, 10)
    status, body = post(env, avro_batch(framed), AVRO_TYPE)
    assert status == 422 and {r["code"] for r in body["rejected"]} == {"unknown_schema_id"}, body

    summary = cli(env, "summary", "--since", since, "--json")
    assert summary.returncode == 0, summary.stderr
    groups = {(g["reason"], g["event_type"], g["version"]): g["count"]
              for g in map(json.loads, summary.stdout.splitlines())}
    assert groups == {("unknown_schema_version", "page_view", "3"): 40, ("unknown_schema_version", "page_view", "9"): 3,
                      ("unknown_schema_id", "purchase", f"id {purchase_id}"): 10}
    listed = cli(env, "list", "--since", since, "--reason", "unknown_schema_id", "--limit", "3")
    rows = listed.stdout.splitlines()[2:]
    assert len(rows) == 3 and all("purchase" in r for r in rows), listed.stdout
    shown = cli(env, "show", rows[0].split()[0])
    doc = json.loads(shown.stdout)
    assert doc["reason"] == "unknown_schema_id" and doc["payload"]["envelope"]["event_id"] in purchase_ids
    assert doc["payload"]["schema_id"] == purchase_id and doc["payload"]["envelope"]["event_type"] == "purchase"
    assert cli(env, "show", "x:y").returncode == 2

    # The fix: both versions registered (the purchase one gets the id its producers already used).
    assert register(env, "purchase", purchase_schema) == purchase_id
    register(env, "page_view", new_version_schema("page_view", "referrer_v3"))

    args = ["replay", "--run", "incident-1", "--since", since, "--per-transaction", "4", "--rate", "10"]
    killed = run_until_killed(env, args, after_transactions=3)
    assert not any(line.startswith("{") for line in killed), killed  # it did not finish
    second = cli(env, *args[:-2])
    assert second.returncode == 0, second.stdout + second.stderr
    report = last_json(second.stdout)
    assert report["still_invalid"] == {"unknown_schema_version": 3}
    assert 0 < report["replayed"] < 50  # the killed run's committed transactions are not done again
    assert "still invalid" in second.stdout and "subject headwater.events.page_view has no version 9" in second.stdout
    third = cli(env, *args[:-2])
    assert last_json(third.stdout)["replayed"] == 0 and last_json(third.stdout)["scanned"] == 0

    records = [r for r in consume_all(env["KAFKA_BOOTSTRAP"], "headwater.events")
               if header(r, "replay_run") == "incident-1"]
    replayed_ids = Counter(header(r, "event_id") for r in records)
    expected = {e["event_id"] for e in views if e.get("schema_version")} | set(purchase_ids)
    assert set(replayed_ids) == expected and set(replayed_ids.values()) == {1}
    by_id = {header(r, "event_id"): r for r in records}
    assert [by_id[i].value() for i in purchase_ids] == framed  # the Avro bytes, untouched
    view = by_id[views[10]["event_id"]]
    headers: dict[str, Any] = dict(view.headers() or [])
    assert headers["producer_id"] == producer.encode() and headers["replayed_from"].startswith(b"headwater.deadletter:")
    assert dict(by_id[purchase_ids[0]].headers() or [])["event_id"] == purchase_ids[0].encode()
    assert schema_id_of(view.value() or b"") > purchase_id  # encoded with page_view v3
