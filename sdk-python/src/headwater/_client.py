"""The public `Client`: argument checks, lifecycle (open/closing/closed, fork, exit) and the pipeline's facade."""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from . import _lifecycle
from ._config import ClientConfig
from ._event import Timestamp
from ._exceptions import ConfigError
from ._metrics import Metrics
from ._pipeline import Pipeline


class ClientState(enum.Enum):
    """Where a client is in its life."""

    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class Client:
    """Sends events to a Headwater gateway in batches, from any thread; see the README for every option.

    `Client(endpoint, write_key, spool_dir=None, **options)`: options are the fields of `ClientConfig`
    (`linger_s`, `queue_policy`, `on_error`, ...); `Client(None, write_key, endpoints=[primary, secondary])`
    fails over between several endpoints. Use it as a context manager, or call `close()`; at
    interpreter exit every open client is flushed for at most `exit_timeout_s`.
    """

    def __init__(self, endpoint: str | None, write_key: str, *, spool_dir: str | None = None, **options: Any) -> None:
        try:
            config = ClientConfig(endpoint=endpoint, write_key=write_key, spool_dir=spool_dir, **options)
        except TypeError as exc:
            raise ConfigError(f"unknown option: {exc}") from None
        self._start(config)

    @classmethod
    def from_config(cls, config: ClientConfig) -> Client:
        """A client for an already built `ClientConfig`."""
        client = cls.__new__(cls)
        client._start(config)
        return client

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Client:
        """A client configured from `HEADWATER_*` variables (see the README); keyword arguments win."""
        return cls.from_config(ClientConfig.from_env(environ, **overrides))

    def _start(self, config: ClientConfig) -> None:
        self._config = config
        self._lock = threading.Lock()
        self._state = ClientState.OPEN
        self._closed_ok: bool | None = None
        self._pipeline = Pipeline(config, use_spool=True)
        _lifecycle.register(self)

    @property
    def config(self) -> ClientConfig:
        """The client's configuration."""
        return self._config

    @property
    def state(self) -> ClientState:
        """OPEN, CLOSING or CLOSED."""
        return self._state

    @property
    def producer_id(self) -> str:
        """This producer's id: persisted in the spool directory, else new for each process."""
        return self._current().producer_id

    def track(self, event_type: str, properties: Mapping[str, Any] | None = None, *,
              partition_key: str | None = None, event_id: str | None = None,
              timestamp: Timestamp = None) -> int | None:
        """Check, encode and queue one event; returns its `seq`, or None if it was dropped (counted).

        Returns at once (unless `queue_policy` is `block`, or durability is `sync`: then after the event is
        in the spool). Raises `InvalidEventError` naming the bad argument or field (the properties are
        converted and deep-copied here); a full queue, a closed client or a failing gateway is counted in
        `metrics().dropped` and reported to `on_error`, never raised.
        """
        pipeline = self._current()
        head, tail = pipeline.encoder.encode(event_type, properties, partition_key, event_id, timestamp)
        if self._state is not ClientState.OPEN:
            pipeline.drop_unqueued("client_closed")
            return None
        return pipeline.put(head, tail)

    def flush(self, timeout: float | None = None) -> bool:
        """Send everything queued now and wait until it is acknowledged, rejected or dropped.

        Returns True only if it all settled within `timeout` and no accepted event was rejected or dropped since
        the previous `flush()` (or since the start): False tells that events were lost (`metrics()` and
        `on_error` say which) or are still pending.
        """
        pipeline = self._current()
        settled = pipeline.flush(timeout)
        return pipeline.counters.no_loss_since_last_check() and settled

    def close(self, timeout: float | None = None) -> bool:
        """Flush for at most `timeout` seconds (default `exit_timeout_s`), then stop; idempotent.

        Returns True only if every event this client accepted (and every event it found in its spool) was
        acknowledged by the gateway, and none was dropped, refused or rejected; False otherwise (see
        `metrics()` for what happened). With a spool, what was not delivered stays on disk and is sent by the
        next client on the same directory; without one it is counted as dropped (`closed_unsent`).
        """
        with self._lock:
            if self._state is not ClientState.OPEN:
                return bool(self._closed_ok)
            self._state = ClientState.CLOSING
        try:
            pipeline = self._current()
            self._closed_ok = pipeline.shutdown(self._config.exit_timeout_s if timeout is None else timeout)
        finally:
            self._state = ClientState.CLOSED
            _lifecycle.unregister(self)
        return self._closed_ok

    def metrics(self) -> Metrics:
        """A snapshot of the delivery counters."""
        return self._current().metrics()

    def _current(self) -> Pipeline:
        pipeline = self._pipeline
        if pipeline.pid != os.getpid():
            pipeline = self._after_fork()
        return pipeline

    def _after_fork(self) -> Pipeline:
        """In a forked child: a new lock and a new memory-only pipeline; the parent's queue is not resent."""
        self._lock = threading.Lock()
        if self._pipeline.pid != os.getpid():
            if self._state is ClientState.OPEN:
                self._pipeline = Pipeline(self._config, use_spool=False)
            else:
                self._pipeline.pid = os.getpid()
        return self._pipeline

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<headwater.Client {self._config.endpoint} {self._state.value}>"
