"""Renders the peer's Benthos configuration: the same job as the gateway's JSON path, on the same broker.

http_server input (answers 200 only once the output acked the whole message: the handler waits on the
transaction's result, a failure answers 502) -> decompress when `Content-Encoding: zstd` -> each event of the
batch gets the batch's `sent_at` and SDK fields and a `received_at`, like the gateway's records -> the batch is
split into one message per event -> each is validated with the JSON Schema generated from the registry's Avro
schema (`avro_jsonschema.py`) -> `reject_errored` refuses the request if any event failed, else `kafka_franz`
(idempotent, hence acks=all; `ProduceSync` waits for every record's ack) writes one record per event, keyed by
node_id like the gateway's. The document is JSON, which is YAML, so Benthos reads it as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PATH = "/v1/batch"
# Per event: the batch-level fields the gateway's records carry, and the envelope fields it does not write.
_ENRICH = """let sent_at = this.sent_at
let sdk_name = this.sdk.name.or("unknown")
let sdk_version = this.sdk.version.or("unknown")
let received_at = timestamp_unix_milli()
root = this.events.map_each(e -> e.without("schema_version", "partition_key").merge({
  "sent_at": $sent_at, "received_at": $received_at, "sdk_name": $sdk_name, "sdk_version": $sdk_version}))"""


@dataclass(frozen=True)
class PeerSettings:
    """Where the peer listens and writes, and how it produces."""

    port: int
    brokers: str            # host:port[,host:port]
    topic: str
    schema_path: str        # the generated JSON Schema file (absolute path)
    compression: str = "zstd"  # the gateway's producer codec, so the broker does the same work for both
    max_in_flight: int = 64    # one batch in flight per client connection
    timeout_s: int = 30

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port {self.port} is out of range")
        if not self.schema_path.startswith("/"):
            raise ValueError(f"schema_path must be absolute, not {self.schema_path!r}")
        if self.compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise ValueError(f"unknown compression {self.compression!r}")
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")


def render(s: PeerSettings) -> dict[str, Any]:
    """The Benthos configuration document."""
    return {
        "http": {"enabled": False},
        "logger": {"level": "WARN", "format": "logfmt"},
        "input": {"http_server": {
            "address": f"127.0.0.1:{s.port}", "path": PATH, "allowed_verbs": ["POST"],
            "timeout": f"{s.timeout_s}s", "sync_response": {"status": "200"},
        }},
        "pipeline": {"processors": [
            {"switch": [{"check": 'meta("Content-Encoding") == "zstd"',
                         "processors": [{"decompress": {"algorithm": "zstd"}}]}]},
            {"mapping": _ENRICH},
            {"unarchive": {"format": "json_array"}},
            {"json_schema": {"schema_path": f"file://{s.schema_path}"}},
        ]},
        "output": {"reject_errored": {"kafka_franz": {
            "seed_brokers": s.brokers.split(","), "topic": s.topic, "key": '${! json("node_id") }',
            "idempotent_write": True, "compression": s.compression, "max_in_flight": s.max_in_flight,
            "timeout": f"{s.timeout_s}s",
        }}},
        "shutdown_timeout": "10s",
    }


def render_text(s: PeerSettings) -> str:
    return json.dumps(render(s), indent=2) + "\n"
