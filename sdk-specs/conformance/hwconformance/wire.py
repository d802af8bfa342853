"""Decoding recorded request bodies: decompression, JSON or Avro batches, Confluent-framed Avro events."""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

import fastavro
import zstandard

from common import avro_frame

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
_MAX_OUTPUT = 64 << 20


def decompress(body: bytes, encoding: str) -> bytes:
    """The decoded body for a `Content-Encoding` (zstd may hold several frames, gzip several members)."""
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "zstd":
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body), read_across_frames=True)
        return reader.read(_MAX_OUTPUT)
    raise ValueError(f"unknown Content-Encoding {encoding!r}")


def decode_body(body: bytes, headers: dict[str, str]) -> Any:
    """The batch in a request: a JSON document, or the Avro batch with its events as hex strings."""
    raw = decompress(body, headers.get("content-encoding", "identity"))
    if headers.get("content-type", "").split(";")[0].strip() == AVRO_TYPE:
        reader = io.BytesIO(raw)
        record: Any = fastavro.schemaless_reader(reader, BATCH_SCHEMA)
        if reader.read(1):
            raise ValueError("trailing bytes after the Avro batch")
        record["events"] = [bytes(e).hex() for e in record["events"]]
        return record
    return json.loads(raw)


def plain(schema: Any) -> Any:
    """`schema` without logical types, so records read back as plain strings and numbers (as on the wire)."""
    if isinstance(schema, dict):
        return {k: plain(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [plain(s) for s in schema]
    return schema


def encode_avro(schema: Any, record: dict[str, Any]) -> bytes:
    """The schemaless Avro binary of `record`."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(plain(schema)), record)
    return out.getvalue()


def frame(schema_id: int, schema: Any, record: dict[str, Any]) -> bytes:
    """Confluent framing: magic byte 0, the 4-byte big-endian schema id, the Avro binary."""
    return avro_frame.frame(schema_id, encode_avro(schema, record))


def unframe(data: bytes, schemas: dict[int, Any]) -> dict[str, Any]:
    """Read one framed event: `{"schema_id", "record", "canonical"}`; `canonical` is True when re-encoding the
    decoded record gives the same bytes (Avro binary is deterministic), so nothing odd hides in the encoding."""
    schema_id = avro_frame.schema_id_of(data)  # FrameError (a ValueError) when `data` is not framed
    if schema_id not in schemas:
        raise ValueError(f"unknown schema id {schema_id}")
    reader = io.BytesIO(avro_frame.body_of(data))
    parsed = fastavro.parse_schema(plain(schemas[schema_id]))
    record: Any = fastavro.schemaless_reader(reader, parsed)
    trailing = reader.read()
    canonical = not trailing and frame(schema_id, schemas[schema_id], record) == data
    return {"schema_id": schema_id, "record": record, "canonical": canonical}
