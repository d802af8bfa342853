"""Test helpers for the gateway: Avro events and batches, a fake producer, HTTP calls; the events, keys and fake
registry the other tests use too are in tests/support/ (re-exported here)."""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from typing import Any

import fastavro

from common.avro_frame import frame
from schemas.catalog import SCHEMAS_DIR
from tests.support.events import batch, page_view
from tests.support.fake_registry import FakeRegistry
from tests.support.keys import WRITE_KEY

__all__ = ["WRITE_KEY", "FakeProducer", "FakeRegistry", "avro_batch", "avro_event", "avro_record", "batch", "dumps",
           "event_type_schema", "http_post", "json_headers", "page_view", "zstd"]

def dumps(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def avro_event(schema_text: str, schema_id: int, record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(schema_text)), record)
    return frame(schema_id, buf.getvalue())


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
