"""The adaptive in-flight limit (protocol.md §6.2): how many requests one client keeps outstanding.

`AdaptiveLimit` is the pure core (no clock, no lock): a window that grows while answers come back without
queueing (slow start, then additive increase, as TCP's congestion window), shrinks when the round-trip time
says requests queue at the gateway (Vegas, as Netflix's concurrency-limits), and halves at once on a retryable
failure (429, 503, a timeout, ...). `Window` puts it behind a lock for the sender threads: a request takes a
place before it is sent and gives it back with its outcome.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import threading
import time

INITIAL_LIMIT = 4  # the window a client starts with (or max_in_flight if smaller)
QUEUE_GROW = 2.0  # below this many estimated queued requests a limited answer grows the window
QUEUE_SHRINK = 4.0  # above this many the window shrinks by 1/limit per answer
RTT_BUCKET_S = 10.0  # the minimum round-trip time is kept over the last 10 to 20 s


class Signal(enum.Enum):
    """What one request's answer means for the window."""

    SUCCESS = "success"  # 200 / 422: a round-trip sample
    FAILURE = "failure"  # a retryable status, a connection error or a timeout: halve
    NEUTRAL = "neutral"  # 413, a refusal, or no request made: no change


class AdaptiveLimit:
    """The window's state and its rules; every method is a pure update (the caller serializes them)."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = float(min(INITIAL_LIMIT, ceiling))
        self.ssthresh = float(ceiling)
        self.generation = 0
        self._bucket_min = math.inf
        self._older_min = math.inf
        self._bucket_start: float | None = None
        self._answered = True  # an answer came since the last decrease

    @property
    def window(self) -> int:
        """Requests that may be outstanding now."""
        return max(1, int(self.limit))

    @property
    def min_rtt(self) -> float:
        """The smallest round-trip time seen in the last 10 to 20 s (inf before the first)."""
        return min(self._bucket_min, self._older_min)

    def _sample(self, rtt: float, now: float) -> None:
        if self._bucket_start is None or now - self._bucket_start >= RTT_BUCKET_S:
            self._older_min, self._bucket_min, self._bucket_start = self._bucket_min, math.inf, now
        self._bucket_min = min(self._bucket_min, rtt)

    def succeeded(self, rtt: float, limited: bool, now: float) -> None:
        """A 200/422 after `rtt` seconds, answered at `now` (monotonic seconds); `limited`: the request filled
        the window when it was sent."""
        self._answered = True
        rtt = max(rtt, 1e-6)
        self._sample(rtt, now)
        queue = self.limit * (1.0 - self.min_rtt / rtt)
        if queue > QUEUE_SHRINK:
            self.limit = max(1.0, self.limit - 1.0 / self.limit)
            self.ssthresh = min(self.ssthresh, self.limit)
        elif limited:
            if queue >= QUEUE_GROW:
                self.ssthresh = min(self.ssthresh, self.limit)
            elif self.limit < self.ssthresh:
                self.limit = min(float(self.ceiling), self.limit + 1.0)
            else:
                self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)

    def new_path(self) -> None:
        """The client moved to another endpoint: forget `min_rtt` (the new path has its own)."""
        self._bucket_min = self._older_min = math.inf
        self._bucket_start = None

    def failed(self, generation: int) -> None:
        """A retryable failure of a request sent in `generation`: halve once per generation."""
        if generation != self.generation:
            return
        self.generation += 1
        self.limit = max(1.0, self.limit / 2.0)
        if self._answered:
            self.ssthresh = self.limit
        self._answered = False


@dataclasses.dataclass(frozen=True)
class Slot:
    """A place in the window held by one request: its generation, whether it filled the window, its start."""

    generation: int
    limited: bool
    started: float


class Window:
    """`AdaptiveLimit` shared by the sender threads of one client."""

    def __init__(self, ceiling: int) -> None:
        self._limit = AdaptiveLimit(ceiling)
        self._cond = threading.Condition(threading.Lock())
        self._outstanding = 0
        self._stopped = False
        self.peak = 0  # the most requests ever outstanding at once (connections the transport needed)

    @property
    def size(self) -> int:
        """The current window."""
        with self._cond:
            return self._limit.window

    def acquire(self) -> Slot | None:
        """Wait for a place in the window; None once `stop()` was called."""
        with self._cond:
            while self._outstanding >= self._limit.window and not self._stopped:
                self._cond.wait()
            if self._stopped:
                return None
            self._outstanding += 1
            self.peak = max(self.peak, self._outstanding)
            return Slot(self._limit.generation, self._outstanding >= self._limit.window, time.monotonic())

    def release(self, slot: Slot, signal: Signal) -> None:
        """Give the place back with what the request's answer says about the gateway."""
        now = time.monotonic()
        with self._cond:
            self._outstanding -= 1
            if signal is Signal.SUCCESS:
                self._limit.succeeded(now - slot.started, slot.limited, now)
            elif signal is Signal.FAILURE:
                self._limit.failed(slot.generation)
            self._cond.notify(self._limit.window - self._outstanding)  # as many as may start now, not all

    def new_path(self) -> None:
        """The client moved to another endpoint (protocol.md §9): the window stays, `min_rtt` starts again."""
        with self._cond:
            self._limit.new_path()

    def stop(self) -> None:
        """Wake every waiter for good (the client's hard stop)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
