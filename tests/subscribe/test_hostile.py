"""Hostile clients on the real server: connections that never send a request, subscribers that never read,
more subscriptions than allowed, a huge or forged Last-Event-ID, bad filters. Each is bounded and answered with a
documented JSON error; a well-behaved subscriber beside them gets everything."""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from subscribe.position import topic_tag
from tests.subscribe.harness import Keys, Server, Stream, follow, post_page_views, start_server
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration
RULE = "hostile_test"


@pytest.fixture(scope="module")
def hostile(stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[Server]:
    admin = AdminClient({"bootstrap.servers": stack_env["KAFKA_BOOTSTRAP"]})
    if f"headwater.rule.{RULE}" not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(f"headwater.rule.{RULE}", 1, 1)])[f"headwater.rule.{RULE}"].result(30)
    srv = start_server(stack_env, tmp_path_factory.mktemp("hostile"), keys,
                       HEADWATER_SUBSCRIBE_MAX_PER_KEY="40", HEADWATER_SUBSCRIBE_MAX_SUBSCRIBERS="45",
                       HEADWATER_SUBSCRIBE_HEADER_TIMEOUT_S="1", HEADWATER_SUBSCRIBE_BUFFER_BYTES="65536",
                       HEADWATER_SUBSCRIBE_RING_BYTES="131072", HEADWATER_SUBSCRIBE_SNDBUF_BYTES="16384",
                       HEADWATER_SUBSCRIBE_CUTOFF_GRACE_S="1")
    try:
        yield srv
    finally:
        srv.stop()



def rss_kb(srv: Server) -> int:
    for line in Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_connections_that_send_nothing_are_closed(hostile: Server) -> None:
    port = urllib.parse.urlsplit(hostile.url).port
    idle = []
    for i in range(100):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        if i % 2:
            sock.sendall(b"GET /v1/streams/event.page_view HTTP/1.1\r\nHost: x\r\n")  # and never the end
        idle.append(sock)
    ok = Stream(hostile.url, "event.page_view", hostile.keys.all)
    assert ok.status == 200
    ok.close()
    for sock in idle:  # each is closed by the server (header timeout), not kept forever
        while sock.recv(65536):  # (a socket timeout fails the test)
            pass
        sock.close()


def test_subscribers_that_never_read_are_cut_off_and_memory_stays_bounded(hostile: Server,
                                                                          stack_env: dict[str, str]) -> None:
    marker = f"hostile-{uuid.uuid4().hex[:8]}"
    query = {"filter": json.dumps({"properties.title": marker})}
    before_cut = hostile.metric("headwater_subscribe_cutoffs_total")
    sleepers = [Stream(hostile.url, "event.page_view", hostile.keys.all, query, rcvbuf=4096) for _ in range(30)]
    assert all(s.status == 200 for s in sleepers)
    got: list[dict[str, Any]] = []
    thread = threading.Thread(target=follow, args=(hostile.url, "event.page_view", hostile.keys.all, query),
                              kwargs={"want": 900, "got": got})
    thread.start()
    rss_before = rss_kb(hostile)
    sent = post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 900, marker)
    thread.join(120)
    assert sorted(str(r["headers"]["event_id"]) for r in got) == sorted(sent)  # (it may have been cut and resumed)
    wait_for("30 more cutoffs", lambda: hostile.metric("headwater_subscribe_cutoffs_total") >= before_cut + 30, 60,
             interval_s=0.05)
    # 30 stalled subscribers hold at most their socket buffers: far less than what was sent to them (30 x 1 MB)
    assert rss_kb(hostile) - rss_before < 48 * 1024
    for s in sleepers:
        s.close()
    wait_for("no subscribers", lambda: hostile.metric("headwater_subscribe_subscribers") == 0, 60, interval_s=0.05)


def test_limits_per_key_and_per_instance(hostile: Server) -> None:
    wait_for("no subscribers", lambda: hostile.metric("headwater_subscribe_subscribers") == 0, 60, interval_s=0.05)
    held = [Stream(hostile.url, "event.page_view", hostile.keys.all) for _ in range(40)]
    assert all(s.status == 200 for s in held)
    over = Stream(hostile.url, "event.page_view", hostile.keys.all)
    assert over.status == 429 and over.resp.getheader("Retry-After")
    assert over.error()["code"] == "too_many_subscriptions"
    held += [Stream(hostile.url, f"rule.{RULE}", hostile.keys.rules) for _ in range(5)]
    assert all(s.status == 200 for s in held)
    full = Stream(hostile.url, f"rule.{RULE}", hostile.keys.rules)
    assert full.status == 503 and full.error()["code"] == "instance_full"
    for s in held:
        s.close()
    wait_for("no subscribers", lambda: hostile.metric("headwater_subscribe_subscribers") == 0, 60, interval_s=0.05)
    again = Stream(hostile.url, "event.page_view", hostile.keys.all)
    assert again.status == 200
    again.close()


def test_huge_or_forged_last_event_id_and_bad_filters(hostile: Server) -> None:
    huge = "9" * 100_000
    s = Stream(hostile.url, "event.page_view", hostile.keys.all, last_id=huge)
    assert s.status in (400, 431) and s.error()["code"] in ("invalid_http", "headers_too_large")
    tag = topic_tag("headwater.events").decode()
    for forged, why in ((tag + "-" + ".".join(["1"] * 700), "too many partitions"),
                        (topic_tag("other").decode() + "-1.2.3", "another topic"),
                        (tag + "-99999999999.0.0", "past the end"), ("not-an-id", "garbage")):
        s = Stream(hostile.url, "event.page_view", hostile.keys.all, last_id=forged)
        assert s.status == 400, why
        assert s.error()["code"] == "invalid_last_event_id"
    for bad in ("{", "[]", '{"a": {"$regex": ".*"}}', json.dumps({f"f{i}": 1 for i in range(9)}),
                json.dumps({"a": "x" * 5000}), "{" * 2000):
        s = Stream(hostile.url, "event.page_view", hostile.keys.all, {"filter": bad})
        assert s.status == 400 and s.error()["code"] == "invalid_filter"
    widest = {f"properties.viewport.f{i}": list(range(16)) for i in range(8)}
    s = Stream(hostile.url, "event.page_view", hostile.keys.all, {"filter": json.dumps(widest)})
    assert s.status == 200
    s.close()
    assert huge[:200] not in Path(hostile.log).read_text()
