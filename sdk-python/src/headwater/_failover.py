"""Several endpoints: which one the client sends to, when it fails over, and when it fails back (protocol.md §9).

`Endpoints` is the pure core (a lock, a clock, no I/O): the sender asks it for the active endpoint before
each attempt and tells it what the attempt got. A connection error, a timeout, 502, 503 or 504 from the
active endpoint extends its failure streak; any other answer (200, 4xx, 429, 500, ...) ends it. When the streak
holds `after_failures` attempts AND spans `after_s` seconds, the client moves to the next endpoint (after the
last: the first). While it is not on the first endpoint, one sender at a time probes the endpoints before the
active one (`GET {endpoint}/readyz`) at most every `probe_every_s`, and the client returns to the first that
answers 200.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Callable

HEALTH_FAILURES = frozenset({502, 503, 504})  # statuses that say "this endpoint cannot take the batch now"
READY_PATH = "/readyz"
PROBE_TIMEOUT_S = 2.0  # a probe waits at most this long (or request_timeout_s if shorter)


@dataclasses.dataclass(frozen=True)
class Switch:
    """The client moved from one endpoint to another: `failback` when it returned to an earlier one."""

    old: str
    new: str
    failback: bool
    failures: int = 0
    seconds: float = 0.0


class Endpoints:
    """The ordered endpoints of one client and the failover state; thread-safe."""

    def __init__(self, urls: Sequence[str], after_failures: int, after_s: float, probe_every_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not urls:
            raise ValueError("at least one endpoint")
        self.urls = tuple(u.rstrip("/") for u in urls)
        self._after_failures = after_failures
        self._after_s = after_s
        self._probe_every_s = probe_every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._active = 0
        self._since: float | None = None  # start of the active endpoint's failure streak
        self._failures = 0
        self._next_probe = 0.0
        self._probing = False
        self.failovers = 0
        self.failbacks = 0

    def current(self) -> tuple[int, str]:
        """The active endpoint's index and base URL."""
        with self._lock:
            return self._active, self.urls[self._active]

    def failed(self, index: int) -> Switch | None:
        """An attempt sent to endpoint `index` failed (connection error, timeout, 502/503/504); a `Switch` when
        the streak reached the bound and the client moved on. Failures of an endpoint no longer active do not
        count."""
        with self._lock:
            if index != self._active or len(self.urls) == 1:
                return None
            now = self._clock()
            if self._since is None:
                self._since = now
            self._failures += 1
            spent = now - self._since
            if self._failures < self._after_failures or spent < self._after_s:
                return None
            old, failures = self._active, self._failures
            self._move((self._active + 1) % len(self.urls), now)
            self.failovers += 1
            return Switch(self.urls[old], self.urls[self._active], False, failures, spent)

    def answered(self, index: int) -> None:
        """Endpoint `index` answered (anything but 502/503/504): its failure streak ends."""
        with self._lock:
            if index == self._active:
                self._since, self._failures = None, 0

    def probe_targets(self) -> list[int]:
        """The endpoints to probe now, in order (empty when on the first endpoint, when a probe is not due, or
        when another sender probes); a non-empty answer must be followed by `probed`."""
        with self._lock:
            if self._active == 0 or self._probing or self._clock() < self._next_probe:
                return []
            self._probing = True
            return list(range(self._active))

    def probed(self, ready: int | None) -> Switch | None:
        """The probe found endpoint `ready` ready (None: none was); a `Switch` back to it."""
        with self._lock:
            self._probing = False
            now = self._clock()
            self._next_probe = now + self._probe_every_s
            if ready is None or ready >= self._active:
                return None
            old = self._active
            self._move(ready, now)
            self.failbacks += 1
            return Switch(self.urls[old], self.urls[ready], True)

    def _move(self, index: int, now: float) -> None:
        self._active = index
        self._since, self._failures = None, 0
        self._next_probe = now + self._probe_every_s
