"""Unit tests of the projected reader schemas the aggregates decode with (fastavro as the Avro reference)."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest

from bench.spark.generate import generate
from schemas.catalog import load_catalog
from spark_pipeline.decode import AGGREGATE_FIELDS, ENVELOPE, projected_reader

pytestmark = pytest.mark.unit


def _roundtrip(record: dict[str, Any], writer: str, reader: str) -> dict[str, Any]:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(writer)), record)
    buf.seek(0)
    out: dict[str, Any] = fastavro.schemaless_reader(  # type: ignore[assignment]
        buf, fastavro.parse_schema(json.loads(writer)), fastavro.parse_schema(json.loads(reader)))
    return out


def test_projection_keeps_only_the_read_fields_and_resolves_every_older_writer() -> None:
    catalog = load_catalog()
    for e in generate(12):
        et = catalog.event_types[e.event_type]
        latest = et.schema_text(et.latest_version)
        reader = projected_reader(latest, e.event_type, AGGREGATE_FIELDS)
        got = _roundtrip(e.record, et.schema_text(e.version), reader)
        assert set(got) == (AGGREGATE_FIELDS & set(ENVELOPE)) | {"properties"}
        full = _roundtrip(e.record, et.schema_text(e.version), latest)
        assert {k: v for k, v in full.items() if k in got and k != "properties"} == \
            {k: v for k, v in got.items() if k != "properties"}
        # only the properties that feed user_id / metric_value, with the reader's defaults for older writers
        assert got["properties"] == {k: full["properties"][k] for k in got["properties"]}
        assert len(got["properties"]) < len(full["properties"])


def test_projection_of_every_column_is_the_full_schema_and_typed_fields_are_optional() -> None:
    et = load_catalog().event_types["page_view"]
    latest = et.schema_text(et.latest_version)
    assert json.loads(projected_reader(latest, "page_view", frozenset({*ENVELOPE, "properties_json"}))) == \
        json.loads(latest)
    envelope_only = json.loads(projected_reader(latest, "page_view", frozenset({"event_id", "created_at"})))
    assert [f["name"] for f in envelope_only["fields"]] == ["event_id", "created_at"]
    # an event type without typed sources keeps no properties at all
    other = json.loads(projected_reader(latest, "unknown_type", frozenset({"event_id", "user_id"})))
    assert [f["name"] for f in other["fields"]] == ["event_id"]


def test_projection_falls_back_to_the_full_schema_when_it_would_orphan_a_named_type() -> None:
    schema = json.dumps({"type": "record", "name": "x", "fields": [
        {"name": "context", "type": {"type": "record", "name": "ctx", "fields": [{"name": "a", "type": "int"}]}},
        {"name": "event_id", "type": "ctx"}]})
    assert projected_reader(schema, "x", frozenset({"event_id"})) == schema
