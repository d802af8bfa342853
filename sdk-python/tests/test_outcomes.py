"""close() tells the truth: True exactly when every accepted event was acknowledged, for every status of §4."""

from __future__ import annotations

import time
from typing import Any

import pytest

import headwater
from headwater import MemoryTransport, Response

from .helpers import error, ok, scripted

pytestmark = pytest.mark.unit
FAST: dict[str, Any] = {"linger_s": 0.005, "retry_base_s": 0.002, "retry_max_s": 0.01, "retry_refused_max_s": 0.01}


def run(answers: list[Response | Exception], n: int = 2, **options: Any) -> tuple[bool, headwater.Metrics,
                                                                                  MemoryTransport]:
    t = MemoryTransport(scripted(answers))
    c = headwater.Client("http://gw", "k", transport=t, on_error=lambda e: None, **{**FAST, **options})
    for i in range(n):
        c.track("page_view", {"i": i})
    closed = c.close(10)
    return closed, c.metrics(), t


def reject_first(status: int = 200) -> Response:
    return ok(1, [{"index": 0, "code": "invalid_properties", "message": "bad"}], status=status)


@pytest.mark.parametrize(("answers", "expected"), [
    ([ok(2)], True),
    ([reject_first()], False),  # 200 with a rejected event
    ([ok(0, [{"index": 0, "code": "unknown_event_type", "message": "?"},
             {"index": 1, "code": "unknown_event_type", "message": "?"}], status=422)], False),
    ([error(400, "invalid_json")], False),
    ([error(401, "invalid_write_key")], False),
    ([error(403, "write_key_revoked")], False),
    ([error(415, "unsupported_encoding")], False),
    ([error(404, "not_found")], False),
    ([error(408, "request_timeout", "0")], True),  # retried, then 200
    ([error(429, "rate_limited", "0")], True),
    ([error(500, "bug")], True),
    ([error(502, "bad_gateway")], True),
    ([error(503, "overloaded", "0")], True),
    ([error(504, "gateway_timeout")], True),
    ([headwater.TransportError("reset")], True),
    ([headwater.TransportError("refused", refused=True)], True),
    ([error(413, "body_too_large")], True),  # split into two single events, each accepted
    ([error(413, "body_too_large"), error(413, "event_too_large")], False),  # one half alone is too large
])
def test_close_is_true_only_when_everything_was_acknowledged(answers: list[Response | Exception],
                                                             expected: bool) -> None:
    closed, m, _ = run(answers)
    assert closed is expected, m
    assert m.acknowledged + m.rejected + m.dropped_total == 2


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_a_gateway_that_never_recovers_makes_close_false(status: int) -> None:
    closed, m, t = run([error(status, retry_after="0")] * 10_000, retry_deadline_s=0.2)
    assert closed is False and m.dropped == {"retry_deadline": 2} and len(t.requests) > 1


def test_a_spool_left_with_undelivered_events_makes_close_false(tmp_path: Any) -> None:
    closed, m, _ = run([error(503, retry_after="0")] * 10_000, spool_dir=str(tmp_path), retry_deadline_s=0.05)
    assert closed is False and m.dropped == {} and m.pending_events == 2


def test_track_returns_gapless_seqs_and_none_when_it_drops() -> None:
    t = MemoryTransport(lambda r: error(503, retry_after="0"))
    c = headwater.Client("http://gw", "k", transport=t, max_queue_events=3, max_pending_batches=1,
                         max_batch_events=1, on_error=lambda e: None, linger_s=60, retry_deadline_s=60)
    seqs = [c.track("page_view", {"i": i}) for i in range(50)]
    accepted = [s for s in seqs if s is not None]
    assert accepted == list(range(len(accepted))) and None in seqs  # refused events take no seq
    assert c.metrics().dropped["queue_full"] == seqs.count(None)
    assert c.close(0.1) is False


def test_disabled_client_checks_and_counts_but_sends_nothing() -> None:
    t = MemoryTransport()
    c = headwater.Client("http://gw", "k", transport=t, disabled=True)
    assert c.track("page_view", {"a": 1}) is None
    with pytest.raises(headwater.InvalidEventError):
        c.track("page_view", {"a": float("nan")})
    assert c.close(1) is True  # nothing was meant to be sent, nothing was lost
    assert t.requests == [] and c.metrics().dropped == {"disabled": 1}


def _batcher_settled(c: headwater.Client) -> bool:
    """Wait until the batcher took every queued event into the store (False) or the queue stopped draining
    because the store is full (True: events still queued and none moved for 0.3 s)."""
    deadline = time.monotonic() + 30
    last, since = c.metrics().queued, time.monotonic()
    while time.monotonic() < deadline:
        queued = c.metrics().queued
        if queued == 0:
            return False
        if queued != last:
            last, since = queued, time.monotonic()
        elif time.monotonic() - since >= 0.3:
            return True
        time.sleep(0.01)
    raise AssertionError(f"the batcher neither drained nor stopped: {c.metrics()}")


@pytest.mark.parametrize("spool", [False, True])
def test_backpressure_never_drops_what_it_accepted(tmp_path: Any, spool: bool) -> None:
    """Gateway down, store bounded: the store fills, then the queue, then new events are refused at track()."""
    down = MemoryTransport(lambda r: error(503, retry_after="0"))
    bound: dict[str, Any] = {"spool_dir": str(tmp_path), "spool_max_bytes": 40_000} if spool else \
        {"max_pending_batches": 5}
    c = headwater.Client("http://gw", "k", transport=down, max_queue_events=200, retry_deadline_s=3600,
                         on_error=lambda e: None, **{**FAST, **bound})
    seqs: list[int | None] = []
    store_full = False
    for chunk in range(150):  # 40 events at a time; until the store is full, the batcher takes what it can first
        seqs += [c.track("page_view", {"i": chunk * 40 + i, "pad": "x" * 100}) for i in range(40)]
        if not store_full:
            store_full = _batcher_settled(c)  # True: events stay queued (the store has no room left)
    assert store_full
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the batcher may still be sealing what it took: wait until it is held
        m = c.metrics()
        if m.queued + m.pending_events == m.enqueued and m.pending_events >= 40:
            break
        time.sleep(0.01)
    assert set(m.dropped) == {"queue_full"}, m.dropped  # never store_full: what was accepted is held
    assert m.queued + m.pending_events == m.enqueued  # every accepted event is still held: queue or store
    # The store filled first, then the queue (200) before new events were refused; the batcher may then still
    # move one batch from the queue into the store (its bound is exceeded by at most one batch).
    assert m.pending_events >= 40 and m.queued >= 200 - 40 and m.enqueued >= 200 + 40
    assert m.dropped["queue_full"] == seqs.count(None) == 6_000 - m.enqueued
    c.close(0.1)
