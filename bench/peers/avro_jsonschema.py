"""Translates a registry Avro schema into the JSON Schema (draft 7) the peer validates each JSON event with.

The JSON Schema accepts what the gateway's JSON path accepts for the same Avro schema: a record is an object
with exactly its fields (unknown fields refused, fields without a default required), a union is any of its
branches written as plain JSON (no Avro-JSON `{"type": value}` wrapping), int and long are integers within
their ranges, a `uuid` string matches the UUID pattern, an enum is one of its symbols. Named types (records,
enums, fixed) become `definitions` referenced by `$ref`, so recursive and reused types translate once.
"""

from __future__ import annotations

from typing import Any

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)
_PRIMITIVES: dict[str, dict[str, Any]] = {
    "null": {"type": "null"},
    "boolean": {"type": "boolean"},
    "int": {"type": "integer", "minimum": INT_RANGE[0], "maximum": INT_RANGE[1]},
    "long": {"type": "integer", "minimum": LONG_RANGE[0], "maximum": LONG_RANGE[1]},
    "float": {"type": "number"},
    "double": {"type": "number"},
    "bytes": {"type": "string"},
    "string": {"type": "string"},
}


class AvroSchemaError(ValueError):
    """The Avro schema is not one this translator understands (the message says where)."""


class _Translator:
    def __init__(self) -> None:
        self.definitions: dict[str, dict[str, Any]] = {}

    def type_of(self, schema: Any, namespace: str | None) -> dict[str, Any]:
        if isinstance(schema, list):
            return {"anyOf": [self.type_of(branch, namespace) for branch in schema]}
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return dict(_PRIMITIVES[schema])
            return self._ref(schema, namespace)
        if not isinstance(schema, dict) or "type" not in schema:
            raise AvroSchemaError(f"not an Avro schema: {schema!r:.80}")
        kind = schema["type"]
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(schema, namespace)
        if kind == "array":
            return {"type": "array", "items": self.type_of(schema["items"], namespace)}
        if kind == "map":
            return {"type": "object", "additionalProperties": self.type_of(schema["values"], namespace)}
        if isinstance(kind, str) and kind in _PRIMITIVES:
            out = dict(_PRIMITIVES[kind])
            if kind == "string" and schema.get("logicalType") == "uuid":
                out["pattern"] = UUID_PATTERN
            return out
        return self.type_of(kind, namespace)  # {"type": <a schema>}: a wrapped type

    def _ref(self, name: str, namespace: str | None) -> dict[str, Any]:
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        for candidate in (full, name):
            if candidate in self.definitions:
                return {"$ref": f"#/definitions/{candidate}"}
        raise AvroSchemaError(f"unknown named type {name!r}")

    def _named(self, schema: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        name = schema.get("name")
        if not isinstance(name, str) or not name:
            raise AvroSchemaError(f"a {schema['type']} without a name: {schema!r:.80}")
        space = schema.get("namespace", namespace) if "." not in name else name.rsplit(".", 1)[0]
        full = name if "." in name or not space else f"{space}.{name}"
        self.definitions[full] = {}  # reserved first: a record may refer to itself
        if schema["type"] == "enum":
            body: dict[str, Any] = {"enum": list(schema["symbols"])}
        elif schema["type"] == "fixed":
            body = {"type": "string"}
        else:
            body = self._record(schema, space)
        self.definitions[full] = body
        return {"$ref": f"#/definitions/{full}"}

    def _record(self, schema: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise AvroSchemaError(f"record {schema['name']!r} has no field list")
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in fields:
            properties[field["name"]] = self.type_of(field["type"], namespace)
            if "default" not in field:
                required.append(field["name"])
        out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            out["required"] = required
        return out


def avro_to_json_schema(avro: Any) -> dict[str, Any]:
    """The draft-7 JSON Schema of the JSON form of `avro` (a parsed .avsc document). A named root type is
    inlined at the root (a `$ref` beside other keywords is ignored by draft 7) and also kept in `definitions`."""
    translator = _Translator()
    root = translator.type_of(avro, None)
    if "$ref" in root:
        root = dict(translator.definitions[root["$ref"].rsplit("/", 1)[1]])
    doc: dict[str, Any] = {"$schema": "http://json-schema.org/draft-07/schema#", **root}
    if translator.definitions:
        doc["definitions"] = translator.definitions
    return doc
