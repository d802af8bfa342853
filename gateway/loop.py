"""The worker's event loop: uvloop when it is installed and not switched off, asyncio's own loop otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory(enabled: bool) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's `new_event_loop`, or None (asyncio's default) when uvloop is absent or disabled
    (`HEADWATER_GATEWAY_UVLOOP=0`, read by gateway/config.py)."""
    if not enabled:
        return None
    try:
        import uvloop  # noqa: PLC0415 - optional: the gateway runs on asyncio's loop without it
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_name(enabled: bool) -> str:
    return "uvloop" if loop_factory(enabled) is not None else "asyncio"


def run(main: Coroutine[Any, Any, T], enabled: bool) -> T:
    """`asyncio.run(main)` on the chosen loop."""
    with asyncio.Runner(loop_factory=loop_factory(enabled)) as runner:
        return runner.run(main)
