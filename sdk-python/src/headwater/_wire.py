"""The wire format of protocol.md: JSON batch bodies, compression, and parsing the gateway's answers (Avro: `_avro`)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import threading
from email.utils import parsedate_to_datetime

import zstandard

from ._batcher import Batch
from ._version import SDK_NAME, __version__

JSON_TYPE = "application/json"
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
