"""Resuming on the real stack (Kafka, registry, gateway, the server process, real HTTP): a connection dropped
mid-stream resumes from its Last-Event-ID with no gap and no repeat, both from the live reader's ring and, when the
ring has moved past it, from the log; `from=<time>` starts at that time."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.subscribe.harness import Keys, Server, Stream, post_page_views, start_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["ring", "log"])
def resume_server(request: pytest.FixtureRequest, stack_env: dict[str, str],
                  tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[tuple[str, Server]]:
    """`ring`: default sizes (a resume finds its place in the ring); `log`: a 64 KiB ring, so that a resume after
    more than that has passed reads the log first."""
    ring = "65536" if request.param == "log" else "16777216"
    srv = start_server(stack_env, tmp_path_factory.mktemp("resume"), keys, HEADWATER_SUBSCRIBE_RING_BYTES=ring,
                       HEADWATER_SUBSCRIBE_BUFFER_BYTES=str(min(int(ring), 8 << 20)))
    try:
        yield request.param, srv
    finally:
        srv.stop()


def read_until(stream: Stream, want: int, got: list[dict[str, object]], stop_at: int | None = None) -> None:
    for msg in stream.messages():
        assert msg.event == "message", msg
        got.append(msg.json())
        if len(got) >= (stop_at or want):
            return


def test_dropped_connection_resumes_without_gap_or_repeat(resume_server: tuple[str, Server],
                                                          stack_env: dict[str, str]) -> None:
    mode, srv = resume_server
    marker = f"resume-{uuid.uuid4().hex[:8]}"
    query = {"filter": json.dumps({"properties.title": marker})}
    first = Stream(srv.url, "event.page_view", srv.keys.all, query)
    assert first.status == 200 and first.resp.getheader("Content-Type", "").startswith("text/event-stream")
    sent: list[str] = []
    sender = threading.Thread(target=lambda: sent.extend(
        post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 600, marker)))
    sender.start()
    got: list[dict[str, object]] = []
    read_until(first, 600, got, stop_at=150)
    first.close()  # dropped mid-stream, without warning
    last_id = first.last_id
    sender.join()  # everything else is sent while the subscriber is away (more than the small ring holds)
    second = Stream(srv.url, "event.page_view", srv.keys.all, query, last_id=last_id)
    assert second.status == 200
    read_until(second, 600, got)
    second.close()
    ids = [str(r["headers"]["event_id"]) for r in got]  # type: ignore[index]
    assert len(ids) == len(set(ids)) == 600, "a repeat or a gap"
    assert set(ids) == set(sent)
    by_node: dict[str, list[int]] = {}
    for r in got:
        value = r["value"]
        assert isinstance(value, dict)
        by_node.setdefault(str(value["node_id"]), []).append(int(value["seq"]))
        assert r["stream"] == "event.page_view" and r["schema"]["subject"] == "headwater.events.page_view"  # type: ignore[index]
    assert all(seqs == sorted(seqs) for seqs in by_node.values()), "out of order within a partition"
    # the resume read the log first exactly when the ring no longer held its position
    assert (srv.metric("headwater_subscribe_catchups_total") > 0) == (mode == "log")


def test_from_a_time_starts_there(server: Server, stack_env: dict[str, str]) -> None:
    marker = f"from-{uuid.uuid4().hex[:8]}"
    before = post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 40, marker)
    time.sleep(0.01)  # not synchronisation: record timestamps are milliseconds; the boundary must fall between
    since = int(time.time() * 1000)
    after = post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 40, marker)
    stream = Stream(server.url, "event.page_view", server.keys.all, {
        "from": str(since), "filter": json.dumps({"properties.title": marker})})
    got: list[dict[str, object]] = []
    read_until(stream, 40, got)
    stream.close()
    ids = {str(r["headers"]["event_id"]) for r in got}  # type: ignore[index]
    assert ids == set(after) and not ids & set(before)
    early = Stream(server.url, "event.page_view", server.keys.all, {
        "from": "earliest", "filter": json.dumps({"properties.title": marker})})
    got = []
    read_until(early, 80, got)
    early.close()
    everything = [str(r["headers"]["event_id"]) for r in got]  # type: ignore[index]
    assert len(everything) == 80 and set(everything) == set(before) | set(after)
