"""What an operator sees: the first failure of a streak and its recovery logged once, drops rate-limited, one prober."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

import headwater
from headwater import MemoryTransport, Request, Response

from .helpers import body_of, error, ok, wait_until

pytestmark = pytest.mark.unit
FAST: dict[str, Any] = {"linger_s": 0.005, "retry_base_s": 0.002, "retry_max_s": 0.01, "retry_refused_max_s": 0.01}


class Outage:
    """Answers 503 until `up()`, counting attempts and the most requests it ever had at once."""

    def __init__(self, status: int = 503) -> None:
        self.status = status
        self.down = True
        self.attempts_while_down = 0
        self.concurrent = 0
        self.max_concurrent_while_down = 0
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Response:
        with self.lock:
            self.concurrent += 1
            if self.down:
                self.attempts_while_down += 1
                if self.attempts_while_down > 8:  # past the requests that were in flight when it failed
                    self.max_concurrent_while_down = max(self.max_concurrent_while_down, self.concurrent)
        try:
            time.sleep(0.002)
            if self.down:
                return error(self.status, "overloaded", "0")
            return ok(len(body_of(request)["events"]))
        finally:
            with self.lock:
                self.concurrent -= 1


def messages(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "headwater" and r.levelno >= level]


def test_a_failure_streak_is_logged_once_and_its_recovery_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="headwater")
    outage = Outage()
    errors: list[Exception] = []
    c = headwater.Client("http://gw", "k", transport=MemoryTransport(outage), on_error=errors.append,
                         retry_deadline_s=60, **FAST)
    for i in range(200):
        c.track("page_view", {"i": i})
    assert wait_until(lambda: outage.attempts_while_down >= 30)
    outage.down = False
    assert c.close(30)
    logged = messages(caplog)
    assert len([m for m in logged if "delivery failing" in m]) == 1, logged
    assert len([m for m in logged if "delivery recovered" in m]) == 1, logged
    assert [type(e) for e in errors] == [headwater.RetryableStatusError]  # on_error hears of the streak once
    assert len([m for m in messages(caplog, logging.DEBUG) if "attempt failed" in m]) >= 25  # at DEBUG: each one


def test_only_one_sender_probes_a_failing_gateway() -> None:
    outage = Outage()
    c = headwater.Client("http://gw", "k", transport=MemoryTransport(outage), max_in_flight=4,
                         max_batch_events=1, retry_deadline_s=60, on_error=lambda e: None, **FAST)
    for i in range(40):
        c.track("page_view", {"i": i})
    assert wait_until(lambda: outage.attempts_while_down >= 50)
    outage.down = False
    assert c.close(30)
    # the first failures overlap (requests already in flight), then a single prober retries
    assert outage.max_concurrent_while_down == 1 and outage.attempts_while_down >= 50
    assert c.metrics().acknowledged == 40


def test_repeated_drops_are_rate_limited_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="headwater")
    gate = threading.Event()
    t = MemoryTransport(lambda r: (gate.wait(10), ok(len(body_of(r)["events"])))[1])
    c = headwater.Client("http://gw", "k", transport=t, max_queue_events=10, max_pending_batches=1,
                         max_in_flight=1, linger_s=60)
    for i in range(5_000):
        c.track("page_view", {"i": i})
    dropped = c.metrics().dropped["queue_full"]
    assert dropped > 4_000
    during = [m for m in messages(caplog) if "queue_full" in m]
    assert len(during) == 1, during  # not one line per dropped event
    gate.set()
    c.close(10)
    summary = [m for m in messages(caplog) if "queue_full" in m and "more" in m]
    assert summary and str(dropped - 1) in summary[-1]


def test_debug_option_logs_every_answer(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("headwater")
    before = logger.level
    try:
        with headwater.Client("http://gw", "k", transport=MemoryTransport(), debug=True, **FAST) as c:
            c.track("page_view", {})
        assert any("HTTP 200" in m for m in messages(caplog, logging.DEBUG))
    finally:
        logger.setLevel(before)
        for h in list(logger.handlers):
            logger.removeHandler(h)


def test_retry_after_holds_every_sender_and_is_never_shortened() -> None:
    times: list[float] = []
    lock = threading.Lock()
    refused = threading.Event()

    def handler(request: Request) -> Response:
        with lock:
            times.append(time.monotonic())
            first = len(times) == 1
        if first:
            refused.set()
            return error(503, "overloaded", "0.5")
        return ok(len(body_of(request)["events"]))

    c = headwater.Client("http://gw", "k", transport=MemoryTransport(handler), max_in_flight=4, max_batch_events=1,
                         linger_s=0, retry_base_s=0.001, retry_max_s=0.1, on_error=lambda e: None)
    c.track("page_view", {})
    assert refused.wait(30)
    assert wait_until(lambda: c.metrics().retries >= 1)  # the 503 was handled: its Retry-After holds every sender
    for i in range(20):
        c.track("page_view", {"i": i})
    assert c.close(30)
    assert len(times) == 22
    assert min(times[1:]) - times[0] >= 0.5  # neither the retry nor any other sender went before Retry-After
