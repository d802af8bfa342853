"""The registry's operations as pure functions of the state: each returns its answer and the log records to write."""

from __future__ import annotations

from dataclasses import dataclass

from registry import compat
from registry.canonical import ParsedSchema, parse_schema
from registry.errors import (
    IncompatibleSchema,
    InvalidCompatibilityLevel,
    InvalidSchema,
    InvalidVersion,
    SchemaNotFound,
    SubjectConfigNotFound,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)
from registry.state import State, Version, config_key, config_value, max_id_record, schema_key, schema_value

Record = tuple[bytes, bytes | None]
MAX_VERSION = 2**31 - 1


@dataclass(frozen=True)
class Registered:
    """A subject version: what lookup and GET .../versions/{v} answer."""

    subject: str
    version: int
    schema_id: int
    schema: str

    def body(self) -> dict[str, object]:
        return {"subject": self.subject, "version": self.version, "id": self.schema_id, "schema": self.schema}


def parse_request_schema(schema: object, schema_type: object = None, references: object = None) -> ParsedSchema:
    """The `schema` of a request body, checked: AVRO only, no references."""
    if schema_type not in (None, "AVRO"):
        raise InvalidSchema(f"Invalid schema: schemaType {schema_type!r} is not supported (only AVRO)")
    if references:
        raise InvalidSchema("Invalid schema: schema references are not supported")
    if not isinstance(schema, str):
        raise InvalidSchema("Invalid schema: 'schema' must be a string holding the schema's JSON")
    return parse_schema(schema)


def parse_version(raw: str) -> int | None:
    """A version path segment: an int in [1, 2^31-1], or None for `latest` / `-1`."""
    if raw in ("latest", "-1"):
        return None
    try:
        number = int(raw)
    except ValueError:
        raise InvalidVersion(raw) from None
    if not 1 <= number <= MAX_VERSION:
        raise InvalidVersion(raw)
    return number


def registered(state: State, v: Version) -> Registered:
    return Registered(v.subject, v.version, v.schema_id, state.schemas[v.schema_id].text)


def get_version(state: State, subject: str, raw_version: str, deleted: bool = False) -> Version:
    number = parse_version(raw_version)
    if subject not in state.subjects:
        raise SubjectNotFound(subject)
    versions = state.versions(subject, deleted)
    if number is None:
        if not versions:
            raise VersionNotFound(subject, raw_version)
        return versions[-1]
    found = next((v for v in versions if v.version == number), None)
    if found is None:
        raise VersionNotFound(subject, number)
    return found


def register(state: State, subject: str, parsed: ParsedSchema, normalize: bool = False) -> tuple[int, list[Record]]:
    """The id `parsed` has (or gets) under `subject`; records are empty when it is already registered."""
    live = state.versions(subject)
    for v in live:
        if state.schemas[v.schema_id].canonical == parsed.canonical:
            return v.schema_id, []
    problems = compat.check(state.level(subject), parsed.avro,
                            [(v.version, state.schemas[v.schema_id].parsed().avro) for v in live])
    if problems:
        raise IncompatibleSchema(
            f"Schema being registered is incompatible with an earlier schema for subject \"{subject}\", "
            f"details: [{'; '.join(str(p) for p in problems)}]")
    schema_id = state.by_canonical.get(parsed.canonical) or state.max_id + 1
    existing = state.schemas.get(schema_id)
    text = existing.text if existing else (parsed.canonical if normalize else parsed.text)
    number = max(state.subjects.get(subject, {}), default=0) + 1
    version = Version(subject, number, schema_id)
    return schema_id, [(schema_key(subject, number), schema_value(version, text))]


def lookup(state: State, subject: str, parsed: ParsedSchema, deleted: bool = False) -> Registered:
    versions = state.versions(subject, deleted)
    if not versions:
        raise SubjectNotFound(subject)
    for v in reversed(versions):
        if state.schemas[v.schema_id].canonical == parsed.canonical:
            return registered(state, v)
    raise SchemaNotFound()


def check_compatibility(state: State, subject: str, parsed: ParsedSchema,
                        raw_version: str | None) -> list[compat.Problem]:
    """Problems of `parsed` against one version (`raw_version`) or, when None, as registration would check."""
    level = state.level(subject)
    if raw_version is None:
        live = state.versions(subject)
        return compat.check(level, parsed.avro, [(v.version, state.schemas[v.schema_id].parsed().avro) for v in live])
    v = get_version(state, subject, raw_version)
    return compat.check(level.removesuffix("_TRANSITIVE"), parsed.avro,
                        [(v.version, state.schemas[v.schema_id].parsed().avro)])


def delete_version(state: State, subject: str, raw_version: str, permanent: bool) -> tuple[int, list[Record]]:
    # A soft-deleted version is found by number (to answer 40406), and by `latest` only when permanent.
    v = get_version(state, subject, raw_version, deleted=permanent or parse_version(raw_version) is not None)
    key = schema_key(subject, v.version)
    if permanent:
        if not v.deleted:
            raise VersionNotSoftDeleted(subject, v.version)
        return v.version, [max_id_record(state.max_id), (key, None)]
    if v.deleted:
        raise VersionSoftDeleted(subject, v.version)
    gone = Version(subject, v.version, v.schema_id, deleted=True)
    return v.version, [(key, schema_value(gone, state.schemas[v.schema_id].text))]


def delete_subject(state: State, subject: str, permanent: bool) -> tuple[list[int], list[Record]]:
    every = state.versions(subject, deleted=True)
    if not every:
        raise SubjectNotFound(subject)
    live = [v for v in every if not v.deleted]
    if permanent:
        if live:
            raise SubjectNotSoftDeleted(subject)
        return ([v.version for v in every],
                [max_id_record(state.max_id)] + [(schema_key(subject, v.version), None) for v in every])
    if not live:
        raise SubjectSoftDeleted(subject)
    records: list[Record] = [
        (schema_key(subject, v.version),
         schema_value(Version(subject, v.version, v.schema_id, True), state.schemas[v.schema_id].text))
        for v in live]
    return [v.version for v in live], records


def set_level(state: State, subject: str | None, body: object) -> tuple[str, list[Record]]:
    raw = body.get("compatibility") if isinstance(body, dict) else None
    level = compat.normalize_level(raw)
    if level is None:
        raise InvalidCompatibilityLevel(raw)
    if state.configs.get(subject) == level:
        return level, []
    return level, [(config_key(subject), config_value(level))]


def get_level(state: State, subject: str | None, default_to_global: bool) -> str:
    if subject is None or subject in state.configs:
        return state.level(subject)
    if default_to_global:
        return state.level(None)
    raise SubjectConfigNotFound(subject)


def delete_level(state: State, subject: str | None) -> tuple[str, list[Record]]:
    if subject is not None and subject not in state.configs:
        raise SubjectConfigNotFound(subject)
    return state.level(subject), [(config_key(subject), None)]
