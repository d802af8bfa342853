"""Waiting on a condition in tests: poll until it holds, fail naming what was awaited and the last value seen."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T], timeout_s: float = 30.0, *, interval_s: float = 0.1,
             alive: Callable[[], None] | None = None) -> T:
    """Call `check` until it returns something truthy and return that; AssertionError after `timeout_s`.
    `alive` is called between tries and raises when what is being waited on has died (a process exited)."""
    deadline = time.monotonic() + timeout_s
    while True:
        last = check()
        if last:
            return last
        if alive is not None:
            alive()
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}; last: {last!r}")
        time.sleep(interval_s)


def eventually(check: Callable[[], T], timeout_s: float = 10.0, *, interval_s: float = 0.05) -> T | None:
    """Like `wait_for`, but None instead of a failure: for tests that assert on the outcome themselves."""
    deadline = time.monotonic() + timeout_s
    while True:
        last = check()
        if last or time.monotonic() >= deadline:
            return last or None
        time.sleep(interval_s)


async def wait_until(what: str, check: Callable[[], T], timeout_s: float = 10.0, *, interval_s: float = 0.01) -> T:
    """`wait_for` inside a running event loop: the loop keeps serving while the condition is polled."""
    deadline = time.monotonic() + timeout_s
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval_s)
