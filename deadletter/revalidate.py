"""Validates a dead letter again with the gateway's own code and builds the record a replay writes.

Each dead letter goes through the path of `POST /v1/batch` as a one-event batch (deadletter/gateway_code.py
names the gateway functions used). Anyone who reaches the broker can write to the dead-letter topic, so a dead
letter is taken only as far as it looks like what the gateway writes: its headers must agree with its value
and carry no replay provenance (`forged_dead_letter`), the replayed record gets the gateway's headers and the
replay's own provenance and nothing else of the dead letter's, and a record over the producer's size limit is
reported (`record_too_large`) instead of failing the run.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from typing import Any

import fastavro

from deadletter.gateway_code import (
    BATCH_SCHEMA,
    GatewayError,
    Limits,
    Plan,
    RequestMeta,
    decode_json_batch,
    plan_avro,
    plan_json,
)
from deadletter.records import Letter
from gateway.records import Headers, KafkaRecord

REPLAY_HEADER = "replayed_from"
REPLAYED_AT_HEADER = "replayed_at"
RUN_HEADER = "replay_run"
PROVENANCE = frozenset({REPLAY_HEADER, REPLAYED_AT_HEADER, RUN_HEADER})
# The producer refuses a record over its message.max.bytes (gateway/producer.py: 1 MiB + 1 KiB) with
# MSG_SIZE_TOO_LARGE; key, value and headers are counted with room for the record's own overhead.
MAX_RECORD_BYTES = 1024 * 1024
RECORD_OVERHEAD_BYTES = 512
_LIMITS = Limits()
_PLAN_TOPIC = "-"  # plan records for still-invalid events go nowhere: they stay where they are


@dataclass(frozen=True)
class StillInvalid:
    """A dead letter the gateway's code rejects again, with the reason it gives now."""

    letter: Letter
    code: str
    message: str


def request_meta(letter: Letter) -> RequestMeta:
    """The original request's metadata, from the dead letter (received_at keeps the event's original time)."""
    v = letter.value
    return RequestMeta.make(v.batch_id, v.received_at, v.source, letter.header("client_ip") or "",
                            letter.header("user_agent") or "")


def json_events(letter: Letter) -> tuple[Any, list[Any]]:
    """The JSON payload decoded as the gateway decodes a one-event batch; GatewayError when it cannot be.

    The batch's sent_at and sdk are not kept in a dead letter: sent_at becomes received_at, and sdk the
    User-Agent's `name/version` when it has that shape.
    """
    v = letter.value
    name, _, version = (letter.header("user_agent") or "").partition(" ")[0].partition("/")
    body = b"".join([
        b'{"batch_id":', json.dumps(v.batch_id).encode(), b',"sent_at":', str(v.received_at).encode(),
        b',"sdk":', json.dumps({"name": name or "unknown", "version": version or "unknown"}).encode(),
        b',"events":[', letter.raw_payload, b"]}",
    ])
    return decode_json_batch(body, _LIMITS)


def plan(letter: Letter, cache: Any) -> Plan:
    """The gateway's plan for this one event, on the schemas the cache holds now."""
    meta = request_meta(letter)
    if letter.value.payload_encoding == "json":
        batch, events = json_events(letter)
        return plan_json(batch, events, cache, meta, _PLAN_TOPIC)
    return plan_avro(avro_body(letter), cache, meta, _PLAN_TOPIC)


def avro_body(letter: Letter) -> bytes:
    """The framed Avro payload as a one-event Avro batch, which the gateway's code checks and plans."""
    v = letter.value
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, BATCH_SCHEMA, {
        "batch_id": v.batch_id, "sent_at": v.received_at, "sdk_name": "unknown", "sdk_version": "unknown",
        "events": [letter.raw_payload]})
    return buf.getvalue()


def replay_headers(letter: Letter, event_headers: Headers, topic: str, run: str, now_ms: int) -> Headers:
    """The headers the gateway gives the event (rebuilt from the original request's values: an Avro dead letter
    whose schema id was unknown has no event_id / producer_id headers), and where, when and by which run it was
    replayed. No other header of the dead letter is carried: the gateway writes none."""
    return [*event_headers, (REPLAY_HEADER, f"{topic}:{letter.position}".encode()),
            (REPLAYED_AT_HEADER, str(now_ms).encode()), (RUN_HEADER, run.encode())]


def forgery(letter: Letter) -> str | None:
    """Why `letter` is not a dead letter as the gateway writes it, or None: the gateway writes `source`,
    `batch_id`, `received_at` and `reason` both as headers and in the value, and never a replay's headers."""
    v = letter.value
    carried = sorted(PROVENANCE & {k for k, _ in letter.headers})
    if carried:
        return f"a dead letter carries replay headers ({', '.join(carried)}): the gateway never writes them"
    for name, value in (("source", v.source), ("batch_id", v.batch_id), ("received_at", str(v.received_at)),
                        ("reason", v.reason)):
        found = [h for k, h in letter.headers if k == name]
        if found != [value.encode()]:
            return f"its {name} header does not match its value's {name}"
    return None


def record_bytes(record: KafkaRecord) -> int:
    return (len(record.key) + len(record.value) + sum(len(k) + len(v) for k, v in record.headers)
            + RECORD_OVERHEAD_BYTES)


def revalidate(letter: Letter, cache: Any, topic: str, run: str) -> KafkaRecord | StillInvalid:
    """The event record to write (same topic, key and value the gateway would write), or why it still fails."""
    forged = forgery(letter)
    if forged is not None:
        return StillInvalid(letter, "forged_dead_letter", forged)
    try:
        result = plan(letter, cache)
    except GatewayError as exc:  # the whole (one-event) request fails: a clean code, never a crash
        return StillInvalid(letter, exc.code, str(exc))
    if result.rejected:
        rej = result.rejected[0]
        return StillInvalid(letter, rej.code, rej.message)
    record = result.records[0]
    out = KafkaRecord(record.topic, record.key, record.value,
                      replay_headers(letter, record.headers, topic, run, int(time.time() * 1000)))
    size = record_bytes(out)
    if size > MAX_RECORD_BYTES:
        return StillInvalid(letter, "record_too_large", f"the replayed record would have about {size} bytes, over "
                                                        f"the producer's limit of {MAX_RECORD_BYTES}")
    return out
