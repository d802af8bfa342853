"""The client end to end against the in-memory transport: batching, answers, retries, policies, lifecycle."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import headwater
from headwater import ClientState, MemoryTransport, Request, Response

from .helpers import batches, body_of, error, events, ok, scripted, settles_with_loss

pytestmark = pytest.mark.unit
FAST: dict[str, Any] = {"linger_s": 0.01, "retry_base_s": 0.005, "retry_max_s": 0.02, "exit_timeout_s": 5.0}


def client(transport: MemoryTransport, **options: Any) -> headwater.Client:
    return headwater.Client("http://gw", "key", transport=transport, **{**FAST, **options})


def test_events_are_batched_by_40_with_gapless_seqs() -> None:
    t = MemoryTransport()
    with client(t) as c:
        for i in range(100):
            c.track("page_view", {"i": i})
        assert c.flush(10)
        m = c.metrics()
    assert m.enqueued == m.sent == m.acknowledged == 100 and m.dropped == {}
    sent = batches(t)
    assert all(len(b["events"]) <= 40 for b in sent)
    evs = sorted(events(t), key=lambda e: e["seq"])  # order between batches is not promised (max_in_flight)
    assert [e["seq"] for e in evs] == list(range(100))
    assert [e["properties"]["i"] for e in evs] == list(range(100))
    assert len({e["producer_id"] for e in evs}) == 1
    req = t.requests[0]
    assert req.headers["Authorization"] == "Bearer key" and req.headers["Content-Encoding"] == "zstd"
    assert req.headers["User-Agent"].startswith("headwater-python/0.1.0 (")
    assert req.url == "http://gw/v1/batch"


def test_byte_cap_splits_batches_and_bad_events_fail_at_track() -> None:
    t = MemoryTransport()
    errors: list[Exception] = []
    with client(t, max_batch_bytes=4_096, max_event_bytes=2_000, on_error=errors.append) as c:
        for i in range(10):
            assert c.track("page_view", {"blob": "x" * 1_000}) == i  # track() returns the seq
        with pytest.raises(headwater.InvalidEventError, match="over max_event_bytes"):
            c.track("page_view", {"blob": "x" * 5_000})
        with pytest.raises(headwater.InvalidEventError, match=r"properties\.bad"):
            c.track("page_view", {"bad": float("nan")})
        assert c.flush(10)
        m = c.metrics()
    assert m.dropped == {} and m.enqueued == 10
    assert all(len(json.dumps(b)) <= 4_096 for b in batches(t))
    assert sorted(e["seq"] for e in events(t)) == list(range(10))  # refused events take no seq
    assert errors == []


def test_retry_after_and_5xx_are_retried_with_the_same_batch_id() -> None:
    t = MemoryTransport(scripted([error(503, retry_after="0"), error(429, retry_after="0"),
                                  headwater.TransportError("reset"), error(500)]))
    with client(t) as c:
        c.track("page_view", {})
        assert c.flush(10)
        m = c.metrics()
    ids = {b["batch_id"] for b in batches(t)}
    assert len(t.requests) == 5 and len(ids) == 1
    assert m.retries == 4 and m.acknowledged == 1


def test_rejected_events_are_reported_and_never_retried() -> None:
    t = MemoryTransport(scripted([ok(1, [{"index": 1, "code": "schema_mismatch", "message": "bad"}])]))
    reports: list[headwater.DeliveryReport] = []
    errors: list[Exception] = []
    with client(t, on_delivery=reports.append, on_error=errors.append) as c:
        c.track("page_view", {"ok": 1})
        c.track("page_view", {"ok": 0})
        assert settles_with_loss(c)  # flush() says events were lost
        m = c.metrics()
    assert len(t.requests) == 1
    assert m.acknowledged == 1 and m.rejected == 1
    assert reports[0].accepted == 1 and reports[0].rejected[0].seq == 1
    assert isinstance(errors[0], headwater.EventRejectedError) and errors[0].code == "schema_mismatch"


def test_all_rejected_422_is_not_retried() -> None:
    t = MemoryTransport(scripted([ok(0, [{"index": 0, "code": "unknown_type", "message": "?"}], status=422)]))
    with client(t) as c:
        c.track("nope", {})
        assert settles_with_loss(c)  # flush() says events were lost
        assert c.metrics().rejected == 1
    assert len(t.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 415, 409, 501, 302])
def test_refused_batches_are_dropped_and_reported_never_retried(status: int) -> None:
    t = MemoryTransport(scripted([error(status, code="some_code")]))
    errors: list[Exception] = []
    with client(t, on_error=errors.append) as c:
        c.track("page_view", {})
        assert settles_with_loss(c)  # flush() says events were lost
        assert c.metrics().dropped == {"some_code": 1}
    assert len(t.requests) == 1
    assert isinstance(errors[0], headwater.BatchRejectedError) and errors[0].status == status
    assert errors[0].code == "some_code"


def test_a_refusal_without_a_json_body_is_reported_as_http_status() -> None:
    t = MemoryTransport(scripted([Response(404, {}, b"<html>not found</html>")]))
    errors: list[Exception] = []
    with client(t, on_error=errors.append) as c:
        c.track("page_view", {})
        assert settles_with_loss(c)  # flush() says events were lost
        assert c.metrics().dropped == {"http_404": 1}
    assert isinstance(errors[0], headwater.BatchRejectedError) and errors[0].code == "http_404"


def test_413_splits_until_single_events_then_drops() -> None:
    def handler(request: Request) -> Response:
        n = len(body_of(request)["events"])
        return error(413) if n > 2 else ok(n)

    t = MemoryTransport(handler)
    with client(t) as c:
        for _ in range(8):
            c.track("page_view", {})
        assert c.flush(10)
        assert c.metrics().acknowledged == 8
    sizes = [len(b["events"]) for b in batches(t)]
    assert sorted(sizes, reverse=True) == [8, 4, 4, 2, 2, 2, 2]  # halves may be sent concurrently
    assert sorted(e["seq"] for b in batches(t) if len(b["events"]) <= 2 for e in b["events"]) == list(range(8))

    single = MemoryTransport(scripted([error(413, code="event_too_large")]))
    with client(single) as c:
        c.track("page_view", {})
        assert settles_with_loss(c)  # flush() says events were lost
        assert c.metrics().dropped == {"event_too_large": 1}


def test_deadline_drops_without_a_spool_and_close_interrupts_retries() -> None:
    down = MemoryTransport(lambda r: error(503, retry_after="0"))
    with client(down, retry_deadline_s=0.1) as c:
        c.track("page_view", {})
        assert settles_with_loss(c)  # flush() says events were lost
        assert c.metrics().dropped == {"retry_deadline": 1}

    stuck = MemoryTransport(lambda r: error(503, retry_after="3600"))
    c = client(stuck, retry_deadline_s=86_400, retry_max_s=3600)
    c.track("page_view", {})
    assert not c.flush(0.2)
    assert c.close(0.2) is False  # returns promptly: the hour-long Retry-After wait is interrupted
    assert c.metrics().dropped == {"closed_unsent": 1}


def test_spool_keeps_undelivered_batches_for_the_next_client(tmp_path: Path) -> None:
    down = MemoryTransport(lambda r: error(503, retry_after="0"))
    c = client(down, spool_dir=str(tmp_path), retry_deadline_s=0.05)
    for i in range(50):
        c.track("page_view", {"i": i})
    assert not c.flush(0.3)
    producer = c.producer_id
    assert c.close(0.1) is False
    assert c.metrics().dropped == {}
    up = MemoryTransport()
    with client(up, spool_dir=str(tmp_path)) as c2:
        assert c2.producer_id == producer
        c2.track("page_view", {"i": 50})
        assert c2.flush(10)
    seqs = sorted({e["seq"] for e in events(up)})
    assert seqs == list(range(51))
    assert {e["producer_id"] for e in events(up)} == {producer}


@pytest.mark.parametrize(("policy", "reason"), [("drop_newest", "queue_full"), ("drop_oldest", "queue_full_oldest"),
                                                ("block", "queue_full_timeout")])
def test_full_queue_policies_count_every_drop(policy: str, reason: str) -> None:
    gate = threading.Event()

    def handler(request: Request) -> Response:
        gate.wait(10)
        return ok(len(body_of(request)["events"]))

    t = MemoryTransport(handler)
    c = client(t, max_queue_events=5, max_batch_events=1, max_pending_batches=1, queue_policy=policy,
               block_timeout_s=0.01, linger_s=0)
    for i in range(200):
        c.track("page_view", {"i": i})
    m = c.metrics()
    gate.set()
    assert c.close(10) is False  # something was dropped: not everything was acknowledged
    final = c.metrics()
    assert m.dropped.get(reason, 0) > 0
    assert final.acknowledged + final.dropped_total == 200


def test_spill_policy_moves_the_queue_to_the_spool(tmp_path: Path) -> None:
    gate = threading.Event()
    t = MemoryTransport(lambda r: (gate.wait(10), ok())[1])
    c = client(t, spool_dir=str(tmp_path), max_queue_events=5, queue_policy="spill", linger_s=10)
    for i in range(100):
        c.track("page_view", {"i": i})
    assert c.metrics().dropped == {}
    gate.set()
    assert c.close(10)
    assert sorted(e["seq"] for e in events(t)) == list(range(100))


def test_close_is_idempotent_and_track_after_close_is_counted() -> None:
    t = MemoryTransport()
    errors: list[Exception] = []
    c = client(t, on_error=errors.append)
    c.track("page_view", {})
    assert c.close() and c.close()
    assert c.state is ClientState.CLOSED and t.closed
    c.track("page_view", {})
    assert c.metrics().dropped == {"client_closed": 1}
    assert isinstance(errors[-1], headwater.ClientClosedError) and errors[-1].reason == "client_closed"
    with pytest.raises(headwater.InvalidEventError):
        c.track("Bad Type", {})


def test_callback_failures_do_not_stop_delivery() -> None:
    def boom(_: object) -> None:
        raise RuntimeError("callback bug")

    t = MemoryTransport(scripted([error(400)]))
    with client(t, on_delivery=boom, on_error=boom) as c:
        c.track("page_view", {})
        c.track("page_view", {})
        assert settles_with_loss(c)  # flush() says events were lost
        c.track("page_view", {})
        assert c.flush(10)
        assert c.metrics().acknowledged == 1


def test_gzip_and_identity() -> None:
    for encoding in ("gzip", "identity"):
        t = MemoryTransport()
        with client(t, compression=encoding) as c:
            c.track("page_view", {"a": 1})
        assert t.requests[0].headers["Content-Encoding"] == encoding
        assert events(t)[0]["properties"] == {"a": 1}


def test_async_client_never_blocks_the_loop() -> None:
    t = MemoryTransport()

    async def main() -> headwater.Metrics:
        async with headwater.AsyncClient("http://gw", "k", transport=t, **FAST) as c:
            for i in range(10):
                c.track("page_view", {"i": i})
            assert await c.flush(10)
            return c.metrics()

    assert asyncio.run(main()).acknowledged == 10
    with pytest.raises(headwater.ConfigError, match="queue_policy"):
        headwater.AsyncClient("http://gw", "k", transport=t, queue_policy="block")
    with pytest.raises(headwater.ConfigError, match="durability"):
        headwater.AsyncClient("http://gw", "k", transport=t, durability="sync", spool_dir="unused")


def test_from_env(tmp_path: Path) -> None:
    env = {"HEADWATER_ENDPOINT": "http://gw", "HEADWATER_WRITE_KEY": "k", "HEADWATER_SPOOL_DIR": str(tmp_path)}
    t = MemoryTransport()
    with headwater.Client.from_env(env, transport=t, linger_s=0.01) as c:
        c.track("page_view", {})
    assert c.config.spool_dir == str(tmp_path) and len(events(t)) == 1
