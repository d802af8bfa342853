"""Several endpoints: the failover core's rules (a fake clock), and the client failing over and back through the
in-memory transport (protocol.md §9)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import headwater
from headwater import MemoryTransport, Request, Response
from headwater._failover import Endpoints

from .helpers import batches, body_of, ok

pytestmark = pytest.mark.unit
FAST: dict[str, Any] = {"linger_s": 0.01, "retry_base_s": 0.005, "retry_max_s": 0.02, "exit_timeout_s": 5.0,
                        "failover_after_s": 0.05, "failover_after_failures": 3}
URLS = ["http://a", "http://b", "http://c"]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_failover_needs_both_the_count_and_the_time() -> None:
    clock = Clock()
    e = Endpoints(URLS, after_failures=3, after_s=10.0, probe_every_s=5.0, clock=clock)
    assert e.failed(0) is None and e.failed(0) is None and e.failed(0) is None  # 3 failures within 0 s
    clock.now += 9.9
    assert e.failed(0) is None  # 4 failures in 9.9 s
    clock.now += 0.1
    switch = e.failed(0)
    assert switch is not None and (switch.old, switch.new, switch.failback) == ("http://a", "http://b", False)
    assert switch.failures == 5 and switch.seconds == pytest.approx(10.0)
    assert e.current() == (1, "http://b") and e.failovers == 1


def test_an_answer_ends_the_streak_and_stale_failures_do_not_count() -> None:
    clock = Clock()
    e = Endpoints(URLS, after_failures=2, after_s=1.0, probe_every_s=5.0, clock=clock)
    e.failed(0)
    clock.now += 2
    e.answered(0)  # a 200, a 4xx, a 429 or a 500: the endpoint is alive
    assert e.failed(0) is None  # a new streak
    clock.now += 1
    assert e.failed(0) is not None
    clock.now += 5
    for _ in range(5):
        assert e.failed(0) is None  # a request still in flight to the old endpoint
    assert e.current()[0] == 1


def test_after_the_last_endpoint_the_first_is_tried_again() -> None:
    clock = Clock()
    e = Endpoints(URLS[:2], after_failures=1, after_s=0.0, probe_every_s=5.0, clock=clock)
    assert e.failed(0) is not None and e.failed(1) is not None
    assert e.current() == (0, "http://a") and e.failovers == 2


def test_probes_are_due_every_interval_one_at_a_time_and_fail_back_to_the_first_ready() -> None:
    clock = Clock()
    e = Endpoints(URLS, after_failures=1, after_s=0.0, probe_every_s=5.0, clock=clock)
    assert e.probe_targets() == []  # on the primary: nothing to probe
    e.failed(0)
    e.failed(1)
    assert e.current()[0] == 2
    assert e.probe_targets() == []  # not due right after the move
    clock.now += 5
    assert e.probe_targets() == [0, 1]
    assert e.probe_targets() == []  # another sender probes
    assert e.probed(None) is None and e.current()[0] == 2
    assert e.probe_targets() == []
    clock.now += 5
    assert e.probe_targets() == [0, 1]
    switch = e.probed(1)
    assert switch is not None and switch.failback and switch.new == "http://b" and e.failbacks == 1
    clock.now += 5
    assert e.probe_targets() == [0]
    assert e.probed(0) is not None and e.current() == (0, "http://a")


def test_config_takes_endpoints_with_or_without_endpoint() -> None:
    cfg = headwater.ClientConfig(endpoint=None, write_key="k", endpoints=["http://a", "http://b/"])
    assert cfg.endpoint == "http://a" and cfg.endpoints == ("http://a", "http://b/")
    assert headwater.ClientConfig(endpoint="http://a", write_key="k").endpoints == ("http://a",)
    env = {"HEADWATER_ENDPOINTS": "http://a, http://b", "HEADWATER_WRITE_KEY": "k",
           "HEADWATER_FAILOVER_AFTER_S": "2.5", "HEADWATER_FAILBACK_PROBE_S": "30"}
    cfg = headwater.ClientConfig.from_env(env)
    assert cfg.endpoints == ("http://a", "http://b") and cfg.failover_after_s == 2.5 and cfg.failback_probe_s == 30
    for bad in ({"endpoint": "http://x", "endpoints": ["http://a", "http://b"]},
                {"endpoint": None, "endpoints": ["http://a", "http://a/"]},
                {"endpoint": None, "endpoints": ["http://a", "ftp://b"]},
                {"endpoint": None, "endpoints": ["http://a", "https://b"]},
                {"endpoint": None, "endpoints": "http://a"},
                {"endpoint": None},
                {"endpoint": "http://a", "failover_after_failures": 0}):
        with pytest.raises(headwater.ConfigError):
            headwater.ClientConfig(write_key="k", **bad)


def _regions(primary: dict[str, Any]) -> MemoryTransport:
    """`http://a` answers as `primary` says ("down": refused, "503", "up"), with /readyz; `http://b` accepts."""

    def handle(req: Request) -> Response:
        if req.url.startswith("http://a"):
            if primary["state"] == "down":
                raise headwater.TransportError("refused", refused=True)
            if req.url.endswith("/readyz"):
                return Response(200 if primary["state"] == "up" else 503)
            if primary["state"] == "503":
                return Response(503, {"retry-after": "1"}, b'{"code":"kafka_unavailable","message":"down"}')
        if req.url.endswith("/readyz"):
            return Response(200)
        return ok(len(body_of(req)["events"]))

    return MemoryTransport(handle)


@pytest.mark.parametrize("state", ["down", "503"])
def test_the_client_fails_over_keeping_batch_ids_and_seqs(state: str) -> None:
    primary = {"state": state}
    t = _regions(primary)
    with headwater.Client(None, "k", endpoints=["http://a", "http://b"], transport=t, **FAST) as c:
        seqs = [c.track("page_view", {"i": i}) for i in range(100)]
        assert c.flush(10)
        m = c.metrics()
    assert seqs == list(range(100))
    assert m.acknowledged == 100 and m.failovers == 1 and m.endpoint == "http://b" and m.dropped == {}
    posts = [r for r in t.requests if r.url.endswith("/v1/batch")]
    to_b = [body_of(r) for r in posts if r.url.startswith("http://b")]
    assert sorted(e["seq"] for b in to_b for e in b["events"]) == list(range(100))  # each once
    sent_to_a = {b["batch_id"]: b for b in batches(t)} if state == "503" else {}
    by_id_b = {b["batch_id"]: b for b in to_b}
    for batch_id, batch in sent_to_a.items():
        if any(r.url.startswith("http://a") and body_of(r)["batch_id"] == batch_id for r in posts):
            assert by_id_b[batch_id]["events"] == batch["events"]  # the same batch, resent elsewhere


def test_the_client_fails_back_after_a_ready_probe() -> None:
    primary = {"state": "503"}
    t = _regions(primary)
    with headwater.Client(None, "k", endpoints=["http://a", "http://b"], transport=t, failback_probe_s=0.05,
                          **FAST) as c:
        for i in range(10):
            c.track("page_view", {"i": i})
        assert c.flush(10)
        assert c.metrics().endpoint == "http://b"
        primary["state"] = "up"
        deadline = time.monotonic() + 10
        while c.metrics().endpoint != "http://a":  # each flush sends a batch; a due probe moves the client back
            assert time.monotonic() < deadline, "no failback within 10 s"
            c.track("page_view", {})
            assert c.flush(10)
        c.track("page_view", {"last": True})
        assert c.flush(10)
        m = c.metrics()
    assert m.failbacks == 1 and m.acknowledged == m.enqueued
    last = body_of([r for r in t.requests if r.url.endswith("/v1/batch")][-1])
    assert [r for r in t.requests if r.url == "http://a/readyz"]
    assert last["events"][-1]["properties"] == {"last": True}
    assert [r for r in t.requests if r.url.endswith("/v1/batch")][-1].url == "http://a/v1/batch"
    assert all("Authorization" not in r.headers for r in t.requests if r.url.endswith("/readyz"))


def test_one_endpoint_never_fails_over() -> None:
    calls = {"n": 0}

    def handle(req: Request) -> Response:
        calls["n"] += 1
        if calls["n"] <= 5:
            return Response(503, {}, b'{"code":"overloaded","message":"busy"}')
        return ok(len(body_of(req)["events"]))

    t = MemoryTransport(handle)
    with headwater.Client("http://a", "k", transport=t, **FAST) as c:
        c.track("page_view", {})
        assert c.flush(10)
        assert c.metrics().failovers == 0
    assert {r.url for r in t.requests} == {"http://a/v1/batch"}


def test_with_several_endpoints_a_failing_endpoint_is_retried_within_retry_refused_max_s() -> None:
    """Long backoffs (base 1 s, cap 30 s) would reach the failover bound late; with several endpoints a 503
    without Retry-After is retried within retry_refused_max_s, so the move comes right after the bound."""

    def handle(req: Request) -> Response:
        if req.url.startswith("http://a"):
            return Response(503, {}, b'{"code":"overloaded","message":"busy"}')
        return ok(len(body_of(req)["events"]))

    t = MemoryTransport(handle)
    options = {**FAST, "retry_base_s": 1.0, "retry_max_s": 30.0, "retry_refused_max_s": 0.02,
               "failover_after_s": 0.2, "failover_after_failures": 5}  # uncapped: ~7.5 s of backoff on average
    with headwater.Client(None, "k", endpoints=["http://a", "http://b"], transport=t, **options) as c:
        c.track("page_view", {})
        started = time.monotonic()
        assert c.flush(10)
        took = time.monotonic() - started
        assert c.metrics().failovers == 1
    assert took < 2.0, f"failed over after {took:.1f} s"
    gaps = [b.url for b in t.requests]
    assert gaps[-1] == "http://b/v1/batch" and gaps.count("http://a/v1/batch") >= 5
