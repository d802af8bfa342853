"""The client's gate (protocol.md §6.1): a Retry-After holds every sender, one sender probes a failing gateway.

`Gate` keeps retry storms down and wakes sleepers when it matters: the first sender that fails becomes the
prober and alone sends while the failure streak lasts; the others wait at the gate. Any answer ends the streak
and wakes every wait (backoffs included), and so does `close()`: once the gateway answers again every pending
batch goes at once, not after its own backoff. While `close()` waits, backoffs are capped at
`retry_refused_max_s` (2 s). The retry rule and backoff that use it are in `_retry`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from ._exceptions import TransportError

log = logging.getLogger("headwater")


class Aborted(Exception):
    """The client is stopping: stop retrying now."""


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
