"""Retry policy: which answers are retried (pure), the backoff, and one batch's retry loop.

The retry rule (protocol.md §4, an explicit retryable set as the OpenTelemetry OTLP exporter has): 408, 429,
500, 502, 503, 504, connection errors and timeouts are retried with exponential backoff and full jitter (base
0.5 s, cap 30 s), never sooner than `Retry-After` (capped at 10 x `retry_max_s`; it holds every sender of the
client), under a per-batch deadline; 413 splits; 200 and 422 are answers; every other status is a refusal,
never retried.

Every attempt passes the client's `Gate` (`_gate`, protocol.md §6.1). After a refused connection (nothing
listens: cheap for the gateway) backoffs are capped at `retry_refused_max_s` (2 s), and so are they while
`close()` waits (the gate's `cap`).
"""

from __future__ import annotations

import enum
import random
import time
from typing import Callable, TypeVar

from ._exceptions import RetryableStatusError, TransportError
from ._gate import Gate

T = TypeVar("T")
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
RETRY_AFTER_CAP_FACTOR = 10  # Retry-After is honoured up to 10 x retry_max_s


class Outcome(enum.Enum):
    """What a status code means for the batch (protocol.md §4)."""

    DONE = "done"  # 200 / 422: answered per event
    REFUSED = "refused"  # every status not listed elsewhere: never retried
    SPLIT = "split"  # 413: split and retry the halves
    RETRY = "retry"  # 408, 429, 500, 502, 503, 504


def classify(status: int) -> Outcome:
    """The outcome of an HTTP status."""
    if status in (200, 422):
        return Outcome.DONE
    if status == 413:
        return Outcome.SPLIT
    if status in RETRYABLE_STATUSES:
        return Outcome.RETRY
    return Outcome.REFUSED


def backoff(attempt: int, base: float, cap: float, retry_after: float | None) -> float:
    """Full-jitter exponential backoff for the n-th retry (1-based), never shorter than `retry_after`."""
    delay = random.uniform(0.0, min(cap, base * (2 ** min(attempt - 1, 60))))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


class RetryPolicy:
    """Runs a callable until it returns, raises a non-retryable error, the deadline passes, or abort is set."""

    def __init__(self, base_s: float, max_s: float, refused_max_s: float, deadline_s: float, *,
                 gate: Gate, on_retry: Callable[[BaseException], None] = lambda exc: None) -> None:
        self.base_s = base_s
        self.max_s = max_s
        self.refused_max_s = min(refused_max_s, max_s)
        self.deadline_s = deadline_s
        self.gate = gate
        self.on_retry = on_retry

    def call(self, fn: Callable[[], T]) -> T:
        """Call `fn`, retrying `TransportError`s; raises the last one at the deadline, `Aborted` on stop."""
        start = time.monotonic()
        attempt = 0
        try:
            while True:
                self.gate.enter()
                try:
                    result = fn()
                except TransportError as exc:
                    if exc.switched:  # failed over (protocol.md §9): try the new endpoint now
                        self.gate.switched()
                        self.on_retry(exc)
                        continue
                    since = self.gate.failed(exc)
                    attempt += 1
                    retry_after = self.retry_after(exc)
                    if retry_after is not None:
                        self.gate.hold(retry_after)
                    delay = self.gate.cap(self._delay(attempt, exc, retry_after))
                    if time.monotonic() + delay - start > self.deadline_s:
                        raise
                    self.on_retry(exc)
                    self.gate.backoff(delay, since)
                    continue
                self.gate.answered()
                return result
        finally:
            self.gate.gave_up()

    def retry_after(self, exc: TransportError) -> float | None:
        """The server's `Retry-After` in seconds, capped at 10 x `retry_max_s`; None without one."""
        if isinstance(exc, RetryableStatusError) and exc.retry_after:
            return min(exc.retry_after, RETRY_AFTER_CAP_FACTOR * self.max_s)
        return None

    def _delay(self, attempt: int, exc: TransportError, retry_after: float | None) -> float:
        cap = self.refused_max_s if exc.refused or exc.short else self.max_s
        return backoff(attempt, self.base_s, cap, retry_after)
