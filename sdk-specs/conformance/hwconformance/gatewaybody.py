"""Building a gateway vector's raw request: generated ids and times, JSON / text / base64 / Avro bodies, compression."""

from __future__ import annotations

import base64
import gzip
import json
import time
import urllib.request
import uuid
from typing import Any

import zstandard

from .wire import AVRO_TYPE, BATCH_SCHEMA, encode_avro, frame

_SDK = {"name": "headwater-conformance", "version": "1"}


class Generator:
    """Fills `{"$gen": ...}` values: `uuid4[:name]`, `uuid7[:name]` (same name, same value), `now_ms`, `marker`
    (this run's unique string, searched for in Kafka), and `{marker}` inside strings."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.named: dict[str, str] = {}

    def fill(self, value: Any) -> Any:
        """`value` with every generator replaced."""
        if isinstance(value, dict):
            if "$gen" in value:
                return self._gen(str(value["$gen"]))
            return {k: self.fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, str):
            return value.replace("{marker}", self.marker)
        return value

    def _gen(self, spec: str) -> Any:
        kind, _, name = spec.partition(":")
        if kind == "now_ms":
            return int(time.time() * 1000)
        if kind == "marker":
            return self.marker
        if kind in ("uuid4", "uuid7"):
            if name and name in self.named:
                return self.named[name]
            value = str(uuid.uuid4()) if kind == "uuid4" else _uuid7()
            if name:
                self.named[name] = value
            return value
        raise ValueError(f"unknown generator {spec!r}")


def _uuid7() -> str:
    ms = time.time_ns() // 1_000_000
    rand = uuid.uuid4().int
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | (rand & 0xFFF) << 64 | 0b10 << 62 | (rand >> 66)
    return str(uuid.UUID(int=value))


def expand_text(text: str, marker: str) -> str:
    """Literal body text: `{marker}`, and `$DEEP(n)` = n nested JSON arrays (for the nesting limit)."""
    text = text.replace("{marker}", marker)
    while "$DEEP(" in text:
        start = text.index("$DEEP(")
        end = text.index(")", start)
        n = int(text[start + 6:end])
        text = text[:start] + "[" * n + "]" * n + text[end + 1:]
    while "$PAD(" in text:
        start = text.index("$PAD(")
        end = text.index(")", start)
        text = text[:start] + "x" * int(text[start + 5:end]) + text[end + 1:]
    return text


def registry_schema(registry_url: str, event_type: str, version: int) -> tuple[int, Any]:
    """(schema id, parsed schema JSON) of a subject version in the real registry."""
    url = f"{registry_url.rstrip('/')}/subjects/headwater.events.{event_type}/versions/{version}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        doc = json.loads(resp.read())
    return int(doc["id"]), json.loads(doc["schema"])


def with_defaults(schema: Any, record: Any) -> Any:
    """`record` with every missing field that has an Avro default filled in (records nested in records too)."""
    if not isinstance(schema, dict) or schema.get("type") != "record" or not isinstance(record, dict):
        return record
    out = dict(record)
    for field in schema["fields"]:
        name = field["name"]
        if name not in out and "default" in field:
            out[name] = field["default"]
        elif name in out and isinstance(field["type"], dict):
            out[name] = with_defaults(field["type"], out[name])
    return out


def avro_body(spec: dict[str, Any], gen: Generator, registry_url: str) -> bytes:
    """An Avro batch (batch.avsc) from `{"batch_id", "events": [{"event_type", "version", "record", "schema_id",
    "magic", "payload_hex"}]}`; `record` is completed with defaults, `schema_id`/`magic`/`payload_hex` corrupt it."""
    events: list[bytes] = []
    for ev in spec.get("events", []):
        schema_id, schema = registry_schema(registry_url, ev.get("event_type", "page_view"), int(ev.get("version", 1)))
        if "payload_hex" in ev:
            data = b"\x00" + schema_id.to_bytes(4, "big") + bytes.fromhex(ev["payload_hex"])
        else:
            data = frame(schema_id, schema, with_defaults(schema, gen.fill(ev["record"])))
        if "schema_id" in ev:
            data = data[:1] + int(ev["schema_id"]).to_bytes(4, "big") + data[5:]
        if "magic" in ev:
            data = bytes([int(ev["magic"])]) + data[1:]
        events.append(data)
    batch = {"batch_id": gen.fill(spec.get("batch_id", {"$gen": "uuid7:batch"})), "sent_at": int(time.time() * 1000),
             "sdk_name": _SDK["name"], "sdk_version": _SDK["version"], "events": events}
    return encode_avro(BATCH_SCHEMA, batch)


def build(request: dict[str, Any], gen: Generator, registry_url: str) -> tuple[bytes, dict[str, str]]:
    """(compressed body, headers) of a raw request; headers get Content-Type / Content-Encoding defaults."""
    headers = {k: expand_text(v, gen.marker) for k, v in request.get("headers", {}).items()}
    if "json" in request:
        raw = json.dumps(gen.fill(request["json"])).encode()
        headers.setdefault("Content-Type", "application/json")
    elif "json_text" in request:
        raw = expand_text(request["json_text"], gen.marker).encode()
        headers.setdefault("Content-Type", "application/json")
    elif "avro" in request:
        raw = avro_body(request["avro"], gen, registry_url)
        headers.setdefault("Content-Type", AVRO_TYPE)
    elif "base64" in request:
        raw = base64.b64decode(request["base64"])
    else:
        raw = b""
    compression = request.get("compress", "zstd" if "base64" not in request else "identity")
    if compression == "zstd":
        raw = zstandard.ZstdCompressor().compress(raw)
    elif compression == "gzip":
        raw = gzip.compress(raw)
    if compression != "identity":
        headers.setdefault("Content-Encoding", compression)
    return raw, headers
