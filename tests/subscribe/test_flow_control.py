"""Flow control on the real stack: a subscriber that stops reading is cut off once it is more than its buffer
behind, is told its position, and resumes from the log with nothing lost; a subscriber beside it is not held up;
one that stalls while reading the log is cut off after the stall timeout."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator

import pytest

from tests.subscribe.harness import Keys, Server, Stream, post_page_views, start_server
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tight(stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[Server]:
    srv = start_server(stack_env, tmp_path_factory.mktemp("flow"), keys,
                       HEADWATER_SUBSCRIBE_BUFFER_BYTES="65536", HEADWATER_SUBSCRIBE_RING_BYTES="131072",
                       HEADWATER_SUBSCRIBE_CUTOFF_GRACE_S="60", HEADWATER_SUBSCRIBE_STALL_S="1",
                       HEADWATER_SUBSCRIBE_SNDBUF_BYTES="16384")
    try:
        yield srv
    finally:
        srv.stop()



def event_ids(msgs: list[dict[str, object]]) -> list[str]:
    return [str(m["headers"]["event_id"]) for m in msgs]  # type: ignore[index]


def test_slow_subscriber_is_cut_off_and_resumes_with_nothing_lost(tight: Server, stack_env: dict[str, str]) -> None:
    marker = f"slow-{uuid.uuid4().hex[:8]}"
    query = {"filter": json.dumps({"properties.title": marker})}
    slow = Stream(tight.url, "event.page_view", tight.keys.all, query, rcvbuf=4096)
    fast = Stream(tight.url, "event.page_view", tight.keys.all, query)
    assert slow.status == fast.status == 200
    fast_got: list[dict[str, object]] = []

    def read_fast() -> None:
        for msg in fast.messages():
            fast_got.append(msg.json())
            if len(fast_got) == 600:
                return

    reader = threading.Thread(target=read_fast)
    reader.start()
    cut_before = tight.metric("headwater_subscribe_cutoffs_total", 'reason="too_slow"')
    sent = post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 600, marker)
    reader.join(120)
    assert len(fast_got) == 600, "the subscriber beside the slow one was held up"
    wait_for("a too_slow cutoff",
             lambda: tight.metric("headwater_subscribe_cutoffs_total", 'reason="too_slow"') > cut_before, 60,
             interval_s=0.05)

    got, cutoff = [], None
    for msg in slow.messages():  # now read what was sent before the cut-off, then its last message
        if msg.event == "cutoff":
            cutoff = msg.json()
        else:
            got.append(msg.json())
    assert cutoff is not None and cutoff["code"] == "subscriber_too_slow"
    assert cutoff["position"] == slow.last_id and len(got) < 600
    resumed = Stream(tight.url, "event.page_view", tight.keys.all, query, last_id=slow.last_id)
    for msg in resumed.messages():
        got.append(msg.json())
        if len(got) >= 600:
            break
    resumed.close()
    assert sorted(event_ids(got)) == sorted(sent) and len(set(event_ids(got))) == 600
    assert len(fast_got) == 600 and set(event_ids(fast_got)) == set(sent)


def test_a_stalled_reader_of_the_log_is_cut_off(tight: Server, stack_env: dict[str, str]) -> None:
    marker = f"stall-{uuid.uuid4().hex[:8]}"
    post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 400, marker)
    before = tight.metric("headwater_subscribe_cutoffs_total", 'reason="stalled"')
    stalled = Stream(tight.url, "event.page_view", tight.keys.all, {"from": "earliest"}, rcvbuf=4096)
    assert stalled.status == 200
    wait_for("a stalled cutoff", lambda: tight.metric("headwater_subscribe_cutoffs_total", 'reason="stalled"') > before,
             60, interval_s=0.05)
    last = None
    for msg in stalled.messages():
        last = msg
    assert last is not None and last.event == "cutoff" and last.json()["code"] == "subscriber_stalled"
    wait_for("no subscriber catching up", lambda: tight.metric("headwater_subscribe_catching_up") == 0, 60,
             interval_s=0.05)
