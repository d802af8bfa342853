"""The Avro fast path's per-event reads in one compiled pass: each event's envelope, and the check that its body is
a value of its writer schema (`_avro_fast.c`); the pure-Python reader and fastavro's skip reader when the
extension is not built, or for a schema it cannot describe (a recursive one).

A schema is compiled once into a small program: one node per Avro type, in the schema's order, each node's size
known from its header so a union branch or a record field is found without parsing the ones before it.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

import fastavro

try:  # built by `make setup` and by `pip install ./gateway` where a C compiler is present
    from gateway import _avro_fast as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _native = None

NATIVE = _native is not None
_OPS = {"null": 0, "boolean": 1, "int": 2, "long": 3, "float": 4, "double": 5, "bytes": 6, "string": 7}
_FIXED, _ENUM, _ARRAY, _MAP, _UNION, _RECORD = 8, 9, 10, 11, 12, 13


class Unsupported(ValueError):
    """The schema cannot be compiled (a recursive type): fastavro reads it instead."""


def compile_program(schema: Any) -> bytes:
    """The program `_avro_fast.skip` runs for a writer schema (JSON form, as the registry serves it)."""
    out = bytearray()
    _node(schema, "", {}, set(), out)
    return bytes(out)


def _full(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _node(schema: Any, namespace: str, named: dict[str, Any], active: set[str], out: bytearray) -> None:
    if isinstance(schema, list):
        _composite(out, _UNION, [(s, namespace) for s in schema], named, active)
        return
    if isinstance(schema, str):
        if schema in _OPS:
            out.append(_OPS[schema])
            return
        full = schema if schema in named else _full(schema, namespace)
        if full not in named:
            raise Unsupported(f"unknown named type {schema!r}")
        if full in active:
            raise Unsupported(f"recursive type {full}")
        _node(named[full], full.rpartition(".")[0], named, active | {full}, out)
        return
    kind = schema["type"]
    if kind in _OPS or isinstance(kind, (list, dict)) or kind not in ("fixed", "enum", "array", "map", "record"):
        _node(kind, namespace, named, active, out)  # a primitive with attributes (logical types included)
        return
    if kind in ("fixed", "enum", "record"):
        full = _full(schema["name"], schema.get("namespace", namespace))
        named[full] = schema
        namespace = full.rpartition(".")[0]
        if kind == "record":
            _composite(out, _RECORD, [(f["type"], namespace) for f in schema["fields"]], named, active | {full})
            return
        out.append(_FIXED if kind == "fixed" else _ENUM)
        out += struct.pack("<I", schema["size"] if kind == "fixed" else len(schema["symbols"]))
        return
    item = schema["items"] if kind == "array" else schema["values"]
    _composite(out, _ARRAY if kind == "array" else _MAP, [(item, namespace)], named, active)


def _composite(out: bytearray, op: int, children: list[tuple[Any, str]], named: dict[str, Any],
               active: set[str]) -> None:
    """A node with children (union branches, record fields, an array's items, a map's values) and their sizes."""
    body = bytearray()
    for child, namespace in children:
        _node(child, namespace, named, active, body)
    out.append(op)
    out += struct.pack("<II", len(children), len(body))
    out += body


def skip_with(program: bytes | None, parsed: Any, skip_reader: Any) -> Callable[[bytes], int]:
    """A function reading a framed event's body with its schema and returning where it ended (ValueError and
    fastavro's errors when the bytes are not a value of it): the compiled program, else fastavro."""
    if _native is not None and program is not None:
        native_skip = _native.skip
        return lambda framed: int(native_skip(program, framed))

    def fallback(framed: bytes) -> int:
        buf = io.BytesIO(framed)
        buf.seek(5)
        fastavro.schemaless_reader(buf, parsed, skip_reader)
        return buf.tell()
    return fallback


def first_problem(envelopes: list[Any], max_text: int) -> tuple[int, int] | None:
    """(index, kind) of the first envelope `native_envelopes` read that breaks the envelope rules (kind 1: ids
    not UUIDs, 2: a negative seq or time, 3: a text too long), None when all are fine (extension built only)."""
    assert _native is not None
    found: tuple[int, int] | None = _native.first_problem(envelopes, max_text)
    return found


def native_envelopes(events: list[bytes], factory: Callable[..., Any]) -> list[Any] | None:
    """factory(event_id, event_type, producer_id, seq, node_id, created_at, sent_at) of each framed event (None:
    unreadable), in one pass; None when the extension is not built (the caller reads them in Python)."""
    if _native is None:
        return None
    result: list[Any] = _native.envelopes(events, factory)
    return result
