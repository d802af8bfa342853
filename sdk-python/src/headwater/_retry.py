"""Retry policy: which answers are retried (pure), the backoff, the client's gate, and one batch's retry loop.

The retry rule (protocol.md §4, an explicit retryable set as the OpenTelemetry OTLP exporter has): 408, 429,
500, 502, 503, 504, connection errors and timeouts are retried with exponential backoff and full jitter (base
0.5 s, cap 30 s), never sooner than `Retry-After` (capped at 10 x `retry_max_s`; it holds every sender of the
client), under a per-batch deadline; 413 splits; 200 and 422 are answers; every other status is a refusal,
never retried.

`Gate` (protocol.md §6.1) keeps retry storms down and wakes sleepers when it matters: the first sender that
fails becomes the prober and alone sends while the failure streak lasts; the others wait at the gate. Any
answer ends the streak and wakes every wait (backoffs included), and so does `close()`: once the gateway
answers again every pending batch goes at once, not after its own backoff. After a refused connection (nothing
listens: cheap for the gateway), and while `close()` waits, backoffs are capped at `retry_refused_max_s` (2 s).
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


class Aborted(Exception):
    """The client is stopping: stop retrying now."""


def backoff(attempt: int, base: float, cap: float, retry_after: float | None) -> float:
    """Full-jitter exponential backoff for the n-th retry (1-based), never shorter than `retry_after`."""
    delay = random.uniform(0.0, min(cap, base * (2 ** min(attempt - 1, 60))))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


class Gate:
    """Who may send now, for every sender of one client (protocol.md §6.1).

    Logs the first failure of a streak once (and reports it to `report`), and the recovery with the streak's
    length; every failed attempt is logged at DEBUG.
    """

    def __init__(self, report: Callable[[TransportError], None], abort: threading.Event,
                 closing_max_s: float) -> None:
        self._report = report
        self._abort = abort
        self._closing_max_s = closing_max_s
        self._cond = threading.Condition(threading.Lock())
        self._prober: int | None = None  # thread id of the sender probing a failing gateway
        self._since: float | None = None  # start of the failure streak (None: no streak)
        self._failures = 0
        self._not_before = 0.0  # monotonic time before which nobody sends (the server's Retry-After)
        self._wakes = 0  # bumped by every wake-up: a wait that sees it change ends
        self._closing = False

    def enter(self) -> None:
        """Wait while a `Retry-After` holds or another sender probes a failing gateway; `Aborted` on stop."""
        me = threading.get_ident()
        with self._cond:
            while True:
                if self._abort.is_set():
                    raise Aborted()
                hold = self._not_before - time.monotonic()
                if hold <= 0:
                    if self._since is None or self._prober == me:
                        return
                    if self._prober is None:  # a streak whose prober gave up: this sender probes now
                        self._prober = me
                        return
                self._cond.wait(hold if hold > 0 else None)

    def hold(self, seconds: float) -> None:
        """No sender of this client sends for `seconds` (a `Retry-After`), also after a deadline."""
        with self._cond:
            self._not_before = max(self._not_before, time.monotonic() + seconds)

    def cap(self, delay: float) -> float:
        """A backoff `delay` as it will be waited: at most `retry_refused_max_s` while `close()` waits."""
        return min(delay, self._closing_max_s) if self._closing else delay

    def backoff(self, delay: float, since: int) -> None:
        """Wait `delay` s (see `cap`); ends at a wake-up after `since` (from `failed`); `Aborted` on stop."""
        with self._cond:
            deadline = time.monotonic() + self.cap(delay)
            while self._wakes == since:
                if self._abort.is_set():
                    raise Aborted()
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def failed(self, exc: TransportError) -> int:
        """An attempt failed with a retryable error: a streak starts (this sender probes) unless one runs.

        Returns the wake-up count to pass to `backoff`, so an answer that comes before the backoff starts
        still ends it.
        """
        with self._cond:
            first = self._since is None
            if first:
                self._since = time.monotonic()
                self._prober = threading.get_ident()
            self._failures += 1
            wakes = self._wakes
        log.debug("headwater: attempt failed: %s", exc)
        if first:
            log.warning("headwater: delivery failing (%s); retrying, and logging again when it recovers", exc)
            self._report(exc)
        return wakes

    def answered(self) -> None:
        """An attempt got an answer: the streak ends and every wait ends."""
        with self._cond:
            since, failures = self._since, self._failures
            self._since, self._failures, self._prober = None, 0, None
            self._wakes += 1
            self._cond.notify_all()
        if since is not None:
            log.warning("headwater: delivery recovered after %.1f s and %d failed attempt(s)",
                        time.monotonic() - since, failures)

    def switched(self) -> None:
        """The client moved to another endpoint: the streak and any `Retry-After` hold (the old endpoint's) end,
        and every wait ends, so pending batches go to the new endpoint at once."""
        with self._cond:
            self._since, self._failures, self._prober = None, 0, None
            self._not_before = 0.0
            self._wakes += 1
            self._cond.notify_all()

    def gave_up(self) -> None:
        """This sender stops probing (deadline or stop); the next sender at the gate probes."""
        with self._cond:
            if self._prober == threading.get_ident():
                self._prober = None
                self._cond.notify_all()

    def wake(self, closing: bool = False) -> None:
        """End every wait now; `closing`: `close()` started, so later backoffs are capped as well."""
        with self._cond:
            self._closing = self._closing or closing
            self._wakes += 1
            self._cond.notify_all()


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
