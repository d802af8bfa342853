"""The wire format of protocol.md: JSON and Avro batch bodies, compression, and parsing the gateway's answers."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import struct
import threading
from email.utils import parsedate_to_datetime
from typing import Any

import fastavro
import zstandard

from ._batcher import Batch
from ._version import SDK_NAME, __version__

JSON_TYPE = "application/json"
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
_SDK_JSON = json.dumps({"name": SDK_NAME, "version": __version__}, separators=(",", ":"))
# A ZstdCompressor is not thread-safe (shared by the sender threads of several clients it produced corrupt
# frames and crashed the interpreter): one per thread, reused across that thread's batches.
_LOCAL = threading.local()


def _zstd() -> zstandard.ZstdCompressor:
    compressor: zstandard.ZstdCompressor | None = getattr(_LOCAL, "zstd", None)
    if compressor is None:
        compressor = _LOCAL.zstd = zstandard.ZstdCompressor(level=3)
    return compressor


@dataclasses.dataclass(frozen=True)
class Rejection:
    """One event the gateway rejected: its index in the batch as sent, a stable code and a message."""

    index: int
    code: str
    message: str


@dataclasses.dataclass(frozen=True)
class BatchAnswer:
    """A 200 or 422 body: how many events were accepted and which were rejected."""

    accepted: int
    rejected: tuple[Rejection, ...]


def json_body(batch: Batch, sent_at: int) -> bytes:
    """The JSON batch body (protocol.md section 2), joining the already-encoded event envelopes."""
    head = f'{{"batch_id":"{batch.batch_id}","sent_at":{sent_at},"sdk":{_SDK_JSON},"events":['
    return head.encode() + b",".join(batch.events) + b"]}"


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


def compress(body: bytes, encoding: str) -> bytes:
    """The body compressed with `encoding` (zstd, gzip or identity)."""
    if encoding == "zstd":
        return bytes(_zstd().compress(body))
    if encoding == "gzip":
        return gzip.compress(body, compresslevel=6)
    return body


def parse_answer(body: bytes) -> BatchAnswer:
    """Parse a 200/422 body; a malformed one counts as every event accepted with no rejection listed."""
    try:
        doc = json.loads(body)
        rejected = tuple(Rejection(int(r["index"]), str(r.get("code", "")), str(r.get("message", "")))
                         for r in doc.get("rejected") or ())
        return BatchAnswer(int(doc.get("accepted", 0)), rejected)
    except (ValueError, TypeError, KeyError, AttributeError):
        return BatchAnswer(0, ())


def parse_error(body: bytes) -> tuple[str, str]:
    """(code, message) of a 4xx/5xx body `{code, message}`; tolerant of other bodies."""
    try:
        doc = json.loads(body)
        return str(doc.get("code", "")), str(doc.get("message", ""))
    except (ValueError, TypeError, AttributeError):
        return "", body[:200].decode("utf-8", "replace")


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or HTTP-date); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now)
