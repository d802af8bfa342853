"""The peer's JSON Schema is generated from the registry's Avro schema: each Avro construct's translation, and the
page_view schema the benchmark uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.peers.avro_jsonschema import INT_RANGE, LONG_RANGE, UUID_PATTERN, AvroSchemaError, avro_to_json_schema

pytestmark = pytest.mark.unit
SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "events"


def _field(doc: dict[str, Any], name: str) -> Any:
    return doc["properties"][name]


def test_page_view_is_a_closed_object_requiring_the_fields_without_default() -> None:
    avro = json.loads((SCHEMAS / "page_view" / "v2.avsc").read_text())
    doc = avro_to_json_schema(avro)
    assert doc["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert doc["type"] == "object" and doc["additionalProperties"] is False
    assert list(doc["properties"]) == [f["name"] for f in avro["fields"]]
    assert doc["required"] == [f["name"] for f in avro["fields"] if "default" not in f]
    assert "received_at" not in doc["required"] and "event_id" in doc["required"]
    assert _field(doc, "event_id") == {"type": "string", "pattern": UUID_PATTERN}
    assert _field(doc, "seq") == {"type": "integer", "minimum": LONG_RANGE[0], "maximum": LONG_RANGE[1]}
    assert _field(doc, "context") == {"type": "object", "additionalProperties": {"type": "string"}}
    assert _field(doc, "properties") == {"$ref": "#/definitions/headwater.events.page_view_properties"}
    props = doc["definitions"]["headwater.events.page_view_properties"]
    assert props["additionalProperties"] is False
    assert props["properties"]["referrer"] == {"anyOf": [{"type": "null"}, {"type": "string"}]}
    viewport = doc["definitions"]["headwater.events.page_view_viewport"]
    assert viewport["properties"]["width"] == {"type": "integer", "minimum": INT_RANGE[0], "maximum": INT_RANGE[1]}
    assert viewport["required"] == ["width", "height"]


def test_every_registered_event_schema_translates() -> None:
    for avsc in sorted(SCHEMAS.glob("*/v*.avsc")):
        doc = avro_to_json_schema(json.loads(avsc.read_text()))
        assert doc["type"] == "object", avsc
        json.dumps(doc)  # plain JSON, as the peer reads it


def test_primitives_arrays_enums_and_fixed() -> None:
    avro = {"type": "record", "name": "r", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
        {"name": "raw", "type": "bytes"}, {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "color", "type": {"type": "enum", "name": "color", "symbols": ["RED", "BLUE"]}},
        {"name": "hash", "type": {"type": "fixed", "name": "md5", "size": 16}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "n", "type": ["null", "int"], "default": None},
    ]}
    doc = avro_to_json_schema(avro)
    p = doc["properties"]
    assert p["b"] == {"type": "boolean"} and p["f"] == {"type": "number"} and p["d"] == {"type": "number"}
    assert p["raw"] == {"type": "string"}
    assert p["tags"] == {"type": "array", "items": {"type": "string"}}
    assert p["color"] == {"$ref": "#/definitions/color"} and doc["definitions"]["color"] == {"enum": ["RED", "BLUE"]}
    assert p["hash"] == {"$ref": "#/definitions/md5"} and doc["definitions"]["md5"] == {"type": "string"}
    assert p["ts"]["type"] == "integer" and p["ts"]["maximum"] == LONG_RANGE[1]
    assert doc["required"] == ["b", "f", "d", "raw", "tags", "color", "hash", "ts"]


def test_named_types_are_defined_once_and_may_refer_to_themselves() -> None:
    avro = {"type": "record", "name": "node", "namespace": "x.y", "fields": [
        {"name": "value", "type": "long"},
        {"name": "next", "type": ["null", "node"], "default": None},
        {"name": "point", "type": {"type": "record", "name": "point", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "other", "type": "x.y.point"},
    ]}
    doc = avro_to_json_schema(avro)
    assert doc["properties"]["next"] == {"anyOf": [{"type": "null"}, {"$ref": "#/definitions/x.y.node"}]}
    assert doc["properties"]["point"] == doc["properties"]["other"] == {"$ref": "#/definitions/x.y.point"}
    assert set(doc["definitions"]) == {"x.y.node", "x.y.point"}
    assert doc["required"] == ["value", "point", "other"]


def test_a_record_without_required_fields_has_no_required_list() -> None:
    doc = avro_to_json_schema({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int", "default": 0}]})
    assert "required" not in doc


@pytest.mark.parametrize("avro", [
    {"type": "record", "name": "r", "fields": [{"name": "a", "type": "nosuch"}]},
    {"type": "record", "fields": []},
    {"type": "record", "name": "r"},
    42,
])
def test_what_is_not_an_avro_schema_is_refused(avro: Any) -> None:
    with pytest.raises(AvroSchemaError):
        avro_to_json_schema(avro)
