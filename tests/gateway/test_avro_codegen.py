"""The generated Avro encoders write the same bytes as fastavro's writer, for every schema and for odd values."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.avro_codegen import Unsupported, compile_encoder, pack_float, zigzag
from gateway.config import Limits
from gateway.ingest import encode_json_event, fastavro_encode
from gateway.json_batch import decode_json_batch
from gateway.records import Rejection, RequestMeta
from gateway.schemas import CompiledSchema, Route, compile_schema

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILES = sorted((ROOT / "schemas" / "events").glob("*/v*.avsc"))
META = RequestMeta.make(str(uuid.uuid4()), 1_800_000_000_000, "dev", "10.0.0.1", "test/1")
_ENVELOPE = json.loads((ROOT / "schemas" / "envelope.avsc").read_text())["fields"]
# Every kind of Avro type the generator compiles, nested, with defaults, in both union orders.
KITCHEN_SINK = {"name": "properties_all", "type": "record", "fields": [
    {"name": "flag", "type": "boolean"}, {"name": "small", "type": "int"}, {"name": "big", "type": "long"},
    {"name": "ratio", "type": "float"}, {"name": "precise", "type": "double"}, {"name": "text", "type": "string"},
    {"name": "blob", "type": "bytes"},
    {"name": "hash", "type": {"type": "fixed", "name": "md5", "size": 4}},
    {"name": "colour", "type": {"type": "enum", "name": "colour", "symbols": ["red", "green", "blue"]}},
    {"name": "again", "type": "colour"},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    {"name": "scores", "type": {"type": "map", "values": {"type": "array", "items": "double"}}, "default": {}},
    {"name": "maybe", "type": ["null", "string"], "default": None},
    {"name": "or_null", "type": ["long", "null"], "default": 0},
    {"name": "point", "type": ["null", {"type": "record", "name": "point", "fields": [
        {"name": "x", "type": "int"}, {"name": "y", "type": "int", "default": -1}]}], "default": None},
    {"name": "points", "type": {"type": "array", "items": "point"}, "default": []},
    {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
]}


def _event_schema(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "headwater.events",
            "fields": [*_ENVELOPE, {"name": "properties", "type": properties}]}


def _schemas() -> list[tuple[str, dict[str, Any]]]:
    files = [(f"{p.parent.name}/{p.stem}", json.loads(p.read_text())) for p in SCHEMA_FILES]
    return [*files, ("kitchen_sink", _event_schema("kitchen_sink", KITCHEN_SINK))]


def _compiled(schema: dict[str, Any], schema_id: int = 42) -> CompiledSchema:
    route = Route(schema["name"], f"headwater.events.{schema['name']}", "headwater.events")
    compiled = compile_schema(route, schema_id, 1, json.dumps(schema))
    assert compiled.encoder is not None, "every schema of the repository compiles"
    return compiled


_INT32, _INT64 = 2**31 - 1, 2**63 - 1
_TEXT = st.text(st.characters(codec="utf-8"), max_size=80) | st.sampled_from(["", "é", "\u2028", "a" * 200])


def _values(schema: Any, named: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Plain-JSON values of an Avro type (bytes and fixed as base64, as the JSON protocol sends them)."""
    if isinstance(schema, list):
        return st.one_of([_values(s, named) for s in schema])
    if isinstance(schema, str) and schema in named:
        return _values(named[schema], named)
    kind = schema if isinstance(schema, str) else schema["type"]
    if isinstance(kind, (dict, list)):
        return _values(kind, named)
    simple: dict[str, st.SearchStrategy[Any]] = {
        "null": st.none(), "boolean": st.booleans(), "string": _TEXT,
        "int": st.integers(-(2**31), _INT32) | st.sampled_from([0, 63, 64, -64, -65, _INT32, -(2**31)]),
        "long": st.integers(-(2**63), _INT64) | st.sampled_from([0, 63, 64, -65, 2**56, _INT64, -(2**63)]),
        "float": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**40), 2**40)
        | st.sampled_from([3.5e38, -1e300, 1e-46, -0.0]),
        "double": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53),
        "bytes": st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()),
    }
    if kind in simple:
        return simple[kind]
    if "name" in schema:
        named[schema["name"]] = schema
    if kind == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"]).map(lambda b: base64.b64encode(b).decode())
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "array":
        return st.lists(_values(schema["items"], named), max_size=5)
    if kind == "map":
        return st.dictionaries(_TEXT, _values(schema["values"], named), max_size=5)
    fields = schema["fields"]
    for f in fields:  # register nested named types before the strategies are drawn
        _values(f["type"], named)
    return st.fixed_dictionaries(
        {f["name"]: _values(f["type"], named) for f in fields if "default" not in f},
        optional={f["name"]: _values(f["type"], named) for f in fields if "default" in f})


def _event(properties: Any) -> dict[str, Any]:
    return {"event_id": str(uuid.uuid4()), "event_type": "x", "producer_id": str(uuid.uuid4()), "seq": 70,
            "node_id": "node-é", "created_at": 1_700_000_000_000, "context": {"app": "shop", "": "ü" * 70},
            "properties": properties}


def _both(compiled: CompiledSchema, properties: Any) -> tuple[bytes | Rejection, bytes | Rejection]:
    """(the generated encoder's output via the gateway's entry point, fastavro's output) for one event."""
    body = json.dumps({"batch_id": str(uuid.uuid4()), "sent_at": 2**40, "sdk": {"name": "t", "version": "ß"},
                       "events": [_event(properties)]}).encode()
    batch, events = decode_json_batch(body, Limits())
    fast = encode_json_event(0, batch, events[0], compiled, META, parts={})
    props = compiled.properties_decoder.decode(events[0].properties)
    return fast, fastavro_encode(0, batch, events[0], compiled, META, props=props)


@pytest.mark.parametrize(("name", "schema"), _schemas(), ids=[n for n, _ in _schemas()])
def test_generated_encoder_writes_fastavros_bytes(name: str, schema: dict[str, Any]) -> None:
    compiled = _compiled(schema)
    props_schema = next(f["type"] for f in schema["fields"] if f["name"] == "properties")

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_values(props_schema, {}))
    def check(properties: Any) -> None:
        fast, reference = _both(compiled, properties)
        assert isinstance(reference, bytes), reference
        assert fast == reference

    check()


def test_the_compiled_encoder_is_the_one_used() -> None:
    """A broken generated encoder would show: the gateway's entry point calls it, not fastavro."""
    compiled = _compiled(json.loads((ROOT / "schemas/events/page_view/v2.avsc").read_text()))
    assert compiled.encoder is not None
    seen: list[Any] = []

    def spy(ev: Any, parts: tuple[bytes, ...], props: Any) -> bytes:
        seen.append(props)
        return b"generated"

    spied = CompiledSchema(**{**compiled.__dict__, "encoder": type(compiled.encoder)(compiled.encoder.parts, spy)})
    example = json.loads((ROOT / "schemas/examples/page_view.json").read_text())
    fast, reference = _both(spied, example["properties"])
    assert fast == b"generated" and isinstance(reference, bytes)
    assert isinstance(seen[0], msgspec.Struct)  # the decoded properties, never a dict


def test_values_the_encoder_refuses_fall_back_to_fastavro() -> None:
    """A record-typed default arrives as a dict, not a Struct: the event is encoded by fastavro, same bytes."""
    props = {"name": "p", "type": "record", "fields": [
        {"name": "inner", "type": {"type": "record", "name": "inner", "fields": [{"name": "a", "type": "int"}]},
         "default": {"a": 5}}]}
    compiled = _compiled(_event_schema("defaults", props))
    fast, reference = _both(compiled, {})
    assert isinstance(reference, bytes)
    assert fast == reference


def test_unions_of_several_types_keep_fastavro() -> None:
    props = {"name": "p", "type": "record", "fields": [{"name": "v", "type": ["null", "string", "long"]}]}
    with pytest.raises(Unsupported):
        compile_encoder(_event_schema("unions", props), 1)
    route = Route("unions", "headwater.events.unions", "headwater.events")
    compiled = compile_schema(route, 1, 1, json.dumps(_event_schema("unions", props)))
    assert compiled.encoder is None
    fast, reference = _both(compiled, {"v": 7})
    assert fast == reference


def test_fields_the_gateway_does_not_fill_keep_fastavro() -> None:
    schema = _event_schema("extra", {"name": "p", "type": "record", "fields": []})
    schema["fields"].append({"name": "region", "type": "string", "default": "eu"})
    with pytest.raises(Unsupported, match="region"):
        compile_encoder(schema, 1)


@pytest.mark.parametrize("n", [0, 1, -1, 63, 64, -64, -65, 2**31, 2**63 - 1, -(2**63)])
def test_zigzag_matches_the_avro_spec(n: int) -> None:
    z = (n << 1) ^ (n >> 63)
    out, value = zigzag(n), 0
    for shift, byte in enumerate(out):
        value |= (byte & 0x7F) << (7 * shift)
    assert value == z and all(b & 0x80 for b in out[:-1]) and not out[-1] & 0x80


def test_floats_beyond_32_bits_become_infinities_like_a_c_cast() -> None:
    assert pack_float(1e300) == pack_float(float("inf"))
    assert pack_float(-1e300) == pack_float(float("-inf"))


def test_generated_code_has_no_dict_per_event() -> None:
    """The point of the generator: the event is written from Structs (attribute reads), never via to_builtins."""
    compiled = _compiled(json.loads(SCHEMA_FILES[0].read_text()))
    assert compiled.encoder is not None
    names = compiled.encoder.encode.__code__.co_names
    assert "to_builtins" not in names and "schemaless_writer" not in names
