"""Compiles an Avro schema into a msgspec type, so JSON properties are validated by msgspec's C decoder.

Mapping (plain JSON, not Avro's JSON encoding): null -> None, boolean -> bool, int/long -> int bounded to
32/64 bits, float/double -> float (ints accepted), string -> str, bytes/fixed -> base64 string, enum -> one
of its symbols, array/map -> list/dict, record -> a Struct with the Avro defaults and unknown fields
forbidden, union -> the union of its branches (unions of several records fall back to `Any` and are checked
by the Avro encoder instead).
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal, Union

import msgspec

_INT32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
_INT64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_PRIMITIVES: dict[str, Any] = {
    "null": None, "boolean": bool, "int": _INT32, "long": _INT64, "float": float, "double": float,
    "string": str, "bytes": bytes,
}
_counter = itertools.count()


class SchemaCompileError(ValueError):
    """The Avro schema uses something this compiler cannot express."""


def compile_type(schema: Any, named: dict[str, Any] | None = None, namespace: str = "") -> Any:
    """The msgspec type accepting exactly the plain-JSON values of `schema`."""
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        for key in (full, schema):
            if key in named:
                return named[key]
        raise SchemaCompileError(f"unknown named type {schema!r}")
    if isinstance(schema, list):
        branches = [compile_type(s, named, namespace) for s in schema]
        structs = [b for b in branches if isinstance(b, type) and issubclass(b, msgspec.Struct)]
        if len(structs) > 1 or len(branches) == 1:
            return Any if len(structs) > 1 else branches[0]
        return Union[tuple(branches)]  # noqa: UP007 - built at run time
    if not isinstance(schema, dict):
        raise SchemaCompileError(f"not an Avro schema: {schema!r}")
    kind = schema.get("type")
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "array":
        return list[compile_type(schema["items"], named, namespace)]  # type: ignore[misc]
    if kind == "map":
        return dict[str, compile_type(schema["values"], named, namespace)]  # type: ignore[misc]
    if kind == "enum":
        return _register(named, schema, namespace, Literal[tuple(schema["symbols"])])
    if kind == "fixed":
        return _register(named, schema, namespace,
                         Annotated[bytes, msgspec.Meta(min_length=schema["size"], max_length=schema["size"])])
    if kind in ("record", "error"):
        return _record(schema, named, namespace)
    if isinstance(kind, (dict, list)):
        return compile_type(kind, named, namespace)
    raise SchemaCompileError(f"unsupported Avro type {kind!r}")


def _fullname(schema: dict[str, Any], namespace: str) -> tuple[str, str]:
    name = schema["name"]
    ns = schema.get("namespace", namespace)
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    return (f"{ns}.{name}" if ns else name), ns


def _register(named: dict[str, Any], schema: dict[str, Any], namespace: str, typ: Any) -> Any:
    full, _ = _fullname(schema, namespace)
    named[full] = typ
    named.setdefault(schema["name"], typ)
    return typ


def _record(schema: dict[str, Any], named: dict[str, Any], namespace: str) -> Any:
    full, ns = _fullname(schema, namespace)
    fields: list[tuple[str, Any, Any] | tuple[str, Any]] = []
    rename: dict[str, str] = {}
    for i, field in enumerate(schema.get("fields", [])):
        attr = f"f{i}"  # Avro names may be Python keywords; the wire name comes from `rename`
        rename[attr] = field["name"]
        typ = compile_type(field["type"], named, ns)
        if "default" in field:
            fields.append((attr, typ, _default(field["default"])))
        else:
            fields.append((attr, typ))
    # Fields with defaults must follow required ones in a Struct; kw_only lifts that rule.
    struct = msgspec.defstruct(f"{full.replace('.', '_')}_{next(_counter)}", fields, rename=rename,
                               forbid_unknown_fields=True, kw_only=True)
    named[full] = struct
    named.setdefault(schema["name"], struct)
    return struct


def _default(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        frozen = value
        return msgspec.field(default_factory=lambda: msgspec.json.decode(msgspec.json.encode(frozen)))
    return value
