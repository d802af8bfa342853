"""Server-side filters on record fields: equality only, so each costs a bounded, small amount of CPU per record.

`filter` is a JSON object mapping a field path (dotted, at most MAX_DEPTH names, e.g. `properties.path`) to a
value or a list of values (any of them matches); every field must match (AND). Values are strings, numbers,
booleans or null and compare by type and value (`1` matches `1.0`, never `"1"` or `true`); a missing field or
one of another type (an object, a timestamp) matches nothing. No regular expressions, ranges or functions: a
record costs at most MAX_FIELDS x MAX_DEPTH dictionary lookups and MAX_FIELDS set lookups, whatever the filter.
"""

from __future__ import annotations

import json
import math
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


@dataclass(frozen=True)
class Filter:
    """A parsed filter: (path, allowed keys) clauses, all of which must match. `text` is its canonical form."""

    clauses: tuple[tuple[tuple[str, ...], frozenset[Key]], ...]
    text: str

    def matches(self, value: Any) -> bool:
        for path, allowed in self.clauses:
            v = value
            for name in path:
                if not isinstance(v, Mapping):
                    return False
                v = v.get(name, _MISSING)
            if v is _MISSING or _key(v) not in allowed:
                return False
        return True


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
        clauses.append((path, frozenset(keys)))
    return Filter(tuple(clauses), json.dumps(doc, sort_keys=True, separators=(",", ":")))
