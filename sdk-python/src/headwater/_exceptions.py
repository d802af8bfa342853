"""The SDK's exception tree; every error the SDK raises or reports is one of these.

```
HeadwaterError
├── ConfigError (also ValueError)          bad option or environment variable; raised by Client()
│   └── SpoolLockedError                   another live client already owns this spool directory
├── InvalidEventError (also ValueError)    bad arguments to track(); raised by track()
└── DeliveryError                          reported to `on_error`, never raised by track()
    ├── EventsDroppedError                 events dropped, with the reason and the count
    │   └── ClientClosedError              track() after close(): the event is dropped (`client_closed`)
    ├── BatchRejectedError                 the gateway refused a whole batch (any status but 200, 422, 413
    │                                      and the retryable 408/429/500/502/503/504); a single event's 413
    ├── EventRejectedError                 the gateway rejected one event of a batch (listed in 200/422)
    └── TransportError                     connection error, timeout or retryable status (retried)
        └── RetryableStatusError           408 / 429 / 500 / 502 / 503 / 504, with Retry-After when given
```

`track()` raises only `InvalidEventError` (a bug in the calling code). Transport problems are never raised
to the caller: they are retried, then reported to the `on_error` callback and counted in `Client.metrics()`.
"""

from __future__ import annotations


class HeadwaterError(Exception):
    """Base class of every Headwater SDK error."""


class ConfigError(HeadwaterError, ValueError):
    """An option or environment variable has a bad value; the message names it."""


class SpoolLockedError(ConfigError):
    """Another live client (in this or another process) already owns the spool directory."""


class InvalidEventError(HeadwaterError, ValueError):
    """The arguments of `track()` are not a valid event.

    `code` is stable (`invalid_event_type`, `invalid_properties`, `invalid_property_key`,
    `invalid_property_value`, `too_deep`, `invalid_partition_key`, `invalid_event_id`, `invalid_timestamp`,
    `event_too_large`); `field` names the argument or property path (`properties.cart.items[2].price`).
    """

    def __init__(self, message: str, code: str = "invalid_event", field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


class DeliveryError(HeadwaterError):
    """A problem while delivering events; reported to `on_error`, never raised by `track()`."""


class EventsDroppedError(DeliveryError):
    """Events were dropped before the gateway acknowledged them."""

    def __init__(self, reason: str, count: int, detail: str = "") -> None:
        super().__init__(f"{count} event(s) dropped: {reason}" + (f" ({detail})" if detail else ""))
        self.reason = reason
        self.count = count


class ClientClosedError(EventsDroppedError):
    """`track()` was called after `close()`: the event is dropped and counted as `client_closed`."""

    def __init__(self, count: int = 1) -> None:
        super().__init__("client_closed", count, "track() after close()")


class BatchRejectedError(DeliveryError):
    """The gateway refused a whole batch with a non-retryable status; its events are not resent."""

    def __init__(self, batch_id: str, status: int, code: str, message: str, count: int) -> None:
        code = code or f"http_{status}"
        super().__init__(f"batch {batch_id} ({count} events) rejected: HTTP {status} {code}: {message}")
        self.batch_id = batch_id
        self.status = status
        self.code = code
        self.count = count


class EventRejectedError(DeliveryError):
    """The gateway rejected one event of a batch (listed in `rejected`); it is never resent."""

    def __init__(self, batch_id: str, event_id: str, seq: int, code: str, message: str) -> None:
        super().__init__(f"event {event_id} (seq {seq}) of batch {batch_id} rejected: {code}: {message}")
        self.batch_id = batch_id
        self.event_id = event_id
        self.seq = seq
        self.code = code


class TransportError(DeliveryError):
    """A connection error, timeout or retryable status: the batch is retried.

    `refused` is True when no connection could be opened (refused, unreachable): the gateway did no work.
    `switched` is True when this failure moved the client to another endpoint: it is retried there at once;
    `short` is True when its backoff is capped at `retry_refused_max_s` (an endpoint failing while others exist).
    """

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused
        self.switched = False
        self.short = False


class RetryableStatusError(TransportError):
    """A retryable HTTP status (408, 429, 500, 502, 503, 504); `retry_after` is the server's delay in seconds."""

    def __init__(self, status: int, retry_after: float | None, message: str = "") -> None:
        super().__init__(f"HTTP {status}" + (f": {message}" if message else ""))
        self.status = status
        self.retry_after = retry_after
