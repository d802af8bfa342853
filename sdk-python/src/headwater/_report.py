"""Reporting delivery problems: to the `on_error` callback, or to the `headwater` logger, rate-limited.

With `on_error` set, every `DeliveryError` goes to it (a failing callback is logged, never raised). Without
it, each kind of problem (class and reason or code) is logged at once the first time, then at most once per
`interval_s`, with the count of what was suppressed in between (4,800 `queue_full` drops make one line, not
4,800); `close()` logs what is still suppressed. `debug=True` sends the SDK's DEBUG lines (every failed
attempt, every answer) to stderr if the application configured no logging.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from ._exceptions import DeliveryError, EventsDroppedError

log = logging.getLogger("headwater")
INTERVAL_S = 10.0


class Reporter:
    """Delivers `DeliveryError`s to `on_error` or to the log (rate-limited per kind)."""

    def __init__(self, on_error: Callable[..., None] | None, interval_s: float = INTERVAL_S) -> None:
        self._on_error = on_error
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._kinds: dict[tuple[str, str], list[float]] = {}  # kind -> [last logged at, suppressed count]

    def __call__(self, error: DeliveryError) -> None:
        """Report `error`."""
        if self._on_error is not None:
            self.callback(error)
            return
        key = (type(error).__name__, str(getattr(error, "reason", "") or getattr(error, "code", "")))
        count = error.count if isinstance(error, EventsDroppedError) else 1
        now = time.monotonic()
        with self._lock:
            state = self._kinds.get(key)
            if state is not None and now - state[0] < self._interval_s:
                state[1] += count
                return
            suppressed = state[1] if state is not None else 0
            self._kinds[key] = [now, 0.0]
        more = f" (and {int(suppressed)} more like it in the last {self._interval_s:.0f} s)" if suppressed else ""
        log.warning("headwater: %s%s", error, more)

    def callback(self, error: DeliveryError) -> None:
        """Pass `error` to `on_error` if there is one; never raises."""
        if self._on_error is None:
            return
        try:
            self._on_error(error)
        except Exception:
            log.exception("headwater: on_error callback failed")

    def close(self) -> None:
        """Log what is still suppressed."""
        with self._lock:
            pending = [(k, s[1]) for k, s in self._kinds.items() if s[1]]
            self._kinds.clear()
        for (kind, reason), count in pending:
            log.warning("headwater: %d more %s (%s) not logged individually", count, kind, reason)


def enable_debug() -> None:
    """Log the SDK's DEBUG lines; to stderr if neither the `headwater` logger nor the root has a handler."""
    logger = logging.getLogger("headwater")
    logger.setLevel(logging.DEBUG)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
