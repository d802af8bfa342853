"""Test helpers for the gateway: event and batch builders, a fake registry serving the catalog, a fake producer."""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from typing import Any

import fastavro

from gateway.schema_cache import NotFound
from schemas.catalog import SCHEMAS_DIR, load_catalog

WRITE_KEY = "hw_test-key-0123456789abcdefghijklmnopqrstuvwxyz"


def page_view(seq: int = 0, marker: str = "", **overrides: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "event_id": str(uuid.uuid4()), "event_type": "page_view", "producer_id": str(uuid.uuid4()), "seq": seq,
        "node_id": f"node-{marker or 'x'}", "created_at": int(time.time() * 1000), "context": {"run": marker},
        "properties": {"url": f"https://example.com/{marker}", "path": "/", "title": "Home", "user_agent": "ua",
                       "session_id": "s1", "viewport": {"width": 1280, "height": 720}, "locale": "en"},
    }
    event.update(overrides)
    return event


def batch(*events: dict[str, Any], batch_id: str | None = None) -> dict[str, Any]:
    return {"batch_id": batch_id or str(uuid.uuid4()), "sent_at": int(time.time() * 1000),
            "sdk": {"name": "headwater-test", "version": "0"}, "events": list(events)}


def dumps(doc: Any) -> bytes:
    return json.dumps(doc).encode()


class FakeRegistry:
    """Serves every catalog version under ids 1.. as the Confluent REST API would (`get(path)`); `register`
    adds a version to any subject, as a client of the real registry could."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.down = False
        self.docs: dict[str, Any] = {"/subjects": []}
        self.by_id: dict[int, dict[str, Any]] = {}
        self.uses: dict[int, list[dict[str, Any]]] = {}
        for et in load_catalog().event_types.values():
            for v in range(1, et.latest_version + 1):
                self.register(et.subject, et.schema_text(v))

    def register(self, subject: str, schema_text: str) -> int:
        """Add `schema_text` as the next version of `subject` (same text, same id); return its id."""
        schema_id = next((i for i, d in self.by_id.items() if d["schema"] == schema_text), len(self.by_id) + 1)
        versions = self.docs.setdefault(f"/subjects/{subject}/versions", [])
        if not versions:
            self.docs["/subjects"].append(subject)
        version = len(versions) + 1
        doc = {"subject": subject, "version": version, "id": schema_id, "schema": schema_text}
        versions.append(version)
        self.docs[f"/subjects/{subject}/versions/{version}"] = doc
        self.docs[f"/subjects/{subject}/versions/latest"] = doc
        self.by_id.setdefault(schema_id, doc)
        self.uses.setdefault(schema_id, []).append({"subject": subject, "version": version})
        return schema_id

    async def get(self, path: str) -> Any:
        from gateway.errors import RegistryUnavailable

        self.calls.append(path)
        if self.down:
            raise RegistryUnavailable("registry down (fake)")
        if path.startswith("/schemas/ids/") and path.endswith("/versions"):
            uses = self.uses.get(int(path.split("/")[3]))
            if uses is None:
                raise NotFound(path)
            return list(uses)
        if path.startswith("/schemas/ids/"):
            doc = self.by_id.get(int(path.rsplit("/", 1)[1]))
            if doc is None:
                raise NotFound(path)
            return {"schema": doc["schema"]}
        if path not in self.docs:
            raise NotFound(path)
        return self.docs[path]

    def id_of(self, event_type: str, version: int) -> int:
        return int(self.docs[f"/subjects/headwater.events.{event_type}/versions/{version}"]["id"])


def avro_event(schema_text: str, schema_id: int, record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    buf.write(b"\x00" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(schema_text)), record)
    return buf.getvalue()


def avro_record(event: dict[str, Any], sent_at: int = 1) -> dict[str, Any]:
    """A JSON wire event as the Avro record the SDK's fast path writes."""
    rec = {k: v for k, v in event.items() if k not in ("schema_version", "partition_key")}
    rec.update({"sent_at": sent_at, "received_at": None, "sdk_name": "headwater-test", "sdk_version": "0"})
    props = dict(rec["properties"])
    props.setdefault("referrer", None)
    props.setdefault("user_id", None)
    props.setdefault("utm", {})
    props.setdefault("load_time_ms", None)
    props.setdefault("experiment_ids", [])
    rec["properties"] = props
    return rec


def avro_batch(events: list[bytes], batch_id: str | None = None) -> bytes:
    from gateway.avro_batch import BATCH_SCHEMA

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, BATCH_SCHEMA, {
        "batch_id": batch_id or str(uuid.uuid4()), "sent_at": int(time.time() * 1000), "sdk_name": "headwater-test",
        "sdk_version": "0", "events": events})
    return buf.getvalue()


class FakeProducer:
    """Records transactions; `fail_commit` / `fail_abort` inject errors (the confluent API's shape)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: list[tuple[str, bytes, bytes, Any]] | None = None
        self.committed: list[list[tuple[str, bytes, bytes, Any]]] = []
        self.aborted = 0
        self.fail_commit: BaseException | None = None
        self.fail_abort: BaseException | None = None
        self.commit_delay = 0.0
        self.inits = 0
        self.abort_attempts = 0
        self.unreachable = False
        self.init_gate: threading.Event | None = None    # init_transactions waits for it (a hung broker)
        self.commit_gate: threading.Event | None = None  # commit_transaction waits for it

    def init_transactions(self, timeout: float) -> None:
        if self.init_gate is not None:
            self.init_gate.wait(30)
        self.inits += 1

    def begin_transaction(self) -> None:
        assert self.open is None
        self.open = []

    def produce(self, topic: str, *, value: Any = None, key: Any = None, headers: Any = None) -> None:
        assert self.open is not None
        self.open.append((topic, key, value, headers))

    def commit_transaction(self, timeout: float) -> None:
        time.sleep(self.commit_delay)
        if self.commit_gate is not None:
            self.commit_gate.wait(30)
        if self.fail_commit is not None:
            raise self.fail_commit
        assert self.open is not None
        self.committed.append(self.open)
        self.open = None

    def abort_transaction(self, timeout: float) -> None:
        self.abort_attempts += 1
        if self.fail_abort is not None:
            raise self.fail_abort
        self.aborted += 1
        self.open = None

    def poll(self, timeout: float) -> int:
        return 0

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        if self.unreachable:
            raise RuntimeError("no broker (fake)")
        return {}

    def __len__(self) -> int:
        return 0


def http_post(url: str, body: bytes, headers: dict[str, str], timeout: float = 30.0) -> tuple[int, Any, dict[str, str]]:
    """POST and return (status, parsed JSON body, headers), for any status."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null"), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null"), dict(exc.headers)


def json_headers(key: str | None, encoding: str = "zstd", ctype: str = "application/json") -> dict[str, str]:
    hdrs = {"Content-Type": ctype, "Content-Encoding": encoding}
    if key is not None:
        hdrs["Authorization"] = f"Bearer {key}"
    return hdrs


def zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def event_type_schema(event_type: str) -> str:
    """The schema text of a minimal new event type: the envelope of `schemas/envelope.avsc` (logical types
    included, as every real event type has them) + a `plan` string property."""
    envelope = json.loads((SCHEMAS_DIR / "envelope.avsc").read_text())["fields"]
    return json.dumps({
        "type": "record", "name": event_type, "namespace": "headwater.events",
        "fields": [*envelope,
                   {"name": "properties", "type": {"type": "record", "name": f"{event_type}_properties",
                                                   "fields": [{"name": "plan", "type": "string"}]}}]})
