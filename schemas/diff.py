"""Compares two Avro record schemas field by field: added, removed, type or default changed (dotted paths)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

_MISSING = object()


@dataclass(frozen=True)
class Change:
    kind: str  # added | removed | type changed | default changed
    path: str
    old: str = ""
    new: str = ""

    def __str__(self) -> str:
        if self.kind == "added":
            return f"+ {self.path}: {self.new}"
        if self.kind == "removed":
            return f"- {self.path}: {self.old}"
        return f"~ {self.path}: {self.kind}: {self.old} -> {self.new}"


def describe(avro_type: Any) -> str:
    """A short human form of a type: `string`, `["null", "string"]`, `array<purchase_line_item>`, ..."""
    if isinstance(avro_type, str):
        return avro_type
    if isinstance(avro_type, list):
        return "[" + ", ".join(describe(t) for t in avro_type) + "]"
    if isinstance(avro_type, dict):
        kind = avro_type.get("type")
        if kind == "array":
            return f"array<{describe(avro_type['items'])}>"
        if kind == "map":
            return f"map<{describe(avro_type['values'])}>"
        if kind in ("record", "enum", "fixed"):
            return f"{kind} {avro_type.get('name')}"
        logical = avro_type.get("logicalType")
        return f"{describe(kind)} ({logical})" if logical else describe(kind)
    return repr(avro_type)


def _record(avro_type: Any) -> dict[str, Any] | None:
    if isinstance(avro_type, dict) and avro_type.get("type") == "record":
        return avro_type
    return None


def diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[Change]:
    """The changes from record `old` to record `new`, recursing into nested records."""
    old_fields = {f["name"]: f for f in old.get("fields", [])}
    new_fields = {f["name"]: f for f in new.get("fields", [])}
    changes: list[Change] = []
    for name, field in old_fields.items():
        if name not in new_fields:
            changes.append(Change("removed", prefix + name, old=describe(field["type"])))
    for name, field in new_fields.items():
        path = prefix + name
        before = old_fields.get(name)
        if before is None:
            default = f" = {json.dumps(field['default'])}" if "default" in field else " (no default)"
            changes.append(Change("added", path, new=describe(field["type"]) + default))
            continue
        old_rec, new_rec = _record(before["type"]), _record(field["type"])
        if old_rec is not None and new_rec is not None:
            changes.extend(diff(old_rec, new_rec, path + "."))
        elif describe(before["type"]) != describe(field["type"]):
            changes.append(Change("type changed", path, describe(before["type"]), describe(field["type"])))
        if before.get("default", _MISSING) != field.get("default", _MISSING):
            changes.append(Change("default changed", path, json.dumps(before.get("default", "(none)")),
                                  json.dumps(field.get("default", "(none)"))))
    return changes
