"""Retry policy: classify an answer (pure), and run attempts through tenacity with jitter, deadline and abort.

Following the OTLP HTTP exporter and protocol.md section 6: 429, 5xx, any unexpected status, connection
errors and timeouts are retried with exponential backoff and full jitter (base 0.5 s, cap 30 s), waiting at
least the server's `Retry-After`, until an overall per-batch deadline; the wait is cut short by `close()`.
"""

from __future__ import annotations

import enum
import random
import threading
from typing import Callable, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_before_delay

from ._exceptions import RetryableStatusError, TransportError

T = TypeVar("T")


REFUSED_STATUSES = frozenset({400, 401, 403, 415})


class Outcome(enum.Enum):
    """What a status code means for the batch (protocol.md section 4)."""

    DONE = "done"  # 200 / 422: answered per event
    REFUSED = "refused"  # 400 / 401 / 403 / 415: never retry
    SPLIT = "split"  # 413: split and retry the halves
    RETRY = "retry"  # 429, 5xx and any other status (protocol.md section 4: "any other status ... is retryable")


def classify(status: int) -> Outcome:
    """The outcome of an HTTP status."""
    if status in (200, 422):
        return Outcome.DONE
    if status == 413:
        return Outcome.SPLIT
    if status in REFUSED_STATUSES:
        return Outcome.REFUSED
    return Outcome.RETRY


class Aborted(Exception):
    """The client is closing: stop retrying now."""


def backoff(attempt: int, base: float, cap: float, retry_after: float | None) -> float:
    """Full-jitter exponential backoff for the n-th retry (1-based), at least `retry_after`."""
    delay = random.uniform(0.0, min(cap, base * (2 ** (attempt - 1))))
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap * 10))
    return delay


class RetryPolicy:
    """Runs a callable until it returns, raises a non-retryable error, the deadline passes, or abort is set."""

    def __init__(self, base_s: float, max_s: float, deadline_s: float, abort: threading.Event,
                 on_retry: Callable[[BaseException], None] = lambda exc: None) -> None:
        self.base_s = base_s
        self.max_s = max_s
        self.deadline_s = deadline_s
        self.abort = abort
        self.on_retry = on_retry

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = exc.retry_after if isinstance(exc, RetryableStatusError) else None
        return backoff(state.attempt_number, self.base_s, self.max_s, retry_after)

    def _sleep(self, seconds: float) -> None:
        if self.abort.wait(seconds):
            raise Aborted()

    def _before_sleep(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        if exc is not None:
            self.on_retry(exc)

    def call(self, fn: Callable[[], T]) -> T:
        """Call `fn`, retrying `TransportError`s; raises the last one at the deadline, `Aborted` on abort."""
        if self.abort.is_set():
            raise Aborted()
        retrying = Retrying(
            retry=retry_if_exception_type(TransportError),
            stop=stop_before_delay(self.deadline_s),
            wait=self._wait,
            sleep=self._sleep,
            before_sleep=self._before_sleep,
            reraise=True,
        )
        return retrying(fn)
