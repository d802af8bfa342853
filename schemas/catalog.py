"""Loads `schemas/catalog.json`: per event type its registry subject, Kafka topic, compatibility and versions.

Version files are listed v1 first and are never edited once released; a new version is a new file appended
to `versions`. Paths in catalog.json are relative to the folder holding it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMAS_DIR = Path(__file__).resolve().parent
CATALOG_FILE = SCHEMAS_DIR / "catalog.json"
NAMESPACE = "headwater.events"
COMPATIBILITY_LEVELS = frozenset({
    "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE",
})
_EVENT_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")


class CatalogError(ValueError):
    """catalog.json or a schema file it names is malformed; the message names the file and entry."""


def subject_for(event_type: str) -> str:
    """Confluent RecordNameStrategy: the record's full name, `headwater.events.<event_type>`."""
    return f"{NAMESPACE}.{event_type}"


@dataclass(frozen=True)
class EventType:
    """One event type: its subject, topic, declared compatibility and version files (v1 first)."""

    name: str
    subject: str
    topic: str
    compatibility: str
    versions: list[Path]

    @property
    def latest_version(self) -> int:
        return len(self.versions)

    def schema_path(self, version: int) -> Path:
        if not 1 <= version <= len(self.versions):
            raise CatalogError(f"{self.name} has versions 1..{len(self.versions)}, not {version}")
        return self.versions[version - 1]

    def schema(self, version: int) -> dict[str, Any]:
        """The parsed JSON of version `version` (1-based)."""
        path = self.schema_path(version)
        try:
            parsed = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CatalogError(f"{path}: {exc}") from exc
        if not isinstance(parsed, dict):
            raise CatalogError(f"{path}: an event schema must be a JSON object (an Avro record)")
        return parsed

    def schema_text(self, version: int) -> str:
        """The file's text exactly as released (what is registered)."""
        return self.schema_path(version).read_text()


@dataclass(frozen=True)
class Catalog:
    """Every event type of catalog.json, by name."""

    event_types: dict[str, EventType]
    root: Path = SCHEMAS_DIR

    def by_subject(self, subject: str) -> EventType | None:
        return next((et for et in self.event_types.values() if et.subject == subject), None)


def load_catalog(path: Path | None = None) -> Catalog:
    """Read and check catalog.json (default: the one next to this module)."""
    path = CATALOG_FILE if path is None else path
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CatalogError(f"{path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise CatalogError(f"{path}: expected a JSON object of event types")
    root = path.parent
    return Catalog({name: _event_type(path, root, name, entry) for name, entry in raw.items()}, root)


def _event_type(path: Path, root: Path, name: str, entry: Any) -> EventType:
    where = f"{path}: {name!r}"
    if not _EVENT_TYPE.fullmatch(name):
        raise CatalogError(f"{where}: event type must match {_EVENT_TYPE.pattern}")
    if not isinstance(entry, dict):
        raise CatalogError(f"{where}: expected an object")
    for key in ("subject", "topic", "compatibility"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise CatalogError(f"{where}: {key!r} must be a non-empty string")
    if entry["subject"] != subject_for(name):
        raise CatalogError(f"{where}: subject must be {subject_for(name)!r} (RecordNameStrategy)")
    if entry["compatibility"] not in COMPATIBILITY_LEVELS:
        raise CatalogError(f"{where}: compatibility must be one of {sorted(COMPATIBILITY_LEVELS)}")
    versions = entry.get("versions")
    if not isinstance(versions, list) or not versions or not all(isinstance(v, str) for v in versions):
        raise CatalogError(f"{where}: 'versions' must be a non-empty list of paths")
    return EventType(name=name, subject=entry["subject"], topic=entry["topic"],
                     compatibility=entry["compatibility"], versions=[root / v for v in versions])
