"""A subscription's life on the real stack: the only subscriber of a topic keeps receiving past the reader's idle
timeout (the reader a subscriber started is never taken for idle), and a client that leaves is released, its
topic's reader stopped once nobody reads it."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.subscribe.harness import Keys, Server, Stream, post_page_views, start_server
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration
IDLE_S = 1.0


@pytest.fixture(scope="module")
def quick_idle(stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[Server]:
    srv = start_server(stack_env, tmp_path_factory.mktemp("lifecycle"), keys,
                       HEADWATER_SUBSCRIBE_IDLE_READER_S=str(IDLE_S), HEADWATER_SUBSCRIBE_HEARTBEAT_S="1")
    try:
        yield srv
    finally:
        srv.stop()


def test_the_only_subscriber_outlives_the_idle_timeout_and_is_released_when_it_leaves(
        quick_idle: Server, stack_env: dict[str, str]) -> None:
    marker = f"alone-{uuid.uuid4().hex[:8]}"
    stream = Stream(quick_idle.url, "event.page_view", quick_idle.keys.all,
                    {"filter": json.dumps({"properties.title": marker})})
    try:
        assert stream.status == 200
        wait_for("the reader", lambda: quick_idle.metric("headwater_subscribe_readers") == 1)
        time.sleep(IDLE_S * 3)  # not synchronisation: the reader must outlive its idle timeout with a subscriber
        assert quick_idle.metric("headwater_subscribe_readers") == 1
        sent = post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 20, marker)
        got = []
        for msg in stream.messages():
            got.append(str(msg.json()["headers"]["event_id"]))
            if len(got) == len(sent):
                break
        assert sorted(got) == sorted(sent)  # in order within a partition; the events spread over several
    finally:
        stream.close()
    wait_for("the subscription released", lambda: quick_idle.metric("headwater_subscribe_subscribers") == 0)
    wait_for("the idle reader stopped", lambda: quick_idle.metric("headwater_subscribe_readers") == 0)
