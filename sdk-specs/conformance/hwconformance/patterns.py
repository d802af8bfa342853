"""Matching recorded values against a vector's expected patterns (exact values, `$`-operators, captures)."""

from __future__ import annotations

import email.utils
import math
import re
import time
import uuid
from typing import Any

SPLIT_NAMESPACE = uuid.UUID("6f1f0c2e-9a10-4b59-8d55-2f6f1d1b9a10")  # protocol.md section 4, "413 split"
_DAY_MS = 86_400_000


class Mismatch(AssertionError):
    """A value does not match its pattern; the message gives the path and both sides."""


def split_id(parent: str, half: int) -> str:
    """The batch id of half `half` (0 or 1) of a split batch."""
    return str(uuid.uuid5(SPLIT_NAMESPACE, f"{parent}/{half}"))


def _uuid_version(value: Any) -> int | None:
    if not isinstance(value, str) or value != value.lower():
        return None
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return None
    return parsed.version if str(parsed) == value else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str), "integer": _is_int, "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list), "null": lambda v: v is None,
    "number": lambda v: _is_int(v) or isinstance(v, float),
}


class Matcher:
    """Matches values against patterns; `$capture` stores a value under a name that later `$same` compares."""

    def __init__(self, captures: dict[str, Any] | None = None) -> None:
        self.captures: dict[str, Any] = {} if captures is None else captures

    def check(self, pattern: Any, value: Any, path: str = "$") -> None:
        """Raise `Mismatch` unless `value` matches `pattern`."""
        if isinstance(pattern, dict) and any(k.startswith("$") for k in pattern):
            self._operator(pattern, value, path)
        elif isinstance(pattern, dict):
            if not isinstance(value, dict):
                raise Mismatch(f"{path}: expected an object, got {_show(value)}")
            for key, sub in pattern.items():
                if isinstance(sub, dict) and sub.get("$absent"):
                    if key in value:
                        raise Mismatch(f"{path}.{key}: must be absent, got {_show(value[key])}")
                    continue
                if key not in value:
                    if isinstance(sub, dict) and sub.get("$optional"):
                        continue
                    raise Mismatch(f"{path}.{key}: missing (expected {_show(sub)})")
                self.check(sub, value[key], f"{path}.{key}")
        elif isinstance(pattern, list):
            if not isinstance(value, list) or len(value) != len(pattern):
                raise Mismatch(f"{path}: expected a list of {len(pattern)}, got {_show(value)}")
            for i, (sub, item) in enumerate(zip(pattern, value, strict=True)):
                self.check(sub, item, f"{path}[{i}]")
        elif pattern != value or (type(pattern) is not type(value) and not _both_numbers(pattern, value)):
            raise Mismatch(f"{path}: expected {_show(pattern)}, got {_show(value)}")

    def matches(self, pattern: Any, value: Any) -> bool:
        """True if `value` matches `pattern`; captures made by a failed match are undone."""
        saved = dict(self.captures)
        try:
            self.check(pattern, value)
        except Mismatch:
            self.captures.clear()
            self.captures.update(saved)
            return False
        return True

    def _operator(self, pattern: dict[str, Any], value: Any, path: str) -> None:
        for op, arg in pattern.items():
            handler = getattr(self, "_op_" + op[1:], None)
            if handler is None:
                raise Mismatch(f"{path}: unknown operator {op}")
            handler(arg, value, path)

    def _op_any(self, _arg: Any, _value: Any, _path: str) -> None:
        return

    def _op_optional(self, _arg: Any, _value: Any, _path: str) -> None:
        return  # only changes what a missing key means (see `check`)

    def _op_absent(self, _arg: Any, value: Any, path: str) -> None:
        raise Mismatch(f"{path}: must be absent, got {_show(value)}")

    def _op_type(self, arg: str, value: Any, path: str) -> None:
        if not _TYPES[arg](value):
            raise Mismatch(f"{path}: expected a {arg}, got {_show(value)}")

    def _op_uuid(self, arg: int | str, value: Any, path: str) -> None:
        version = _uuid_version(value)
        if version is None or arg not in ("any", version):
            raise Mismatch(f"{path}: expected a lower-case UUID (version {arg}), got {_show(value)}")

    def _op_epoch_ms(self, _arg: Any, value: Any, path: str) -> None:
        now = int(time.time() * 1000)
        if not _is_int(value) or abs(value - now) > _DAY_MS:
            raise Mismatch(f"{path}: expected epoch milliseconds near now ({now}), got {_show(value)}")

    def _op_regex(self, arg: str, value: Any, path: str) -> None:
        if not isinstance(value, str) or re.fullmatch(arg, value) is None:
            raise Mismatch(f"{path}: expected a string matching {arg!r}, got {_show(value)}")

    def _op_min(self, arg: float, value: Any, path: str) -> None:
        if not _TYPES["number"](value) or value < arg:
            raise Mismatch(f"{path}: expected a number >= {arg}, got {_show(value)}")

    def _op_max(self, arg: float, value: Any, path: str) -> None:
        if not _TYPES["number"](value) or value > arg:
            raise Mismatch(f"{path}: expected a number <= {arg}, got {_show(value)}")

    def _op_len(self, arg: int, value: Any, path: str) -> None:
        if not isinstance(value, (list, str, dict)) or len(value) != arg:
            raise Mismatch(f"{path}: expected length {arg}, got {_show(value)}")

    def _op_each(self, arg: Any, value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise Mismatch(f"{path}: expected a list, got {_show(value)}")
        for i, item in enumerate(value):
            self.check(arg, item, f"{path}[{i}]")

    def _op_one_of(self, arg: list[Any], value: Any, path: str) -> None:
        if not any(Matcher(dict(self.captures)).matches(p, value) for p in arg):
            raise Mismatch(f"{path}: {_show(value)} matches none of {_show(arg)}")

    def _op_capture(self, arg: str, value: Any, path: str) -> None:
        if arg in self.captures and self.captures[arg] != value:
            raise Mismatch(f"{path}: {_show(value)} differs from ${arg} = {_show(self.captures[arg])}")
        self.captures[arg] = value

    def _op_same(self, arg: str, value: Any, path: str) -> None:
        if arg not in self.captures:
            raise Mismatch(f"{path}: ${arg} was not captured before")
        if self.captures[arg] != value:
            raise Mismatch(f"{path}: expected ${arg} = {_show(self.captures[arg])}, got {_show(value)}")

    def _op_not_same(self, arg: str, value: Any, path: str) -> None:
        if self.captures.get(arg, object()) == value:
            raise Mismatch(f"{path}: must differ from ${arg}, got the same {_show(value)}")

    def _op_split_of(self, arg: list[Any], value: Any, path: str) -> None:
        parent, half = arg
        if parent not in self.captures:
            raise Mismatch(f"{path}: ${parent} was not captured before")
        expected = split_id(str(self.captures[parent]), int(half))
        if value != expected:
            raise Mismatch(f"{path}: expected half {half} of ${parent} = {expected}, got {_show(value)}")


def _both_numbers(a: Any, b: Any) -> bool:
    return _TYPES["number"](a) and _TYPES["number"](b) and not isinstance(a, bool) and not isinstance(b, bool)


def _show(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def retry_after_seconds(header: str, now: float) -> float | None:
    """The reference reading of a Retry-After value (protocol.md §6): seconds to wait, None if unparsable."""
    value = header.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        return max(0.0, when.timestamp() - now)
    return max(0.0, seconds) if math.isfinite(seconds) else None
