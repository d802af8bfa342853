"""docs/operations.md's typical incident, done as written: an SDK producer ships a property the schema lacks, the
page's `deadletter` commands (taken from the page) find the dead letters, a new version is registered, and the
page's replay writes every one of them, once. On a private stack: the new version must not reach the shared one."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import headwater
import pytest

from schemas.catalog import load_catalog
from stack.config import REPO_ROOT, StackConfig
from stack.launcher import Stack
from tests.support.kafka import consume_all
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
DOC = REPO_ROOT / "docs" / "operations.md"
EXAMPLE = json.loads((REPO_ROOT / "schemas" / "examples" / "page_view.json").read_text())["properties"]


@pytest.fixture(scope="module")
def private_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    state = tmp_path_factory.mktemp("incident-docs")
    cfg = StackConfig.from_env({
        "HEADWATER_STATE_DIR": str(state), "HEADWATER_KAFKA_PORT": str(free_port()),
        "HEADWATER_KAFKA_CONTROLLER_PORT": str(free_port()), "HEADWATER_REGISTRY_PORT": str(free_port()),
        "HEADWATER_GATEWAY_PORT": str(free_port()), "HEADWATER_EVENTS_PARTITIONS": "2",
        "HEADWATER_KAFKA_HEAP_MB": "512", "HEADWATER_GATEWAY_WORKERS": "1", "HEADWATER_CONSOLES": "0",
    })
    stack = Stack(cfg)
    try:
        yield {**stack.up().env, "HEADWATER_STATE_DIR": str(state)}
    finally:
        stack.down()


def documented_commands() -> list[list[str]]:
    """The `python -m deadletter` lines of the incident's code block, split as a shell would."""
    section = DOC.read_text().split("### A typical incident", 1)[1].split("\n### ", 1)[0]
    block = re.search(r"```\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the incident section has no command block"
    return [shlex.split(line) for line in block.group(1).splitlines() if line.startswith("python -m deadletter")]


def run(env: dict[str, str], command: list[str], since: str) -> subprocess.CompletedProcess[str]:
    """A documented command as written, `<incident-start>` filled in; the stack found by HEADWATER_STATE_DIR."""
    args = [since if a == "<incident-start>" else a for a in command]
    assert args[:2] == ["python", "-m"]
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_") and k not in (
        "KAFKA_BOOTSTRAP", "REGISTRY_URL", "DEADLETTER_TOPIC")}
    done = subprocess.run([sys.executable, *args[1:]], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          check=False, env={**proc_env, "HEADWATER_STATE_DIR": env["HEADWATER_STATE_DIR"]})
    assert done.returncode == 0, f"{args}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


def register_with_scroll_depth(env: dict[str, str]) -> None:
    """Step 2: the latest page_view version plus the new property, with a default (docs/schemas-and-registry.md)."""
    page_view = load_catalog().event_types["page_view"]
    schema = json.loads(page_view.schema_text(page_view.latest_version))
    props = next(f for f in schema["fields"] if f["name"] == "properties")
    props["type"]["fields"].append({"name": "scroll_depth", "type": ["null", "double"], "default": None})
    subject = urllib.parse.quote(page_view.subject, safe="")
    req = urllib.request.Request(f"{env['REGISTRY_URL']}/subjects/{subject}/versions", method="POST",
                                 data=json.dumps({"schema": json.dumps(schema)}).encode(),
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert "id" in json.loads(resp.read())


def test_the_documented_incident_is_found_and_fixed_by_the_documented_commands(private_stack: dict[str, str],
                                                                               tmp_path: Path) -> None:
    env = private_stack
    commands = documented_commands()
    assert [c[3] for c in commands] == ["summary", "list", "replay", "replay"]
    since = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    latest = load_catalog().event_types["page_view"].latest_version
    with headwater.Client(env["GATEWAY_URL"], env["HEADWATER_WRITE_KEY"], spool_dir=str(tmp_path / "spool")) as client:
        for i in range(40):
            client.track("page_view", {**EXAMPLE, **({"scroll_depth": 0.5} if i % 4 else {})})
        client.flush(120)
        metrics = client.metrics()
    assert (metrics.acknowledged, metrics.rejected) == (10, 30)

    summary = run(env, [*commands[0], "--json"], since)
    groups = {(g["reason"], g["event_type"], g["version"]): g["count"] for g in map(json.loads,
                                                                                     summary.stdout.splitlines())}
    assert groups == {("invalid_properties", "page_view", str(latest)): 30}, groups
    assert "scroll_depth" in run(env, commands[1], since).stdout

    register_with_scroll_depth(env)
    dry = json.loads(run(env, commands[2], since).stdout.splitlines()[-1])
    assert (dry["dry_run"], dry["replayed"], dry["still_invalid"]) == (True, 30, {}), dry
    done = json.loads(run(env, commands[3], since).stdout.splitlines()[-1])
    assert (done["replayed"], done["still_invalid"]) == (30, {}), done

    replayed = [r for r in consume_all(env["KAFKA_BOOTSTRAP"], env["EVENTS_TOPIC"])
                if dict(r.headers() or []).get("replay_run") == b"add-scroll-depth"]
    ids: list[Any] = [dict(r.headers() or [])["event_id"] for r in replayed]
    assert len(ids) == len(set(ids)) == 30
    assert str(uuid.UUID(ids[0].decode()))  # the original event ids
