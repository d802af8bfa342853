"""The adaptive in-flight limit (protocol.md §6.2) and the gate's wake-up rule (§6.1), as pure rules and in a client."""

from __future__ import annotations

import threading
import time

import pytest

import headwater
from headwater import MemoryTransport, Request, Response
from headwater._exceptions import TransportError
from headwater._gate import Aborted, Gate
from headwater._limit import INITIAL_LIMIT, AdaptiveLimit, Signal, Window

from .helpers import body_of, error, ok, wait_until

pytestmark = pytest.mark.unit


def grow(lim: AdaptiveLimit, answers: int, rtt: float = 0.05, limited: bool = True, now: float = 0.0) -> None:
    for _ in range(answers):
        lim.succeeded(rtt, limited, now)


def test_the_window_starts_at_four_and_doubles_per_round_trip_up_to_the_ceiling() -> None:
    lim = AdaptiveLimit(16)
    assert lim.window == INITIAL_LIMIT == 4
    grow(lim, 4)  # one round trip of a full window: 4 answers
    assert lim.window == 8
    grow(lim, 8)
    assert lim.window == 16
    grow(lim, 100)
    assert lim.window == 16  # never above the ceiling
    assert AdaptiveLimit(2).window == 2  # a ceiling below the start


def test_answers_that_did_not_fill_the_window_do_not_grow_it() -> None:
    lim = AdaptiveLimit(16)
    grow(lim, 1000, limited=False)  # a quiet application: it never needs more than it has
    assert lim.window == 4


def test_a_retryable_failure_halves_the_window_once_per_generation() -> None:
    lim = AdaptiveLimit(16)
    grow(lim, 12)
    assert lim.window == 16
    sent_in = lim.generation
    for _ in range(16):  # sixteen requests sent in one window all fail: one halving, not sixteen
        lim.failed(sent_in)
    assert lim.window == 8
    lim.failed(lim.generation)  # a request sent after the decrease (the prober) fails again
    lim.failed(lim.generation)
    lim.failed(lim.generation)
    assert lim.window == 1
    grow(lim, 1)  # the gateway is back: slow start back to half of the window before the outage
    grow(lim, 2)
    grow(lim, 4)
    assert lim.window == 8
    grow(lim, 8)  # then about one more per round trip
    assert 8.9 < lim.limit < 9.1


def test_round_trips_that_grow_with_the_window_stop_it_and_then_shrink_it() -> None:
    lim = AdaptiveLimit(64)
    grow(lim, 50, rtt=0.001)  # min_rtt 1 ms
    before = lim.limit
    grow(lim, 5, rtt=0.0015)  # queue = limit * (1 - 1/1.5): a third of the window waits at the gateway
    assert lim.limit <= before
    grow(lim, 3000, rtt=0.01)  # ten times the minimum: the window shrinks by one per round trip
    assert lim.window <= 5
    assert lim.window >= 1


def test_the_minimum_round_trip_forgets_old_samples() -> None:
    lim = AdaptiveLimit(16)
    lim.succeeded(0.001, False, now=0.0)
    grow(lim, 10, rtt=0.05, limited=False, now=15.0)  # the route changed: 50 ms from now on
    assert lim.min_rtt == pytest.approx(0.001)  # still within the window
    grow(lim, 10, rtt=0.05, limited=False, now=25.0)
    assert lim.min_rtt == pytest.approx(0.05)


def test_window_counts_places_and_records_the_peak() -> None:
    w = Window(16)
    slots = [w.acquire() for _ in range(4)]
    assert all(s is not None for s in slots) and w.peak == 4
    assert [s.limited for s in slots if s is not None] == [False, False, False, True]
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(w.acquire()))
    t.start()  # a fifth request waits for a place
    assert not wait_until(lambda: bool(got), timeout_s=0.2)
    first = slots[0]
    assert first is not None
    w.release(first, Signal.SUCCESS)  # a limited answer would grow it; this one was not limited: a place frees
    t.join(5)
    assert got and got[0] is not None
    w.stop()
    assert w.acquire() is None or w.size >= 1


def gate() -> tuple[Gate, threading.Event]:
    abort = threading.Event()
    return Gate(lambda exc: None, abort, closing_max_s=2.0), abort


def test_an_answer_wakes_every_backoff_at_once() -> None:
    g, _ = gate()
    ended: list[float] = []

    since = g.failed(TransportError("down"))

    def sleeper() -> None:
        g.backoff(600, since)
        ended.append(time.monotonic())

    threads = [threading.Thread(target=sleeper) for _ in range(3)]
    for t in threads:
        t.start()
    assert not wait_until(lambda: bool(ended), timeout_s=0.2)
    woke = time.monotonic()
    g.answered()
    for t in threads:
        t.join(5)
    assert len(ended) == 3 and max(ended) - woke < 1.0


def test_close_wakes_backoffs_and_caps_later_ones() -> None:
    g, _ = gate()
    done = threading.Event()
    since = g.failed(TransportError("down"))

    def sleeper() -> None:
        g.backoff(600, since)
        done.set()

    t = threading.Thread(target=sleeper)
    t.start()
    g.wake(closing=True)
    assert done.wait(5)
    assert g.cap(30.0) == 2.0  # while close() waits, a backoff is at most retry_refused_max_s
    start = time.monotonic()
    g.backoff(0.05, g.failed(TransportError("down")))
    assert time.monotonic() - start < 1.0


def test_only_the_prober_passes_the_gate_during_a_streak_and_stop_aborts_the_rest() -> None:
    g, abort = gate()
    g.failed(TransportError("down"))  # this thread probes
    g.enter()  # the prober passes
    passed = threading.Event()
    aborted = threading.Event()

    def other() -> None:
        try:
            g.enter()
            passed.set()
        except Aborted:
            aborted.set()

    t = threading.Thread(target=other)
    t.start()
    assert not passed.wait(0.2)  # another sender waits while the streak runs
    abort.set()
    g.wake()
    t.join(5)
    assert aborted.is_set() and not passed.is_set()


def test_an_answer_to_another_batch_wakes_a_batch_in_a_long_backoff() -> None:
    """The first request fails (backoff up to 60 s); the three in flight beside it succeed and wake it."""
    release = threading.Event()
    all_in_flight = threading.Barrier(4)
    calls: list[tuple[str, float]] = []
    lock = threading.Lock()

    def handler(request: Request) -> Response:
        with lock:
            first = not calls
            calls.append((body_of(request)["batch_id"], time.monotonic()))
        if first:
            all_in_flight.wait(10)
            return error(503, "overloaded")
        if len(calls) <= 4:
            all_in_flight.wait(10)
        release.wait(10)
        return ok(len(body_of(request)["events"]))

    c = headwater.Client("http://gw", "k", transport=MemoryTransport(handler), max_batch_events=1,
                         linger_s=0.001, retry_base_s=60, retry_max_s=60, on_error=lambda e: None)
    for i in range(4):
        c.track("page_view", {"i": i})
    assert wait_until(lambda: c.metrics().retries >= 1 and len(calls) == 4)
    woke = time.monotonic()
    release.set()
    assert c.flush(5)
    retried = [t for batch_id, t in calls[1:] if batch_id == calls[0][0]]
    assert retried and retried[0] - woke < 1.0
    assert c.close(5)


def test_close_delivers_what_waited_in_a_long_backoff() -> None:
    answers = iter([error(503, "overloaded")])

    def handler(request: Request) -> Response:
        return next(answers, None) or ok(len(body_of(request)["events"]))

    c = headwater.Client("http://gw", "k", transport=MemoryTransport(handler), linger_s=0.001,
                         retry_base_s=200, retry_max_s=200, on_error=lambda e: None)
    c.track("page_view", {})
    assert wait_until(lambda: c.metrics().retries >= 1)  # in a backoff of up to 200 s
    start = time.monotonic()
    assert c.close(5)
    assert time.monotonic() - start < 3.0
