"""The asyncio face of the client: `track()` never blocks the loop; `flush()` and `close()` are awaitable."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from ._client import Client, ClientState
from ._config import ClientConfig
from ._event import Timestamp
from ._exceptions import ConfigError
from ._metrics import Metrics


class AsyncClient:
    """Wraps a `Client` for asyncio code: the same options, with `await flush()` / `await close()`.

    `track()` stays synchronous (it only appends to a queue); the `block` queue policy and durability `sync`
    (a disk write, possibly an fsync, per event) are refused because they would stall the event loop.
    Waiting for delivery runs in the loop's default executor.
    """

    def __init__(self, endpoint: str | None, write_key: str, *, spool_dir: str | None = None, **options: Any) -> None:
        _check_loop_safe(options.get("queue_policy"), options.get("durability"))
        self._client = Client(endpoint, write_key, spool_dir=spool_dir, **options)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> AsyncClient:
        """An async client configured from `HEADWATER_*` variables; keyword arguments win."""
        config = ClientConfig.from_env(environ, **overrides)
        _check_loop_safe(config.queue_policy, config.durability)
        self = cls.__new__(cls)
        self._client = Client.from_config(config)
        return self

    @property
    def client(self) -> Client:
        """The underlying thread-based client."""
        return self._client

    @property
    def state(self) -> ClientState:
        """OPEN, CLOSING or CLOSED."""
        return self._client.state

    def track(self, event_type: str, properties: Mapping[str, Any] | None = None, *,
              partition_key: str | None = None, event_id: str | None = None,
              timestamp: Timestamp = None) -> None:
        """Queue one event without blocking the loop (see `Client.track`)."""
        self._client.track(event_type, properties, partition_key=partition_key, event_id=event_id,
                           timestamp=timestamp)

    async def flush(self, timeout: float | None = None) -> bool:
        """Await delivery of everything queued now; False if `timeout` passed first."""
        return await asyncio.get_running_loop().run_in_executor(None, self._client.flush, timeout)

    async def close(self, timeout: float | None = None) -> bool:
        """Await a bounded flush and stop (see `Client.close`); idempotent."""
        return await asyncio.get_running_loop().run_in_executor(None, self._client.close, timeout)

    def metrics(self) -> Metrics:
        """A snapshot of the delivery counters."""
        return self._client.metrics()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


def _check_loop_safe(queue_policy: object, durability: object) -> None:
    if queue_policy == "block":
        raise ConfigError("queue_policy 'block' (HEADWATER_QUEUE_POLICY) would block the event loop; use another")
    if durability == "sync":
        raise ConfigError("durability 'sync' (HEADWATER_DURABILITY) writes to disk in track() and would block the "
                          "event loop; use the default 'async' (or a thread-based Client)")
