"""After an outage, producers resume within seconds of the gateway listening again.

The gateway sits behind a TCP proxy that is switched off (connections refused) and on again. With the
default 30 s backoff cap, full jitter would make producers wait up to 30 s after the gateway came back; after a
refused connection the cap is `retry_refused_max_s` (2 s), and only one sender probes meanwhile.
"""

from __future__ import annotations

import time

import headwater
import pytest
from hwconformance.tcpproxy import CuttableProxy

from tests.support.wait import wait_for

from .local_gateway import LocalGateway

pytestmark = pytest.mark.integration


def test_producers_resume_within_seconds_after_a_refused_outage() -> None:
    with LocalGateway() as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        proxy = CuttableProxy(host, int(port))
        errors: list[Exception] = []
        c = headwater.Client(proxy.url, "k", linger_s=0.01, on_error=errors.append)  # default 30 s cap
        c.track("before", {})
        assert c.flush(30)
        proxy.cut()
        for i in range(200):
            c.track("during", {"i": i})
        # retried until the backoff reached its cap several times over (0.5, 1, 2, then 2 s at most)
        wait_for("6 retries", lambda: c.metrics().retries >= 6, 60, interval_s=0.005)
        proxy.restore()
        back = time.monotonic()
        assert c.flush(60)
        resumed_after = time.monotonic() - back
        assert c.close(10)
        proxy.cut()
    assert len([e for e in gw.events if e["event_type"] == "during"]) == 200
    assert resumed_after < 2.0 + 5.0, resumed_after  # the 2 s cap plus generous slack for a loaded machine
    assert [type(e) for e in errors] == [headwater.TransportError]  # the outage was reported once
