"""Event routes (event type -> registry subject and Kafka topic, from gateway config) and compiled writer schemas."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import fastavro
import msgspec

from gateway import avro_fast
from gateway.avro_codegen import CompiledEncoder, Unsupported, compile_encoder
from gateway.avro_types import SchemaCompileError, compile_type

EVENTS_NAMESPACE = "headwater.events"
DEFAULT_TOPIC = "headwater.events"
EVENT_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")  # schemas/catalog.py's rule; subjects are `headwater.events.<type>`


@dataclass(frozen=True)
class Route:
    """Where events of one type go: their registry subject and their Kafka topic."""

    event_type: str
    subject: str
    topic: str


@dataclass(frozen=True)
class CompiledSchema:
    """One registered version of an event type's schema, ready for the hot path."""

    route: Route
    schema_id: int
    version: int | None
    parsed: Any                    # fastavro's parsed writer schema (for encoding)
    skip_reader: Any               # fastavro reader schema with no fields: reads = checks, keeps nothing
    properties_type: Any           # msgspec type of the `properties` field
    properties_decoder: msgspec.json.Decoder[Any]
    encoder: CompiledEncoder | None = None  # generated code (gateway/avro_codegen.py); None: fastavro's writer
    # Reads a framed event's body, returns where it ended (gateway/avro_fast.py: compiled, else fastavro).
    skip: Callable[[bytes], int] | None = None


def subject_for(event_type: str) -> str:
    """The registry subject of an event type (RecordNameStrategy: the record's full name)."""
    return f"{EVENTS_NAMESPACE}.{event_type}"


def event_type_of_subject(subject: str) -> str | None:
    """The event type a subject names (`headwater.events.<type>` with a valid type), else None."""
    prefix = EVENTS_NAMESPACE + "."
    if not subject.startswith(prefix):
        return None
    name = subject[len(prefix):]
    return name if EVENT_TYPE.fullmatch(name) else None


@dataclass(frozen=True)
class TopicMap:
    """The Kafka topic of each event type: a default and optional per-type overrides (gateway config)."""

    default: str = DEFAULT_TOPIC
    overrides: Mapping[str, str] = field(default_factory=dict)

    def route(self, event_type: str) -> Route:
        return Route(event_type, subject_for(event_type), self.overrides.get(event_type, self.default))


def record_name(schema: Any) -> str:
    """The full name of a record schema (`namespace.name`)."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return ""
    name = str(schema.get("name", ""))
    namespace = schema.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def compile_schema(route: Route, schema_id: int, version: int | None, schema_text: str, *,
                   codegen: bool = True) -> CompiledSchema:
    """Parse and compile a registry schema string; raises SchemaCompileError when it is not usable."""
    try:
        schema = json.loads(schema_text)
        parsed = fastavro.parse_schema(schema)
    except (ValueError, fastavro.schema.SchemaParseException) as exc:
        raise SchemaCompileError(f"schema id {schema_id}: {exc}") from None
    fields = {f["name"]: f for f in schema.get("fields", [])} if isinstance(schema, dict) else {}
    props = fields.get("properties")
    props_type = compile_type(props["type"], {}, schema.get("namespace", "")) if props else dict
    skip = fastavro.parse_schema({"type": "record", "name": record_name(schema), "fields": []})
    try:
        usable = codegen and props_type is not Any
        encoder: CompiledEncoder | None = compile_encoder(schema, schema_id) if usable else None
    except Unsupported:
        encoder = None
    try:
        program: bytes | None = avro_fast.compile_program(schema)
    except avro_fast.Unsupported:
        program = None
    return CompiledSchema(route, schema_id, version, parsed, skip, props_type,
                          msgspec.json.Decoder(props_type), encoder, avro_fast.skip_with(program, parsed, skip))


def event_type_of(schema_text: str) -> str | None:
    """The event type a registry schema describes (record `headwater.events.<type>`), or None."""
    try:
        schema = json.loads(schema_text)
    except ValueError:
        return None
    full = record_name(schema)
    prefix = EVENTS_NAMESPACE + "."
    return full[len(prefix):] if full.startswith(prefix) else None
