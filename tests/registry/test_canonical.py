"""Unit tests of schema parsing and the canonical form that decides global ids."""

from __future__ import annotations

import json

import pytest

from registry.canonical import canonical_form, parse_schema
from registry.errors import InvalidSchema

pytestmark = pytest.mark.unit


def test_formatting_key_order_docs_and_namespace_shorthand_do_not_matter() -> None:
    a = {"type": "record", "name": "e", "namespace": "ns", "doc": "x",
         "fields": [{"name": "f", "type": {"type": "string"}, "doc": "y"},
                    {"name": "g", "type": {"type": "record", "name": "inner", "fields": []}},
                    {"name": "h", "type": "inner"}]}
    b = {"fields": [{"type": "string", "name": "f"},
                    {"name": "g", "type": {"name": "ns.inner", "type": "record", "fields": []}},
                    {"name": "h", "type": "ns.inner"}], "name": "ns.e", "type": "record"}
    assert canonical_form(a) == canonical_form(b)
    assert parse_schema(json.dumps(a, indent=4)).canonical == parse_schema(json.dumps(b)).canonical
    assert canonical_form(a) == ('{"name":"ns.e","type":"record","fields":[{"name":"f","type":"string"},'
                                 '{"name":"g","type":{"name":"ns.inner","type":"record","fields":[]}},'
                                 '{"name":"h","type":"ns.inner"}]}')


def test_defaults_and_logical_types_are_part_of_identity() -> None:
    def rec(field: dict[str, object]) -> dict[str, object]:
        return {"type": "record", "name": "e", "fields": [field]}

    forms = {
        canonical_form(rec({"name": "f", "type": "long"})),
        canonical_form(rec({"name": "f", "type": "long", "default": 0})),
        canonical_form(rec({"name": "f", "type": "long", "default": 1})),
        canonical_form(rec({"name": "f", "type": {"type": "long", "logicalType": "timestamp-millis"}})),
    }
    assert len(forms) == 4


def test_primitive_schemas() -> None:
    assert parse_schema('"string"').canonical == '"string"'
    assert parse_schema('{"type": "int"}').canonical == '"int"'


@pytest.mark.parametrize("text", [
    "{not json", '{"type": "record", "name": "e"}', '"strang"', '{"type": "record", "name": "e", "fields": 3}',
    '{"type": "enum", "name": "e", "symbols": ["a", "a"]}',
])
def test_invalid_schemas_raise_42201(text: str) -> None:
    with pytest.raises(InvalidSchema) as info:
        parse_schema(text)
    assert info.value.code == 42201 and info.value.status == 422
    assert str(info.value).startswith("Invalid schema")


def _reordered_without_docs(node: object) -> object:
    if isinstance(node, dict):
        return {k: _reordered_without_docs(v) for k, v in reversed(list(node.items())) if k != "doc"}
    if isinstance(node, list):
        return [_reordered_without_docs(v) for v in node]
    return node


def test_catalog_schemas_canonical_form_refines_avros_parsing_canonical_form() -> None:
    import avro.schema

    from schemas import load_catalog

    for et in load_catalog().event_types.values():
        for n in range(1, et.latest_version + 1):
            text = et.schema_text(n)
            parsed = parse_schema(text)
            assert parse_schema(json.dumps(_reordered_without_docs(json.loads(text)))).canonical == parsed.canonical
            assert parse_schema(parsed.canonical).canonical == parsed.canonical  # a fixed point
            assert avro.schema.parse(parsed.canonical).canonical_form == avro.schema.parse(text).canonical_form
