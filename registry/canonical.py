"""Parses Avro schema text and computes the canonical form that decides identity (and so global ids).

The form follows Avro's Parsing Canonical Form (full names, fixed key order, no whitespace, docs dropped)
but, unlike it, keeps what changes how data is read or interpreted: field and enum `default`s, `aliases`,
and logical types (`logicalType`, `precision`, `scale`). Plain PCF would give `{"type":"long"}` and a
`timestamp-millis` long, or two records differing only in a default, the same id, and a reader fetching
the schema by id would get the other one's defaults.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import avro.errors
import avro.schema

from registry.errors import InvalidSchema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
_ORDER = ("name", "type", "fields", "symbols", "items", "values", "size",
          "logicalType", "precision", "scale", "default", "aliases")


@dataclass(frozen=True)
class ParsedSchema:
    """A valid Avro schema: the text as submitted, its canonical form, and avro's parsed object."""

    text: str
    canonical: str
    avro: avro.schema.Schema


def parse_schema(text: str) -> ParsedSchema:
    """Validate with Apache avro's parser; raise InvalidSchema (42201) naming the problem."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InvalidSchema(f"Invalid schema: not JSON: {exc}") from None
    try:
        parsed = avro.schema.parse(text)
    except (avro.errors.AvroException, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from None
    return ParsedSchema(text=text, canonical=canonical_form(raw), avro=parsed)


def canonical_form(schema: Any) -> str:
    """The canonical JSON text of an (already valid) Avro schema given as parsed JSON."""
    return json.dumps(_canon(schema, "", set()), separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def _fullname(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _canon(schema: Any, namespace: str, defined: set[str]) -> Any:
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return schema
        full = _fullname(schema, namespace)
        return full if full in defined else schema
    if isinstance(schema, list):
        return [_canon(branch, namespace, defined) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return _canon(kind, namespace, defined)
    out: dict[str, Any] = {}
    if kind in _NAMED:
        name = str(schema["name"])
        namespace = str(schema.get("namespace") or namespace) if "." not in name else name.rsplit(".", 1)[0]
        full = _fullname(name, namespace)
        defined.add(full)
        out["name"] = full
        if "aliases" in schema:
            out["aliases"] = [_fullname(str(a), namespace) for a in schema["aliases"]]
    out["type"] = "record" if kind == "error" else kind
    if kind in ("record", "error"):
        out["fields"] = [_canon_field(f, namespace, defined) for f in schema["fields"]]
    for key in ("symbols", "size", "logicalType", "precision", "scale", "default"):
        if key in schema:
            out[key] = schema[key]
    if "items" in schema:
        out["items"] = _canon(schema["items"], namespace, defined)
    if "values" in schema:
        out["values"] = _canon(schema["values"], namespace, defined)
    if kind in PRIMITIVES and len(out) == 1:
        return kind
    return {k: out[k] for k in _ORDER if k in out}


def _canon_field(field: dict[str, Any], namespace: str, defined: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": field["name"], "type": _canon(field["type"], namespace, defined)}
    if "default" in field:
        out["default"] = field["default"]
    if "aliases" in field:
        out["aliases"] = list(field["aliases"])
    return out
