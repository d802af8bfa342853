"""Turns a decoded batch into the Kafka records of one transaction: valid events encoded to their topic, each
invalid one rejected with a stable code and dead-lettered. Pure: no I/O, schemas come from the cache.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import fastavro
import msgspec

from common.avro_frame import frame
from gateway.avro_batch import AvroBatch, Envelope
from gateway.errors import clip
from gateway.json_batch import WireBatch, WireEvent, check_numbers
from gateway.records import KafkaRecord, Rejection, RequestMeta, SchemaRef, dead_letter, event_headers
from gateway.schema_cache import SchemaCache
from gateway.schemas import CompiledSchema

_NO_SCHEMA = SchemaRef(None, None, None)


@dataclass
class Plan:
    """The records of one batch (events and dead letters, in batch order) and the answer's counts."""

    records: list[KafkaRecord] = field(default_factory=list)
    accepted: int = 0
    rejected: list[Rejection] = field(default_factory=list)


def json_misses(events: list[WireEvent], cache: SchemaCache) -> set[tuple[str, int | None]]:
    """(event type, version) pairs this batch needs that the cache does not hold (and did not miss recently)."""
    return {(ev.event_type, ev.schema_version) for ev in events
            if cache.needs_version(ev.event_type, ev.schema_version)}


def plan_json(batch: WireBatch, events: list[WireEvent], cache: SchemaCache, meta: RequestMeta,
              deadletter_topic: str) -> Plan:
    plan = Plan()
    parts: dict[int, tuple[bytes, ...]] = {}  # schema id -> its batch-level fields, encoded once per batch
    for index, ev in enumerate(events):
        key = ev.partition_key if ev.partition_key is not None else ev.node_id
        route = cache.routes.get(ev.event_type)
        schema = cache.by_version(route, ev.schema_version) if route is not None else None
        if route is None:
            rej = Rejection(index, "unknown_event_type", clip(f"unknown event type {ev.event_type!r}"))
            ref = _NO_SCHEMA
        elif schema is None:
            what = f"version {ev.schema_version}" if ev.schema_version else "a registered version"
            rej = Rejection(index, "unknown_schema_version", f"subject {route.subject} has no {what}")
            ref = SchemaRef(route.subject, ev.schema_version, None)
        else:
            ref = SchemaRef(route.subject, schema.version, schema.schema_id)
            value_or_rej = encode_json_event(index, batch, ev, schema, meta, parts=parts)
            if isinstance(value_or_rej, bytes):
                plan.records.append(KafkaRecord(route.topic, key.encode(), value_or_rej,
                                                event_headers(meta, ev.event_id, ev.producer_id)))
                plan.accepted += 1
                continue
            rej = value_or_rej
        plan.rejected.append(rej)
        plan.records.append(dead_letter(deadletter_topic, meta, rej, bytes(batch.events[index]), is_json=True,
                                        schema=ref, key=key, event_id=ev.event_id, event_type=ev.event_type,
                                        producer_id=ev.producer_id))
    return plan


def encode_json_event(index: int, batch: WireBatch, ev: WireEvent, schema: CompiledSchema, meta: RequestMeta, *,
                      parts: dict[int, tuple[bytes, ...]]) -> bytes | Rejection:
    """The framed Avro record of one JSON event, or why it is rejected (`parts`: the per-batch encoder cache)."""
    try:
        props = schema.properties_decoder.decode(ev.properties)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        # Numbers no schema can hold (beyond 64 bits, overflowing a double) and nesting past ~1000 levels fail
        # the whole request (400); anything else the schema refuses rejects this event.
        check_numbers(ev.properties, f"event {index}")
        return Rejection(index, "invalid_properties", clip(str(exc) or type(exc).__name__))
    encoder = schema.encoder
    if encoder is not None:
        try:
            batch_parts = parts.get(schema.schema_id)
            if batch_parts is None:
                batch_parts = parts[schema.schema_id] = encoder.parts(
                    batch.sent_at, meta.received_at, batch.sdk.name, batch.sdk.version)
            return encoder.encode(ev, batch_parts, props)
        except _ENCODE_ERRORS:
            pass  # fastavro's writer decides, and words the rejection
    return fastavro_encode(index, batch, ev, schema, meta, props=props)


_ENCODE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, OverflowError)


def fastavro_encode(index: int, batch: WireBatch, ev: WireEvent, schema: CompiledSchema, meta: RequestMeta, *,
                    props: Any) -> bytes | Rejection:
    """The reference encoding: a dict per event written by `fastavro.schemaless_writer`."""
    record = {
        "event_id": ev.event_id, "event_type": ev.event_type, "producer_id": ev.producer_id, "seq": ev.seq,
        "node_id": ev.node_id, "created_at": ev.created_at, "sent_at": batch.sent_at,
        "received_at": meta.received_at, "sdk_name": batch.sdk.name, "sdk_version": batch.sdk.version,
        "context": ev.context, "properties": msgspec.to_builtins(props, builtin_types=(bytes,)),
    }
    buf = io.BytesIO()
    buf.write(frame(schema.schema_id, b""))
    try:
        fastavro.schemaless_writer(buf, schema.parsed, record)
    except _ENCODE_ERRORS as exc:
        return Rejection(index, "invalid_properties", clip(f"does not match the schema: {exc}"))
    return buf.getvalue()


def avro_misses(events: list[bytes], cache: SchemaCache) -> set[int]:
    """Schema ids this Avro batch names that the cache does not hold."""
    # Hot path: the id sliced inline, not avro_frame.schema_id_of (a call per event; avro_batch checked the frame).
    ids = {int.from_bytes(e[1:5], "big") for e in events}
    return {i for i in ids if cache.by_id(i) is None and not cache.known_missing(i)}


def plan_avro(batch: AvroBatch, cache: SchemaCache, meta: RequestMeta, deadletter_topic: str) -> Plan:
    plan = Plan()
    for index, (framed, env) in enumerate(zip(batch.events, batch.envelopes, strict=True)):
        schema_id = int.from_bytes(framed[1:5], "big")  # hot path: inline, as in avro_misses
        schema = cache.by_id(schema_id)
        if schema is None:
            rej = Rejection(index, "unknown_schema_id", f"schema id {schema_id} is not an event schema")
            ref = SchemaRef(None, None, schema_id)
        else:
            ref = SchemaRef(schema.route.subject, schema.version, schema_id)
            rej_or_none = _check_avro_event(index, framed, env, schema)
            if rej_or_none is None and env is not None:
                plan.records.append(KafkaRecord(schema.route.topic, env.node_id.encode(), framed,
                                                event_headers(meta, env.event_id, env.producer_id)))
                plan.accepted += 1
                continue
            rej = rej_or_none or Rejection(index, "invalid_avro", "unreadable event")
        plan.rejected.append(rej)
        plan.records.append(dead_letter(
            deadletter_topic, meta, rej, framed, is_json=False, schema=ref, key=env.node_id if env else "",
            event_id=env.event_id if env else None, event_type=env.event_type if env else None,
            producer_id=env.producer_id if env else None))
    return plan


def _check_avro_event(index: int, framed: bytes, env: Envelope | None, schema: CompiledSchema) -> Rejection | None:
    try:
        if env is None:
            raise ValueError("the envelope fields are unreadable")
        if schema.skip is not None:
            end = schema.skip(framed)
        else:
            buf = io.BytesIO(framed)
            buf.seek(5)
            fastavro.schemaless_reader(buf, schema.parsed, schema.skip_reader)
            end = buf.tell()
    except Exception as exc:
        return Rejection(index, "invalid_avro", clip(f"not readable with schema id {schema.schema_id}: {exc!r}"))
    if end != len(framed):
        return Rejection(index, "invalid_avro", f"{len(framed) - end} trailing bytes after the record")
    if env.event_type != schema.route.event_type:
        return Rejection(index, "event_type_mismatch",
                         clip(f"event_type {env.event_type!r} but schema id {schema.schema_id} is "
                              f"{schema.route.event_type!r}"))
    return None
