"""The compiled one-pass Avro reader (gateway/_avro_fast.c): it accepts exactly the events fastavro reads, with the
same end and the same envelope, and refuses what is not a value of the schema."""

from __future__ import annotations

import io
import json
import struct
import uuid
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.avro_frame import body_of, frame
from gateway import avro_fast
from gateway.avro_batch import Envelope, envelope_problem, read_envelope
from gateway.json_batch import MAX_TEXT
from tests.gateway.test_avro_codegen import _both, _compiled, _schemas, _values

pytestmark = [pytest.mark.unit,
              pytest.mark.skipif(not avro_fast.NATIVE, reason="gateway/_avro_fast.c is not built (make setup)")]


def _native(schema: Any) -> Any:
    program = avro_fast.compile_program(schema)
    return avro_fast.skip_with(program, None, None)


def _fastavro_end(schema: Any, framed: bytes) -> int | None:
    """Where fastavro's skip reader (the gateway's reader before the compiled one) ends on the body, None when it
    refuses it."""
    buf = io.BytesIO(framed)
    buf.seek(5)
    skip_reader = fastavro.parse_schema({"type": "record", "name": schema["name"], "fields": []})
    try:
        fastavro.schemaless_reader(buf, fastavro.parse_schema(schema), skip_reader)
    except Exception:
        return None
    return buf.tell()


@pytest.mark.parametrize(("name", "schema"), _schemas(), ids=[n for n, _ in _schemas()])
def test_valid_events_end_where_fastavro_ends_and_every_truncation_is_refused(name: str, schema: Any) -> None:
    compiled = _compiled(schema)
    skip = _native(schema)
    props_schema = next(f["type"] for f in schema["fields"] if f["name"] == "properties")

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_values(props_schema, {}))
    def check(properties: Any) -> None:
        _, framed = _both(compiled, properties)
        assert isinstance(framed, bytes)
        assert skip(framed) == len(framed) == _fastavro_end(schema, framed)
        (env,) = avro_fast.native_envelopes([framed], Envelope) or [None]
        assert env == read_envelope(body_of(framed))
        for cut in range(5, len(framed)):
            with pytest.raises(ValueError):
                skip(framed[:cut])

    check()


def _one(field_type: Any) -> dict[str, Any]:
    return {"type": "record", "name": "r", "fields": [{"name": "f", "type": field_type}]}


@pytest.mark.parametrize(("field_type", "body", "why"), [
    ("boolean", b"\x02", "boolean byte is not 0 or 1"),
    ("int", b"\x80\x80\x80\x80\x10", "int beyond 32 bits"),
    ("long", b"\xff" * 10 + b"\x01", "varint too long"),
    ("string", b"\x03", "negative length"),
    ("string", b"\x08ab", "length beyond the end"),
    ("string", b"\x04\xc3\x28", "string is not UTF-8"),
    ("string", b"\x06\xed\xa0\x80", "string is not UTF-8"),  # a surrogate
    ({"type": "enum", "name": "e", "symbols": ["a", "b"]}, b"\x04", "enum symbol out of range"),
    (["null", "string"], b"\x04", "union branch out of range"),
    (["null", "string"], b"\x01", "union branch out of range"),
    ({"type": "array", "items": "null"}, b"\xfe\xff\xff\xff\x0f", "block count beyond the end"),
    ({"type": "map", "values": "int"}, b"\x02\x02\xff\x00\x00", "map key is not UTF-8"),
    ({"type": "fixed", "name": "f4", "size": 4}, b"abc", "truncated fixed"),
    ("double", b"\x00" * 7, "truncated number"),
])
def test_bytes_that_are_not_a_value_of_the_schema_are_refused(field_type: Any, body: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        _native(_one(field_type))(frame(1, body))


def test_unions_arrays_maps_and_named_types_are_read_through() -> None:
    schema = {"type": "record", "name": "r", "namespace": "n", "fields": [
        {"name": "p", "type": {"type": "record", "name": "p", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "ps", "type": {"type": "array", "items": "p"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "n.p", "string"]}},
        {"name": "e", "type": {"type": "enum", "name": "e", "symbols": ["a", "b", "c"]}},
        {"name": "again", "type": "e"}]}
    value = {"p": {"x": -3}, "ps": [{"x": 1}, {"x": 2}], "m": {"k": {"x": 5}, "s": "é", "z": None}, "e": "c",
             "again": "a"}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    framed = frame(9, buf.getvalue())
    assert _native(schema)(framed) == len(framed)
    blocked = frame(9, b"\x06" + b"\x03\x04\x02\x04" + b"\x00" + b"\x00" + b"\x04" + b"\x00")  # a sized block
    assert _native(schema)(blocked) == len(blocked)


def test_recursive_schemas_and_a_missing_extension_fall_back_to_fastavro() -> None:
    recursive = {"type": "record", "name": "node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "node"]}]}
    with pytest.raises(avro_fast.Unsupported):
        avro_fast.compile_program(recursive)
    parsed = fastavro.parse_schema(recursive)
    skip_reader = fastavro.parse_schema({"type": "record", "name": "node", "fields": []})
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, {"v": 1, "next": {"v": 2, "next": None}})
    framed = frame(3, buf.getvalue())
    assert avro_fast.skip_with(None, parsed, skip_reader)(framed) == len(framed)


def test_unreadable_envelopes_are_none_and_readable_ones_match_the_python_reader() -> None:
    good = frame(1, b"".join([
        _s(str(uuid.uuid4())), _s("page_view"), _s(str(uuid.uuid4())), b"\x0e", _s("node-é"), b"\x02", b"\x04"]))
    bad_utf8 = frame(1, b"\x04\xc3\x28")
    short = frame(1, b"\x50abc")
    got = avro_fast.native_envelopes([good, bad_utf8, short, b"\x00\x00"], Envelope)
    assert got == [read_envelope(body_of(good)), None, None, None]


def _s(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) * 2]) + data


@given(st.binary(max_size=60))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_crash_and_are_accepted_only_when_fastavro_reads_them(body: bytes) -> None:
    schema = _one({"type": "map", "values": ["null", "long", {"type": "array", "items": "string"}]})
    framed = frame(1, body)
    try:
        end = _native(schema)(framed)
    except ValueError:
        return
    assert end == _fastavro_end(schema, framed)


def test_the_program_format_is_stable() -> None:
    assert avro_fast.compile_program(_one("long")) == bytes([13]) + struct.pack("<II", 1, 1) + bytes([3])
    assert json.dumps(_one("long"))  # plain JSON in, bytes out


_UUIDISH = st.sampled_from([str(uuid.uuid4()), str(uuid.uuid4()).upper(), str(uuid.uuid4()) + "\n",
                            str(uuid.uuid4()) + "\n\n", str(uuid.uuid4())[:-1] + "g", str(uuid.uuid4())[1:],
                            str(uuid.uuid4()).replace("-", "_", 1), "", "é" * 36])
_LONGS = st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, -1])
_TEXTS = st.text(max_size=5) | st.sampled_from(["é" * 1024, "é" * 1025, "a" * 1025])


@given(st.lists(st.none() | st.tuples(_UUIDISH, _TEXTS, _UUIDISH, _LONGS, _TEXTS, _LONGS, _LONGS), max_size=6))
@settings(max_examples=400, deadline=None)
def test_the_compiled_envelope_rules_flag_the_first_envelope_the_python_rules_refuse(rows: list[Any]) -> None:
    envs = [None if r is None else Envelope(*r) for r in rows]
    python = next((i for i, e in enumerate(envs) if e is not None and envelope_problem(e) is not None), None)
    found = avro_fast.first_problem(envs, MAX_TEXT)
    assert (found[0] if found else None) == python
