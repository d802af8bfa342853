"""Server-side filters on record fields: equality only, so each costs a bounded, small amount of CPU per record.

`filter` is a JSON object mapping a field path (dotted, at most MAX_DEPTH names, e.g. `properties.path`) to a
value or a list of values (any of them matches); every field must match (AND). Values are strings, numbers,
booleans or null and compare by type and value (`1` matches `1.0`, never `"1"` or `true`); a UUID compares as
the text the JSON shows; a missing field or one of another type (an object, a list, a timestamp) matches
nothing. No regular expressions, ranges or functions: a record costs at most MAX_FIELDS dictionary lookups and
MAX_FIELDS set lookups, whatever the filter.

Filters read a record's `fields_of` (its scalar leaves by dotted path), made once per record by the reader: a
flat dict of strings and scalars, which the garbage collector does not track, so that the records a topic's
ring keeps for filters never lengthen a collection (the decoded values themselves, about six tracked objects
a record, made a full collection over a 16 MiB ring take 100 ms and more).
"""

from __future__ import annotations

import json
import math
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from subscribe.errors import BadRequest

MAX_CHARS = 2048
MAX_FIELDS = 8
MAX_DEPTH = 4
MAX_VALUES = 16
MAX_VALUE_CHARS = 256
_MISSING = object()
Key = tuple[str, Any]
Fields = dict[str, Any]  # dotted path -> str, int, float, bool or None


def _key(value: Any) -> Key | None:
    """The comparison key of a scalar (type tag, value), or None for what never matches."""
    if value is None:
        return ("z", None)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return None if isinstance(value, float) and math.isnan(value) else ("n", value)
    if isinstance(value, str):
        return ("s", value)
    return None


def fields_of(value: Any) -> Fields:
    """The leaves of a decoded record that a filter can name: dotted paths of at most MAX_DEPTH names through
    mappings, to strings, numbers, booleans, null or UUIDs (as text). Names holding a dot are left out: no filter
    path can name them (filter paths are split on dots)."""
    out: Fields = {}
    if isinstance(value, Mapping):
        _flatten(value, "", 1, out)
    return out


def _flatten(m: Mapping[Any, Any], prefix: str, depth: int, out: Fields) -> None:
    for k, v in m.items():
        if not isinstance(k, str) or "." in k:
            continue
        if v is None or isinstance(v, str | int | float):  # bool is an int
            out[sys.intern(prefix + k) if prefix else k] = v  # one copy of each nested path in the ring
        elif isinstance(v, Mapping):
            if depth < MAX_DEPTH:
                _flatten(v, f"{prefix}{k}.", depth + 1, out)
        elif isinstance(v, uuid.UUID):
            out[sys.intern(prefix + k) if prefix else k] = str(v)


def field_key(fields: Fields, path: str) -> Key | None:
    """The comparison key of a record's field `path` (from its `fields_of`); None when it is missing or matches
    nothing."""
    v = fields.get(path, _MISSING)
    return None if v is _MISSING else _key(v)


@dataclass(frozen=True)
class Filter:
    """A parsed filter: (dotted path, allowed keys) clauses, all of which must match. `text`: canonical form."""

    clauses: tuple[tuple[str, frozenset[Key]], ...]
    text: str

    def matches(self, value: Any) -> bool:
        """Whether a decoded record (nested mappings) matches."""
        return self.matches_fields(fields_of(value))

    def matches_fields(self, fields: Fields) -> bool:
        """Whether a record matches, given its `fields_of`."""
        return all(field_key(fields, path) in allowed for path, allowed in self.clauses)  # allowed never holds None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _bad(message: str) -> BadRequest:
    return BadRequest(f"filter: {message}", code="invalid_filter")


def parse_filter(raw: str | None) -> Filter | None:
    """The filter of the `filter` parameter (None when absent); BadRequest(invalid_filter) when unusable."""
    if raw is None or raw.strip() == "":
        return None
    if len(raw) > MAX_CHARS:
        raise _bad(f"longer than {MAX_CHARS} characters")
    try:
        doc = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise _bad("not a JSON object") from None
    if not isinstance(doc, dict) or not doc:
        raise _bad("must be a non-empty JSON object of field: value or [values]")
    if len(doc) > MAX_FIELDS:
        raise _bad(f"more than {MAX_FIELDS} fields")
    clauses = []
    for field, want in sorted(doc.items()):
        path = tuple(field.split("."))
        if len(path) > MAX_DEPTH or not all(p and len(p) <= 128 for p in path):
            raise _bad(f"field {field[:80]!r} must be at most {MAX_DEPTH} dot-separated names")
        values = want if isinstance(want, list) else [want]
        if not values or len(values) > MAX_VALUES:
            raise _bad(f"field {field[:80]!r}: 1 to {MAX_VALUES} values")
        keys = set()
        for v in values:
            k = _key(v)
            if k is None or (isinstance(v, str) and len(v) > MAX_VALUE_CHARS):
                raise _bad(f"field {field[:80]!r}: values must be strings (at most {MAX_VALUE_CHARS} characters), "
                           "numbers, booleans or null")
            keys.add(k)
        clauses.append((".".join(path), frozenset(keys)))
    return Filter(tuple(clauses), json.dumps(doc, sort_keys=True, separators=(",", ":")))
