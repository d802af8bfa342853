"""Retry policy: which answers are retried (pure), the backoff, and one batch's retry loop behind a shared probe.

DECISIONS.md 1 (an explicit retryable set, as the OpenTelemetry OTLP exporter has): 408, 429, 500, 502, 503,
504, connection errors and timeouts are retried with exponential backoff and full jitter (base 0.5 s, cap
30 s), never sooner than `Retry-After` (which holds every sender of the client, also across a batch's
deadline), under a per-batch deadline; 413 splits; 200 and 422 are answers;
every other status is a refusal, never retried.

`Probe` keeps retry storms down when several senders share a failing gateway: the first sender that fails
becomes the prober and alone retries; the others wait until it gets an answer (or gives up), then all resume
at once. After a refused connection (nothing listens: cheap for the gateway) the prober's waits are capped
at `retry_refused_max_s` (2 s), so producers resume within seconds once the gateway listens again.
"""

from __future__ import annotations

import enum
import logging
import random
import threading
import time
from typing import Callable, TypeVar

from ._exceptions import RetryableStatusError, TransportError

T = TypeVar("T")
log = logging.getLogger("headwater")
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class Outcome(enum.Enum):
    """What a status code means for the batch (protocol.md section 4, DECISIONS.md 1)."""

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


class Aborted(Exception):
    """The client is closing: stop retrying now."""


def backoff(attempt: int, base: float, cap: float, retry_after: float | None) -> float:
    """Full-jitter exponential backoff for the n-th retry (1-based), never shorter than `retry_after`."""
    delay = random.uniform(0.0, min(cap, base * (2 ** min(attempt - 1, 60))))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


class Probe:
    """The health of the gateway as the senders of one client see it; one sender probes while it fails.

    Logs the first failure of a streak once (and reports it to `report`), and the recovery with the streak's
    length; every failed attempt is logged at DEBUG.
    """

    def __init__(self, report: Callable[[TransportError], None], abort: threading.Event) -> None:
        self._report = report
        self._abort = abort
        self._cond = threading.Condition(threading.Lock())
        self._prober: int | None = None  # thread id of the sender probing a failing gateway
        self._since: float | None = None  # start of the failure streak
        self._failures = 0
        self._not_before = 0.0  # monotonic time before which nobody sends (the server's Retry-After)

    def enter(self) -> None:
        """Wait while another sender probes a failing gateway or a `Retry-After` runs; `Aborted` on close."""
        me = threading.get_ident()
        with self._cond:
            while True:
                if self._abort.is_set():
                    raise Aborted()
                hold = self._not_before - time.monotonic()
                if hold <= 0 and (self._prober is None or self._prober == me):
                    return
                self._cond.wait(min(0.5, hold) if hold > 0 else 0.5)

    def hold(self, seconds: float) -> None:
        """No sender of this client sends for `seconds` (a `Retry-After`), also after a deadline or a restart."""
        with self._cond:
            self._not_before = max(self._not_before, time.monotonic() + seconds)

    def failed(self, exc: TransportError) -> None:
        """An attempt failed with a retryable error: this sender probes until it gets an answer."""
        with self._cond:
            first = self._since is None
            if first:
                self._since = time.monotonic()
            self._failures += 1
            if self._prober is None:
                self._prober = threading.get_ident()
        log.debug("headwater: attempt failed: %s", exc)
        if first:
            log.warning("headwater: delivery failing (%s); retrying, and logging again when it recovers", exc)
            self._report(exc)

    def answered(self) -> None:
        """An attempt got an answer: the gateway is back; every waiting sender resumes."""
        with self._cond:
            since, failures = self._since, self._failures
            self._since, self._failures, self._prober = None, 0, None
            self._cond.notify_all()
        if since is not None:
            log.warning("headwater: delivery recovered after %.1f s and %d failed attempt(s)",
                        time.monotonic() - since, failures)

    def gave_up(self) -> None:
        """This sender stops probing (deadline or close); another waiting sender takes over."""
        with self._cond:
            if self._prober == threading.get_ident():
                self._prober = None
                self._cond.notify_all()


class RetryPolicy:
    """Runs a callable until it returns, raises a non-retryable error, the deadline passes, or abort is set."""

    def __init__(self, base_s: float, max_s: float, refused_max_s: float, deadline_s: float, *,
                 abort: threading.Event, probe: Probe,
                 on_retry: Callable[[BaseException], None] = lambda exc: None) -> None:
        self.base_s = base_s
        self.max_s = max_s
        self.refused_max_s = min(refused_max_s, max_s)
        self.deadline_s = deadline_s
        self.abort = abort
        self.probe = probe
        self.on_retry = on_retry

    def call(self, fn: Callable[[], T]) -> T:
        """Call `fn`, retrying `TransportError`s; raises the last one at the deadline, `Aborted` on abort."""
        start = time.monotonic()
        attempt = 0
        try:
            while True:
                if self.abort.is_set():
                    raise Aborted()
                self.probe.enter()
                try:
                    result = fn()
                except TransportError as exc:
                    self.probe.failed(exc)
                    attempt += 1
                    delay = self._delay(attempt, exc)
                    if isinstance(exc, RetryableStatusError) and exc.retry_after:
                        self.probe.hold(exc.retry_after)
                    if time.monotonic() + delay - start > self.deadline_s:
                        raise
                    self.on_retry(exc)
                    if self.abort.wait(delay):
                        raise Aborted() from None
                    continue
                self.probe.answered()
                return result
        finally:
            self.probe.gave_up()

    def _delay(self, attempt: int, exc: TransportError) -> float:
        if isinstance(exc, RetryableStatusError):
            return backoff(attempt, self.base_s, self.max_s, exc.retry_after)
        cap = self.refused_max_s if exc.refused else self.max_s
        return backoff(attempt, self.base_s, cap, None)
