"""Unit tests of the field-level schema diff."""

from __future__ import annotations

import pytest

from schemas.diff import diff

pytestmark = pytest.mark.unit


def record(*fields: dict[str, object]) -> dict[str, object]:
    return {"type": "record", "name": "r", "fields": list(fields)}


def test_added_removed_type_and_default_changes_with_dotted_paths() -> None:
    old = record({"name": "a", "type": "string"}, {"name": "gone", "type": "int"},
                 {"name": "n", "type": record({"name": "x", "type": "int"})},
                 {"name": "d", "type": "int", "default": 1})
    new = record({"name": "a", "type": "long"}, {"name": "n", "type": record({"name": "x", "type": "string"},
                                                                           {"name": "y", "type": "int"})},
                 {"name": "d", "type": "int", "default": 2},
                 {"name": "opt", "type": ["null", "string"], "default": None})
    assert [str(c) for c in diff(old, new)] == [
        "- gone: int",
        "~ a: type changed: string -> long",
        "~ n.x: type changed: int -> string",
        "+ n.y: int (no default)",
        "~ d: default changed: 1 -> 2",
        "+ opt: [null, string] = null",
    ]


def test_identical_records_have_no_changes() -> None:
    r = record({"name": "a", "type": {"type": "array", "items": "string"}})
    assert diff(r, r) == []
