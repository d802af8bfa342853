"""The Avro fast path's encoding (protocol.md section 3); imported only for `wire_format="avro"`.

Needs the `avro` extra (`pip install headwater[avro]`, which brings fastavro).
"""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro

from ._version import SDK_NAME, __version__

AVRO_TYPE = "application/vnd.headwater.batch+avro"
BATCH_SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "Batch", "namespace": "dev.headwater.wire",
    "fields": [
        {"name": "batch_id", "type": "string"},
        {"name": "sent_at", "type": "long"},
        {"name": "sdk_name", "type": "string"},
        {"name": "sdk_version", "type": "string"},
        {"name": "events", "type": {"type": "array", "items": "bytes"}},
    ],
})

def avro_body(batch_id: str, sent_at: int, framed_events: list[bytes]) -> bytes:
    """The Avro batch body (protocol.md section 3): batch.avsc's record, schemaless."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, BATCH_SCHEMA, {
        "batch_id": batch_id, "sent_at": sent_at, "sdk_name": SDK_NAME, "sdk_version": __version__,
        "events": framed_events,
    })
    return out.getvalue()


def avro_event(record: dict[str, Any], schema_id: int, parsed_schema: Any) -> bytes:
    """One event in Confluent framing: magic 0, 4-byte big-endian schema id, Avro binary body."""
    out = io.BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(out, parsed_schema, record)
    return out.getvalue()


def avro_record(envelope: dict[str, Any], sent_at: int) -> dict[str, Any]:
    """The Avro event record of a JSON envelope: the envelope fields in order, then `properties`."""
    return {
        "event_id": envelope["event_id"], "event_type": envelope["event_type"],
        "producer_id": envelope["producer_id"], "seq": envelope["seq"], "node_id": envelope["node_id"],
        "created_at": envelope["created_at"], "sent_at": sent_at, "received_at": None,
        "sdk_name": SDK_NAME, "sdk_version": __version__, "context": envelope.get("context", {}),
        "properties": envelope.get("properties", {}),
    }
