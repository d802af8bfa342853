"""Odd event schemas in the registry (plain-long timestamps, missing or mistyped envelope fields) never stop
the decoder: what can be normalised decodes to the canonical row, the rest is dead-lettered with the reason."""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from typing import TYPE_CHECKING, Any

import fastavro
import pytest

from bench.spark.generate import Encoder, generate, register_catalog
from common.avro_frame import frame
from common.registry_client import RegistryClient
from spark_pipeline import decode, normalise
from spark_pipeline.snapshot import SchemaSnapshot, WriterSchema, take_snapshot
from tests.spark_pipeline.frames import catalog_snapshot, framed, kafka_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _schema(name: str, envelope: list[dict[str, Any]]) -> str:
    props = {"name": "properties", "type": {"type": "record", "name": f"{name}_properties",
                                             "fields": [{"name": "plan", "type": "string"}]}}
    return json.dumps({"type": "record", "name": name, "namespace": "headwater.events", "fields": [*envelope, props]})


def _plain(name: str) -> str:
    """The envelope without logical types: uuid as string, timestamps as plain long (epoch ms)."""
    return _schema(name, [
        {"name": "event_id", "type": "string"}, {"name": "event_type", "type": "string"},
        {"name": "producer_id", "type": "string"}, {"name": "seq", "type": "long"},
        {"name": "node_id", "type": "string"}, {"name": "created_at", "type": "long"},
        {"name": "sent_at", "type": "long"}, {"name": "received_at", "type": ["null", "long"], "default": None},
        {"name": "sdk_name", "type": "string"}, {"name": "sdk_version", "type": "string"},
        {"name": "context", "type": {"type": "map", "values": "string"}}])


def _lean(name: str) -> str:
    """An int seq, a local timestamp, no received_at and no context: normalisable too."""
    return _schema(name, [
        {"name": "event_id", "type": "string"}, {"name": "event_type", "type": "string"},
        {"name": "producer_id", "type": "string"}, {"name": "seq", "type": "int"},
        {"name": "node_id", "type": "string"},
        {"name": "created_at", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "sent_at", "type": "long"}, {"name": "sdk_name", "type": "string"},
        {"name": "sdk_version", "type": "string"}])


def _broken(name: str) -> str:
    """created_at as an ISO string: cannot be normalised."""
    return _plain(name).replace('{"name": "created_at", "type": "long"}', '{"name": "created_at", "type": "string"}')


def _record(event_type: str, seq: int, created: Any) -> dict[str, Any]:
    return {"event_id": str(uuid.uuid4()), "event_type": event_type, "producer_id": str(uuid.uuid4()), "seq": seq,
            "node_id": "node-0001", "created_at": created, "sent_at": MS, "received_at": MS + 5,
            "sdk_name": "t", "sdk_version": "0", "context": {"k": "v"}, "properties": {"plan": "pro"}}


def _frame(schema: str, schema_id: int, record: dict[str, Any]) -> tuple[bytes, list[tuple[str, bytes]]]:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(schema)), record)
    return frame(schema_id, buf.getvalue()), [("received_at", str(MS + 7).encode())]


def test_odd_schemas_in_the_registry_decode_or_dead_letter_and_the_rest_decodes(
        spark: SparkSession, registry_url: str) -> None:
    client = RegistryClient(registry_url)
    ids = register_catalog(registry_url)
    tag = uuid.uuid4().hex[:10]
    plain, lean, broken = f"plain_{tag}", f"lean_{tag}", f"broken_{tag}"
    schemas = {plain: _plain(plain), lean: _lean(lean), broken: _broken(broken)}
    odd_ids = {name: client.register(f"headwater.events.{name}", text) for name, text in schemas.items()}
    snapshot = take_snapshot(client, "headwater.events.")
    assert set(odd_ids.values()) <= set(snapshot.writers)

    events = list(generate(9))
    odd = {
        "plain": _record(plain, 0, MS), "lean": _record(lean, 1, MS), "broken": _record(broken, 2, "2026-01-01"),
        "huge": _record(plain, 3, 2**62),  # beyond Spark's timestamp range
    }
    rows_in = [*framed(Encoder(ids), events),
               _frame(schemas[plain], odd_ids[plain], odd["plain"]),
               _frame(schemas[lean], odd_ids[lean], {k: v for k, v in odd["lean"].items()
                                                     if k not in ("received_at", "context")}),
               _frame(schemas[broken], odd_ids[broken], odd["broken"]),
               _frame(schemas[plain], odd_ids[plain], odd["huge"])]
    raw = kafka_frame(spark, rows_in)
    for strict in (False, True):  # strict: the odd ids are known, so they never fail the batch
        decoded = decode.decode(decode.frame(raw), snapshot, strict=strict)
        out = {r["event_id"]: r for r in decode.events(decoded).collect()}
        assert set(out) == {e.record["event_id"] for e in events} | {odd["plain"]["event_id"], odd["lean"]["event_id"]}
        first = dt.datetime.fromtimestamp(MS / 1000, dt.UTC).replace(tzinfo=None)
        p = out[odd["plain"]["event_id"]]
        assert (p["event_type"], p["seq"], p["created_at"], p["sent_at"]) == (plain, 0, first, first)
        assert p["received_at"] == first + dt.timedelta(milliseconds=5) and p["context"] == {"k": "v"}
        assert json.loads(p["properties_json"]) == {"plan": "pro"} and p["schema_id"] == odd_ids[plain]
        lean_row = out[odd["lean"]["event_id"]]
        assert (lean_row["seq"], lean_row["created_at"], lean_row["context"]) == (1, first, {})
        assert lean_row["received_at"] == first + dt.timedelta(milliseconds=7)  # from the header
        dead = {r["schema_id"]: r["error"] for r in decode.dead_letters(decoded).collect()}
        assert dead[odd_ids[broken]] == (f"unusable schema headwater.events.{broken}: "
                                         "envelope field created_at is string, expected timestamp")
        assert dead[odd_ids[plain]].startswith("envelope timestamp out of range")
        assert len(dead) == 2


def test_a_schema_spark_cannot_decode_or_that_is_no_record_is_skipped(spark: SparkSession) -> None:
    snapshot, ids = catalog_snapshot()
    recursive = _plain("node").replace('"fields": [{"name": "plan", "type": "string"}]',
                                        '"fields": [{"name": "child", "type": ["null", "node_properties"]}]')
    extra = {900: WriterSchema(900, "headwater.events.scalar", 1, '"string"'),
             901: WriterSchema(901, "headwater.events.node", 1, recursive)}
    odd = SchemaSnapshot({**snapshot.writers, **extra},
                         {**snapshot.readers, **{w.subject: w for w in extra.values()}})
    events = list(generate(3))
    raw = kafka_frame(spark, [*framed(Encoder(ids), events), (b"\x00\x00\x00\x03\x84\x02ab", []),
                              (b"\x00\x00\x00\x03\x85\x02ab\x00", [])])
    decoded = decode.decode(decode.frame(raw), odd, strict=True)
    assert {r["event_id"] for r in decode.events(decoded).collect()} == {e.record["event_id"] for e in events}
    dead = {r["schema_id"]: r["error"] for r in decode.dead_letters(decoded).collect()}
    assert dead[900] == "unusable schema headwater.events.scalar: the schema is string, not a record"
    assert dead[901].startswith("unusable schema headwater.events.node: Spark cannot decode it: ")
    assert set(dead) == {900, 901}


def test_the_canonical_row_type_is_what_every_decode_yields(spark: SparkSession) -> None:
    snapshot, ids = catalog_snapshot()
    raw = kafka_frame(spark, framed(Encoder(ids), list(generate(3))))
    for fields in (None, decode.AGGREGATE_FIELDS):
        event = decode.decode(decode.frame(raw), snapshot, strict=False, fields=fields).schema["event"].dataType
        wanted = frozenset(decode.ROW_COLUMNS) if fields is None else fields | {"created_at", "received_at"}
        assert event.simpleString() == normalise.row_type(wanted).simpleString()
