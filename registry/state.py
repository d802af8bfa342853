"""The registry's in-memory state, rebuilt deterministically by applying `_schemas` records in log order.

Record format (JSON, keys serialised with sorted keys so one logical key is one compaction key):

- SCHEMA key `{"keytype": "SCHEMA", "magic": 1, "subject": s, "version": v}`, value
  `{"subject", "version", "id", "schema", "deleted"}`: a version (soft-deleted when `deleted`); a null value
  (tombstone) means the version was deleted permanently.
- CONFIG key `{"keytype": "CONFIG", "magic": 0, "subject": s or null}`, value `{"compatibilityLevel": L}`:
  the subject's (null: the global) level; a tombstone removes it.
- MAX_ID key `{"keytype": "MAX_ID", "magic": 0}`, value `{"id": n}`: the highest id ever given, written
  before hard deletes so that ids of permanently deleted schemas are never reused after compaction.

Other key types (Confluent's NOOP, DELETE_SUBJECT, ...) are ignored.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from registry.canonical import ParsedSchema, canonical_form, parse_schema

log = logging.getLogger(__name__)


@dataclass
class Version:
    """One version of a subject."""

    subject: str
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class StoredSchema:
    """A schema known by global id: its text as first registered and its canonical form."""

    schema_id: int
    text: str
    canonical: str
    _parsed: ParsedSchema | None = None

    def parsed(self) -> ParsedSchema:
        if self._parsed is None:
            self._parsed = parse_schema(self.text)
        return self._parsed


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "magic": 1, "subject": subject, "version": version})


def schema_value(v: Version, text: str) -> bytes:
    return _dumps({"subject": v.subject, "version": v.version, "id": v.schema_id, "schema": text,
                   "deleted": v.deleted})


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "CONFIG", "magic": 0, "subject": subject})


def config_value(level: str) -> bytes:
    return _dumps({"compatibilityLevel": level})


def max_id_record(schema_id: int) -> tuple[bytes, bytes]:
    return _dumps({"keytype": "MAX_ID", "magic": 0}), _dumps({"id": schema_id})


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class State:
    """Subjects, versions, schemas by id and configs; mutated only by `apply`."""

    default_level: str = "BACKWARD"
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    by_canonical: dict[str, int] = field(default_factory=dict)
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    applied: int = 0

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one log record; malformed records are logged and skipped (never fatal at replay)."""
        self.applied += 1
        try:
            k = json.loads(key) if key else None
            v = json.loads(value) if value is not None else None
            if not isinstance(k, dict):
                raise ValueError("key is not a JSON object")
            kind = k.get("keytype")
            if kind == "SCHEMA":
                self._apply_schema(str(k["subject"]), int(k["version"]), v)
            elif kind == "CONFIG":
                self._apply_config(k.get("subject"), v)
            elif kind == "MAX_ID" and isinstance(v, dict):
                self.max_id = max(self.max_id, int(v["id"]))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping malformed _schemas record", extra={"key": repr(key), "error": str(exc)})

    def _apply_schema(self, subject: str, version: int, value: Any) -> None:
        if value is None:
            versions = self.subjects.get(subject, {})
            gone = versions.pop(version, None)
            if not versions:
                self.subjects.pop(subject, None)
            if gone is not None and not self.referenced(gone.schema_id):
                stored = self.schemas.pop(gone.schema_id, None)
                if stored is not None:
                    self.by_canonical.pop(stored.canonical, None)
            return
        schema_id = int(value["id"])
        deleted = bool(value.get("deleted", False))
        self._store(schema_id, str(value["schema"]))
        self.max_id = max(self.max_id, schema_id)
        self.subjects.setdefault(subject, {})[version] = Version(subject, version, schema_id, deleted)

    def _store(self, schema_id: int, text: str) -> None:
        """Keep the schema of `schema_id`. A registry's own topic (read read_committed) never gives one id two
        schemas; a copy that kept the records of aborted transactions does (a mirror reading read_uncommitted: a
        fenced writer's decision, then the winner's). The later record is the one that was committed: it wins,
        and the error is logged, since ghost versions of the aborted decision may remain."""
        stored = self.schemas.get(schema_id)
        if stored is not None and stored.text == text:
            return
        canonical = canonical_form(json.loads(text))
        if stored is not None:
            if stored.canonical == canonical:
                return
            log.error("one schema id with two different schemas in the log; keeping the later. A registry's own "
                      "topic never holds this: is it a mirror that copied aborted transactions? (MirrorMaker 2 "
                      "must read the source with isolation.level=read_committed)", extra={"id": schema_id})
            if self.by_canonical.get(stored.canonical) == schema_id:
                del self.by_canonical[stored.canonical]
        self.schemas[schema_id] = StoredSchema(schema_id, text, canonical)
        self.by_canonical.setdefault(canonical, schema_id)

    def _apply_config(self, subject: Any, value: Any) -> None:
        key = None if subject is None else str(subject)
        if value is None:
            self.configs.pop(key, None)
        else:
            self.configs[key] = str(value["compatibilityLevel"])

    def referenced(self, schema_id: int) -> bool:
        return any(v.schema_id == schema_id for vs in self.subjects.values() for v in vs.values())

    def level(self, subject: str | None) -> str:
        """The effective level: the subject's own, else the global one, else the configured default."""
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, self.default_level)

    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        """The subject's versions in order; soft-deleted ones only when `deleted`."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))
