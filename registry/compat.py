"""Decides schema compatibility for the seven Confluent levels with Apache avro's reader/writer checker.

BACKWARD: the new schema (reader) reads data written with the old one; FORWARD: the old schema reads data
written with the new one; FULL: both. Plain levels check against the latest live version, *_TRANSITIVE
against every live version. Messages name the field (as a dotted path) and the rule that failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from avro.compatibility import (
    ReaderWriterCompatibilityChecker,
    SchemaCompatibilityType,
    SchemaIncompatibilityType,
    lookup_writer_field,
)
from avro.schema import ArraySchema, MapSchema, RecordSchema, Schema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


@dataclass(frozen=True)
class Problem:
    """One field that breaks a rule: the direction, the version it was checked against, the avro rule(s)."""

    direction: str  # BACKWARD (the new schema reads old data) or FORWARD (the old schema reads new data)
    version: int | None
    field: str  # dotted path from the top record, `[]` for array items, `{}` for map values
    rules: tuple[str, ...]
    details: tuple[str, ...]

    def __str__(self) -> str:
        against = f"version {self.version}" if self.version is not None else "the existing schema"
        who = (f"the new schema cannot read data written with {against}" if self.direction == "BACKWARD"
               else f"{against} cannot read data written with the new schema")
        return (f"{self.direction}: {who}: field {self.field}: rule {', '.join(self.rules)} "
                f"({'; '.join(self.details)})")


def normalize_level(level: object) -> str | None:
    """The level in upper case if valid, else None."""
    if not isinstance(level, str):
        return None
    upper = level.upper()
    return upper if upper in LEVELS else None


def _incompatible(reader: Schema, writer: Schema) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """Apache avro's verdict on one reader/writer pair: None if compatible, else (rules, messages)."""
    result = ReaderWriterCompatibilityChecker().get_compatibility(  # type: ignore[no-untyped-call]
        reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return None
    missing = SchemaIncompatibilityType.reader_field_missing_default_value in result.incompatibilities
    return (tuple(sorted({i.value for i in result.incompatibilities})),
            tuple(sorted(_detail(m, missing) for m in result.messages)))


def _detail(message: str, missing_default: bool) -> str:
    # avro's message for a missing default is the bare field name.
    if missing_default and " " not in message:
        return f"reader field '{message}' is not in the writer's schema and has no default"
    return message


def check_pair(reader: Schema, writer: Schema, direction: str, version: int | None = None) -> list[Problem]:
    """The problems of `reader` reading data written with `writer`; empty when avro finds them compatible.

    avro decides on the whole pair; the explanation then walks records field by field (and array items, map
    values) with the same checker, so that each problem names its field and the rule it breaks.
    """
    verdict = _incompatible(reader, writer)
    if verdict is None:
        return []
    found = [Problem(direction, version, field, rules, details)
             for field, rules, details in _explain(reader, writer, "")]
    return found or [Problem(direction, version, "(top level)", *verdict)]


Explained = tuple[str, tuple[str, ...], tuple[str, ...]]  # field path, rules, details


def _explain(reader: Schema, writer: Schema, path: str) -> list[Explained]:
    if isinstance(reader, RecordSchema) and isinstance(writer, RecordSchema) and _same_name(reader, writer):
        out: list[Explained] = []
        for reader_field in reader.fields:
            writer_field = lookup_writer_field(writer_schema=writer, reader_field=reader_field)
            name = f"{path}{reader_field.name}"
            if writer_field is None:
                if not reader_field.has_default:
                    out.append((name, ("reader_field_missing_default_value",),
                                (f"reader field '{reader_field.name}' is not in the writer's schema and has "
                                 "no default",)))
                continue
            out.extend(_explain(reader_field.type, writer_field.type, name + "."))
        return out
    if isinstance(reader, ArraySchema) and isinstance(writer, ArraySchema):
        return _explain(reader.items, writer.items, path.rstrip(".") + "[].")
    if isinstance(reader, MapSchema) and isinstance(writer, MapSchema):
        return _explain(reader.values, writer.values, path.rstrip(".") + "{}.")
    verdict = _incompatible(reader, writer)
    return [] if verdict is None else [(path.rstrip(".") or "(top level)", *verdict)]


def _same_name(reader: RecordSchema, writer: RecordSchema) -> bool:
    aliases = reader.props.get("aliases")
    return bool(reader.fullname == writer.fullname or (isinstance(aliases, list) and writer.fullname in aliases))


def check(level: str, new: Schema, existing: Sequence[tuple[int, Schema]]) -> list[Problem]:
    """Problems of registering `new` after the live `existing` (version, schema) pairs, oldest first."""
    if level == "NONE" or not existing:
        return []
    against = existing if level.endswith("_TRANSITIVE") else existing[-1:]
    problems: list[Problem] = []
    for version, old in against:
        if level.startswith(("BACKWARD", "FULL")):
            problems.extend(check_pair(new, old, "BACKWARD", version))
        if level.startswith(("FORWARD", "FULL")):
            problems.extend(check_pair(old, new, "FORWARD", version))
    return problems
