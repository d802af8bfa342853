"""Checking and converting `track()` properties into plain JSON values, naming the field of anything refused.

Run on the caller's thread by `track()`, so a bad value fails there (with its path, for example
`properties.cart.items[2].price`), and the result is a deep copy: changing a nested value after `track()`
does not change what is sent. Conversions (the ones segment-analytics-python and posthog users expect):

| value | sent as |
| --- | --- |
| `str`, `bool`, `None`, `int` in [-2**63, 2**63 - 1], finite `float` | itself |
| `datetime` | ISO 8601 string; a naive datetime is taken as UTC (`2026-11-23T20:00:00+00:00`) |
| `date`, `time` | ISO 8601 string (`2026-11-23`, `20:00:00`) |
| `Decimal` (finite) | a JSON number: an integer if it is integral and fits 64 bits, else a float |
| `UUID` | its canonical string |
| `Enum` | its value, converted again |
| `list`, `tuple` | a list; `set`, `frozenset`: a list, sorted when the items can be sorted |
| `Mapping` with `str` keys | an object |

Refused with `InvalidEventError`: NaN and infinities, integers outside 64 bits (the gateway's Avro `long`),
`bytes` (no encoding is obviously right: send base64 or hex text yourself), non-string keys, other types,
and nesting deeper than `MAX_DEPTH`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import enum
import math
import uuid
from collections.abc import Mapping
from typing import Any

from ._exceptions import InvalidEventError

MAX_DEPTH = 32
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def clean_properties(properties: Mapping[str, Any] | None) -> dict[str, Any]:
    """A deep copy of `properties` holding only JSON values; raises `InvalidEventError` naming a bad field."""
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise InvalidEventError(f"properties must be a mapping, got {type(properties).__name__}", "invalid_properties",
                                "properties")
    return _mapping(properties, "properties", 1)


def sendable_properties(properties: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """`properties` itself when it already holds only plain JSON values (to be encoded at once, not kept),
    else `clean_properties(properties)`: the same JSON either way, without a copy in the common case."""
    if type(properties) is dict and _plain_mapping(properties, 1):
        return properties
    return clean_properties(properties)


def _plain_mapping(value: dict[Any, Any], depth: int) -> bool:
    """True if `value` (at `depth`, as in `_mapping`) has only `str` keys and plain values: nothing to convert
    or refuse. Exact types only; anything else (subclasses included) takes the converting path. Scalars are
    checked inline: this runs for every event."""
    if depth > MAX_DEPTH:
        return False
    for key, item in value.items():
        if type(key) is not str:
            return False
        kind = type(item)
        if not (kind is str or kind is bool or item is None or _plain_other(item, kind, depth)):
            return False
    return True


def _plain_sequence(value: list[Any] | tuple[Any, ...], depth: int) -> bool:
    """As `_plain_mapping`, for the items (at `depth`) of a list or tuple."""
    if depth > MAX_DEPTH:
        return False
    for item in value:
        kind = type(item)
        if not (kind is str or kind is bool or item is None or _plain_other(item, kind, depth)):
            return False
    return True


def _plain_other(value: Any, kind: type, depth: int) -> bool:
    if kind is int:
        return bool(INT64_MIN <= value <= INT64_MAX)
    if kind is float:
        return math.isfinite(value)
    if kind is dict:
        return _plain_mapping(value, depth + 1)
    if kind is list or kind is tuple:
        return _plain_sequence(value, depth + 1)
    return False


def _mapping(value: Mapping[Any, Any], path: str, depth: int) -> dict[str, Any]:
    if depth > MAX_DEPTH:
        raise InvalidEventError(f"{path}: nested deeper than {MAX_DEPTH} levels", "too_deep", path)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidEventError(f"{path}: key {key!r} is a {type(key).__name__}; keys must be strings",
                                    "invalid_property_key", path)
        out[key] = _value(item, f"{path}.{key}", depth)
    return out


def _value(value: Any, path: str, depth: int) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if not INT64_MIN <= value <= INT64_MAX:
            raise _bad(path, f"integer {value} does not fit in 64 bits (signed)")
        return value
    if kind is float:
        if not math.isfinite(value):
            raise _bad(path, f"{value} is not a finite number (NaN and infinities have no JSON form)")
        return value
    if isinstance(value, (list, tuple)):
        return _sequence(value, path, depth)
    if isinstance(value, Mapping):
        return _mapping(value, path, depth + 1)
    return _special(value, path, depth)


def _sequence(value: Any, path: str, depth: int) -> list[Any]:
    if depth + 1 > MAX_DEPTH:
        raise InvalidEventError(f"{path}: nested deeper than {MAX_DEPTH} levels", "too_deep", path)
    return [_value(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]


def _special(value: Any, path: str, depth: int) -> Any:
    """Values with a documented conversion (subclasses of the plain types included); the rest is refused."""
    if isinstance(value, enum.Enum):
        return _value(value.value, path, depth)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return _value(int(value), path, depth)
    if isinstance(value, float):
        return _value(float(value), path, depth)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)).isoformat()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return _decimal(value, path)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (set, frozenset)):
        items = list(value)
        with contextlib.suppress(TypeError):  # mixed types: keep the set's own order
            items.sort()
        return _sequence(items, path, depth)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise _bad(path, "bytes are not sent as is; encode them as text (base64 or hex) first")
    raise _bad(path, f"a {type(value).__name__} has no JSON form (see the README's table)")


def _decimal(value: decimal.Decimal, path: str) -> Any:
    if not value.is_finite():
        raise _bad(path, f"Decimal {value} is not a finite number")
    if value == value.to_integral_value() and INT64_MIN <= value <= INT64_MAX:
        return int(value)
    return _value(float(value), path, 0)


def _bad(path: str, problem: str) -> InvalidEventError:
    return InvalidEventError(f"{path}: {problem}", "invalid_property_value", path)
