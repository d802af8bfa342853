"""The subscription servers behind HAProxy in the cluster profile: a subscriber (the Python SDK, through HAProxy)
whose instance is killed with SIGKILL resumes on the other instance with no gap and no repeat, and HAProxy's log
never holds a read key given in the query string."""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.request
from typing import Any

import headwater
import pytest

from stack.launcher import Stack
from stack.services import subscribe_service
from tests.subscribe.harness import post_page_views
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]



def serving(profile: Stack) -> int:
    """The index of the subscription server holding the one open stream."""
    rows = profile.haproxy.server_stats()
    busy = [i for i in range(1, profile.cfg.topology.subscribe + 1)
            if int(rows[f"subscribers/subscribe-{i}"]["scur"] or 0)]
    assert len(busy) == 1, rows
    return busy[0]


def test_a_subscriber_resumes_on_the_other_instance_after_a_kill(cluster: tuple[Stack, dict[str, str]]) -> None:
    profile, env = cluster
    marker = f"proxy-{time.monotonic_ns()}"
    got: list[Any] = []
    sub = headwater.subscribe(env["SUBSCRIBE_URL"], env["HEADWATER_READ_KEY"], "event.page_view",
                              filter={"properties.title": marker}, max_backoff_s=1.0)

    def read() -> None:
        for rec in sub:
            got.append(rec.headers["event_id"])
            if len(got) >= 400:
                break

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for("one open stream through HAProxy",
                 lambda: sum(int(r["scur"] or 0) for k, r in profile.haproxy.server_stats().items()
                             if k.startswith("subscribers/subscribe-")) == 1, 120)
        sent = post_page_views(env["GATEWAY_URL"], env["HEADWATER_WRITE_KEY"], 200, marker)
        wait_for("50 events", lambda: len(got) >= 50, 120)
        victim = serving(profile)
        pid = subscribe_service(profile.cfg, victim).process(profile.cfg).pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        sent += post_page_views(env["GATEWAY_URL"], env["HEADWATER_WRITE_KEY"], 200, marker)
        reader.join(180)
        assert len(got) == len(set(got)) == 400 and set(got) == set(sent)
        assert sub.reconnects >= 1
    finally:
        sub.close()
        profile.start_subscribers(env)  # the killed instance again, for the other tests


def test_haproxy_never_logs_a_read_key_given_in_the_query(cluster: tuple[Stack, dict[str, str]]) -> None:
    profile, env = cluster
    token = env["HEADWATER_READ_KEY"]
    url = f"{env['SUBSCRIBE_URL']}/v1/streams/deadletter?access_token={token}&from=latest"
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.status == 200 and resp.readline().startswith(b"retry: ")
    log = profile.haproxy.log_file
    wait_for("the stream's log line",  # logged at the stream's end
             lambda: "/v1/streams/deadletter" in log.read_text(errors="replace"), 60)
    assert token not in log.read_text(errors="replace")
