"""Unit tests of compatibility decisions for the Confluent levels (Apache avro's checker underneath)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import avro.schema
import pytest

from registry.compat import LEVELS, check, normalize_level

pytestmark = pytest.mark.unit


def rec(*fields: Mapping[str, object]) -> avro.schema.Schema:
    return avro.schema.parse(json.dumps({"type": "record", "name": "e", "fields": list(fields)}))


A = {"name": "a", "type": "string"}
B_DEFAULT = {"name": "b", "type": "int", "default": 0}
B_REQUIRED = {"name": "b", "type": "int"}
V1 = rec(A)


@pytest.mark.parametrize(("level", "new", "ok"), [
    ("NONE", rec({"name": "a", "type": "int"}), True),
    ("BACKWARD", rec(A, B_DEFAULT), True),
    ("BACKWARD", rec(A, B_REQUIRED), False),  # the new reader has no value for b in old data
    ("FORWARD", rec(A, B_REQUIRED), True),  # the old reader ignores b
    ("FORWARD", rec(B_DEFAULT), False),  # the old reader needs a, which new data lacks
    ("BACKWARD", rec(B_DEFAULT), True),
    ("FULL", rec(A, B_DEFAULT), True),
    ("FULL", rec(A, B_REQUIRED), False),
    ("BACKWARD", rec({"name": "a", "type": ["null", "string"], "default": None}), True),  # widening to a union
    ("FORWARD", rec({"name": "a", "type": ["null", "string"], "default": None}), False),
])
def test_levels_against_the_latest(level: str, new: avro.schema.Schema, ok: bool) -> None:
    assert (check(level, new, [(1, V1)]) == []) is ok


def test_transitive_checks_every_earlier_version_plain_only_the_latest() -> None:
    v1 = rec({"name": "a", "type": "string"})
    v2 = rec({"name": "a", "type": "string"}, {"name": "b", "type": "int", "default": 0})
    v3 = rec({"name": "b", "type": "int"})  # reads v2 data (b present) but not v1 data (no b)
    assert check("BACKWARD", v3, [(1, v1), (2, v2)]) == []
    problems = check("BACKWARD_TRANSITIVE", v3, [(1, v1), (2, v2)])
    assert [p.version for p in problems] == [1]


def test_message_names_the_field_and_the_rule() -> None:
    def props(n_type: str) -> dict[str, object]:
        return {"name": "p", "type": {"type": "record", "name": "props", "fields": [{"name": "n", "type": n_type}]}}

    old, new = rec(A, props("int")), rec(A, props("string"))
    [problem] = check("BACKWARD", new, [(3, old)])
    text = str(problem)
    assert "type_mismatch" in text and "p.n" in text and "version 3" in text
    [missing] = check("BACKWARD", rec(A, B_REQUIRED), [(1, V1)])
    assert "reader_field_missing_default_value" in str(missing) and "field b" in str(missing)


def test_normalize_level() -> None:
    assert normalize_level("full_transitive") == "FULL_TRANSITIVE"
    assert normalize_level("sideways") is None and normalize_level(3) is None
    assert len(LEVELS) == 7


def test_each_problem_names_its_own_field_inside_arrays_and_unions() -> None:
    def schema(qty: str, coupon: object) -> avro.schema.Schema:
        item = {"type": "record", "name": "item", "fields": [{"name": "qty", "type": qty}]}
        return rec({"name": "items", "type": {"type": "array", "items": item}},
                   {"name": "coupon", "type": coupon, "default": None})

    old, new = schema("int", ["null", "string"]), schema("string", ["null", "int"])
    assert [(p.field, p.rules) for p in check("BACKWARD", new, [(1, old)])] == [
        ("items[].qty", ("type_mismatch",)), ("coupon", ("missing_union_branch",))]
