"""Helpers of the dead-letter integration tests: post batches to the real gateway, register versions, run the CLI."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

import fastavro

from schemas.catalog import load_catalog
from stack.config import REPO_ROOT

AVRO_TYPE = "application/vnd.headwater.batch+avro"
PROPS = {
    "page_view": {"url": "https://example.com/", "path": "/", "title": "Home", "user_agent": "ua", "session_id": "s",
                  "viewport": {"width": 1280, "height": 720}, "locale": "en"},
}


def post(env: dict[str, str], body: bytes, content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(env["GATEWAY_URL"] + "/v1/batch", data=body, method="POST", headers={
        "Content-Type": content_type, "Authorization": f"Bearer {env['HEADWATER_WRITE_KEY']}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def json_batch(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"batch_id": str(uuid.uuid4()), "sent_at": int(time.time() * 1000),
                       "sdk": {"name": "incident-test", "version": "1"}, "events": events}).encode()


def avro_batch(framed: list[bytes]) -> bytes:
    spec = json.loads((REPO_ROOT / "sdk-specs" / "batch.avsc").read_text())
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(spec), {
        "batch_id": str(uuid.uuid4()), "sent_at": int(time.time() * 1000), "sdk_name": "incident-test",
        "sdk_version": "1", "events": framed})
    return buf.getvalue()


def registry_get(env: dict[str, str], path: str) -> Any:
    with urllib.request.urlopen(env["REGISTRY_URL"] + path, timeout=10) as resp:
        return json.loads(resp.read())


def max_schema_id(env: dict[str, str]) -> int:
    ids = [0]
    for subject in registry_get(env, "/subjects"):
        quoted = urllib.parse.quote(subject, safe="")
        for v in registry_get(env, f"/subjects/{quoted}/versions"):
            ids.append(int(registry_get(env, f"/subjects/{quoted}/versions/{v}")["id"]))
    return max(ids)


def new_version_schema(event_type: str, field_name: str) -> str:
    """The latest catalog version of `event_type` with one more optional property field (a compatible change)."""
    et = load_catalog().event_types[event_type]
    schema = json.loads(et.schema_text(et.latest_version))
    props = next(f for f in schema["fields"] if f["name"] == "properties")
    props["type"]["fields"].append({"name": field_name, "type": ["null", "string"], "default": None})
    return json.dumps(schema)


def register(env: dict[str, str], event_type: str, schema_text: str) -> int:
    subject = urllib.parse.quote(f"headwater.events.{event_type}", safe="")
    req = urllib.request.Request(f"{env['REGISTRY_URL']}/subjects/{subject}/versions", method="POST",
                                 data=json.dumps({"schema": schema_text}).encode(),
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return int(json.loads(resp.read())["id"])


def cli(env: dict[str, str], *args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deadletter", "--env-file", env["ENV_FILE"], *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s, env=cli_env(), check=False)


def cli_env() -> dict[str, str]:
    """The CLI reads stack.env; the test process's own stack variables must not override it."""
    return {k: v for k, v in os.environ.items()
            if k not in ("KAFKA_BOOTSTRAP", "REGISTRY_URL", "DEADLETTER_TOPIC")} | {"PYTHONUNBUFFERED": "1"}


def last_json(stdout: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return doc
