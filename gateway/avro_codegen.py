"""Compiles an event schema into a Python function that writes the framed Avro record straight from the decoded
envelope and properties (msgspec Structs), without building a dict per event or walking the schema at run time.

The generated code writes exactly what `fastavro.schemaless_writer` writes for the same values (tests/gateway/
test_avro_codegen.py checks it over every schema in `schemas/` and odd values). It covers the types the
properties decoder (`gateway/avro_types.py`) produces Structs for; a schema using anything else (a union of
several non-null branches, a field the envelope does not provide) gets no compiled encoder, and the gateway
keeps the fastavro path for it. When the encoder raises on a value (a default of an unexpected shape, a string
that is not UTF-8-encodable), the caller falls back to fastavro for that event, which gives the rejection.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common.avro_frame import header

# Where each top-level field of an event record comes from: the event's envelope, the batch, the request.
_SOURCES = {
    "event_id": "ev.event_id", "event_type": "ev.event_type", "producer_id": "ev.producer_id", "seq": "ev.seq",
    "node_id": "ev.node_id", "created_at": "ev.created_at", "sent_at": "sent_at", "received_at": "received_at",
    "sdk_name": "sdk_name", "sdk_version": "sdk_version", "context": "ev.context", "properties": "props",
}
_PRIMITIVE = {"null", "boolean", "int", "long", "float", "double", "string", "bytes"}
_pack_double = struct.Struct("<d").pack
_pack_float = struct.Struct("<f").pack
_INF32 = (_pack_float(float("inf")), _pack_float(float("-inf")))


class Unsupported(ValueError):
    """The schema uses something the code generator does not compile (the fastavro path stays in use)."""


def zigzag(n: int) -> bytes:
    """Avro's long encoding: zig-zag, then 7-bit groups, least significant first."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def pack_float(value: float) -> bytes:
    """A 32-bit float as fastavro writes it: a C cast, so values beyond its range become infinities."""
    try:
        return _pack_float(value)
    except OverflowError:
        return _INF32[0] if value > 0 else _INF32[1]


class _Gen:
    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.named: dict[str, Any] = {}
        self.consts: dict[str, Any] = {"_zz": zigzag, "_pd": _pack_double, "_pf": pack_float}
        self.functions: list[str] = []
        self.record_fn: dict[str, str] = {}
        self.tmp = itertools.count()

    def resolve(self, schema: Any, ns: str) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVE:
            full = schema if "." in schema or not ns else f"{ns}.{schema}"
            for key in (full, schema):
                if key in self.named:
                    return self.named[key]
            raise Unsupported(f"unknown named type {schema!r}")
        if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
            return self.resolve(schema["type"], ns)
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVE:
            return schema["type"]
        return schema

    def value(self, schema: Any, v: str, ind: str, ns: str) -> list[str]:
        """Lines appending the encoding of the value expression `v` (a plain name) to bytearray `b`."""
        schema = self.resolve(schema, ns)
        if isinstance(schema, str):
            return self.primitive(schema, v, ind)
        if isinstance(schema, list):
            return self.union(schema, v, ind, ns)
        kind = schema["type"]
        if kind == "array":
            x = f"_x{next(self.tmp)}"
            return [f"{ind}if {v}:", f"{ind}    b += _zz(len({v}))", f"{ind}    for {x} in {v}:",
                    *self.value(schema["items"], x, ind + "        ", ns), f"{ind}b.append(0)"]
        if kind == "map":
            k, x = f"_k{next(self.tmp)}", f"_x{next(self.tmp)}"
            return [f"{ind}if {v}:", f"{ind}    b += _zz(len({v}))", f"{ind}    for {k}, {x} in {v}.items():",
                    *self.primitive("string", k, ind + "        "),
                    *self.value(schema["values"], x, ind + "        ", ns), f"{ind}b.append(0)"]
        if kind == "enum":
            name = self.register(schema, ns)[0]
            table = f"_enum{next(self.tmp)}"
            self.consts[table] = {s: zigzag(i) for i, s in enumerate(schema["symbols"])}
            self.named[name] = schema
            return [f"{ind}b += {table}[{v}]"]
        if kind == "fixed":
            self.named[self.register(schema, ns)[0]] = schema
            return [f"{ind}if len({v}) != {int(schema['size'])}:", f"{ind}    raise ValueError('fixed size')",
                    f"{ind}b += {v}"]
        if kind in ("record", "error"):
            return [f"{ind}{self.record(schema, ns)}(b, {v})"]
        raise Unsupported(f"unsupported Avro type {kind!r}")

    def primitive(self, kind: str, v: str, ind: str) -> list[str]:
        if kind == "null":
            return [f"{ind}if {v} is not None:", f"{ind}    raise TypeError('not null')"]
        if kind == "boolean":
            return [f"{ind}b.append(1 if {v} else 0)"]
        if kind in ("int", "long"):
            return [f"{ind}if 0 <= {v} < 64:", f"{ind}    b.append({v} << 1)", f"{ind}else:",
                    f"{ind}    b += _zz({v})"]
        if kind == "double":
            return [f"{ind}b += _pd({v})"]
        if kind == "float":
            return [f"{ind}b += _pf({v})"]
        s, n = f"_s{next(self.tmp)}", f"_n{next(self.tmp)}"
        encode = f"{v}.encode()" if kind == "string" else v
        return [f"{ind}{s} = {encode}", f"{ind}{n} = len({s})", f"{ind}if {n} < 64:", f"{ind}    b.append({n} << 1)",
                f"{ind}else:", f"{ind}    b += _zz({n})", f"{ind}b += {s}"]

    def union(self, branches: list[Any], v: str, ind: str, ns: str) -> list[str]:
        others = [i for i, s in enumerate(branches) if self.resolve(s, ns) != "null"]
        if len(branches) != 2 or len(others) != 1:
            raise Unsupported("only unions of null and one other type are compiled")
        other = others[0]
        return [f"{ind}if {v} is None:", f"{ind}    b.append({(1 - other) << 1})", f"{ind}else:",
                f"{ind}    b.append({other << 1})", *self.value(branches[other], v, ind + "    ", ns)]

    def register(self, schema: dict[str, Any], ns: str) -> tuple[str, str]:
        name = schema["name"]
        own_ns = schema.get("namespace", ns)
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        return (f"{own_ns}.{name}" if own_ns else name), own_ns

    def record(self, schema: dict[str, Any], ns: str) -> str:
        full, own_ns = self.register(schema, ns)
        if full in self.record_fn:
            return self.record_fn[full]
        fn = f"_rec{next(self.tmp)}"
        self.record_fn[full] = fn
        self.named[full] = schema
        self.named.setdefault(schema["name"], schema)
        lines = [f"def {fn}(b, v):"]
        for i, field in enumerate(schema.get("fields", [])):
            x = f"_f{next(self.tmp)}"
            lines.append(f"    {x} = v.f{i}")  # the Struct attribute names of gateway/avro_types.py
            lines += self.value(field["type"], x, "    ", own_ns)
        if len(lines) == 1:
            lines.append("    pass")
        self.functions.append("\n".join(lines))
        return fn


@dataclass(frozen=True)
class CompiledEncoder:
    """`parts` encodes the batch-level fields once per batch; `encode` writes one framed event record with them."""

    parts: Callable[[int, int | None, str, str], tuple[bytes, ...]]  # sent_at, received_at, sdk_name, sdk_version
    encode: Callable[[Any, tuple[bytes, ...], Any], bytes]  # event envelope, parts, properties -> framed bytes


def compile_encoder(schema: dict[str, Any], schema_id: int) -> CompiledEncoder:
    """The framed-record encoder of an event schema (raises Unsupported when it cannot be compiled)."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise Unsupported("an event schema is a record")
    gen = _Gen(schema.get("namespace", ""))
    gen.named[schema["name"]] = schema
    gen.consts["_frame"] = header(schema_id)  # once per schema: each record copies the bytes
    body = ["def encode(ev, parts, props):", "    b = bytearray(_frame)"]
    batch = ["def parts(sent_at, received_at, sdk_name, sdk_version):", "    out = []", "    b = None"]
    run = False  # inside a run of batch-level fields (encoded together, once per batch)
    nparts = 0
    for field in schema.get("fields", []):
        source = _SOURCES.get(field["name"])
        if source is None:
            raise Unsupported(f"field {field['name']!r} is not one the gateway fills")
        x = f"_t{next(gen.tmp)}"
        if source.startswith("ev.") or source == "props":
            run = False
            body += [f"    {x} = {source}", *gen.value(field["type"], x, "    ", gen.namespace)]
            continue
        if not run:
            body.append(f"    b += parts[{nparts}]")
            batch += ["    b = bytearray()", "    out.append(b)"]
            run, nparts = True, nparts + 1
        batch += [f"    {x} = {source}", *gen.value(field["type"], x, "    ", gen.namespace)]
    body.append("    return bytes(b)")
    batch.append("    return tuple(bytes(p) for p in out)")
    source_text = "\n\n".join([*gen.functions, "\n".join(body), "\n".join(batch)])
    namespace: dict[str, Any] = dict(gen.consts)
    exec(compile(source_text, f"<avro encoder for schema id {schema_id}>", "exec"), namespace)
    return CompiledEncoder(namespace["parts"], namespace["encode"])
