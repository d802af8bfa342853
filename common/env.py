"""Reads bounded numbers from environment variables, with one wording of the error for every component."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

N = TypeVar("N", int, float)


def env_int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int, *, error: type[Exception]) -> int:
    """`env[name]` as an integer in [lo, hi], `default` when unset or empty; else raise `error` naming the variable."""
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise error(f"{name}={raw!r} is not an integer") from None
    return _bounded(name, value, lo, hi, error)


def env_float(env: Mapping[str, str], name: str, default: float, lo: float, hi: float, *,
              error: type[Exception]) -> float:
    """`env[name]` as a number in [lo, hi], `default` when unset or empty; else raise `error` naming the variable."""
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise error(f"{name}={raw!r} is not a number") from None
    return _bounded(name, value, lo, hi, error)


def _bounded(name: str, value: N, lo: N, hi: N, error: type[Exception]) -> N:
    if not lo <= value <= hi:
        raise error(f"{name}={value} is outside [{lo}, {hi}]")
    return value
