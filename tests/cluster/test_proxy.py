"""HAProxy in front of the gateways: a graceful reload under load (X-Forwarded-For, believed from HAProxy's client
certificate only, is tested on the secured cluster: tests/cluster/test_secure_cluster.py)."""

from __future__ import annotations

import pytest

from stack.launcher import Stack
from tests.cluster.fleet import Fleet

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]


def test_haproxy_reload_under_load_drops_nothing(cluster: tuple[Stack, dict[str, str]]) -> None:
    """A master-worker reload (SIGUSR2) mid-load: the old worker finishes its connections, SDKs see only 200s."""
    profile, env = cluster
    master = profile.haproxy.process.pid()
    with Fleet(env, events=8000, rate=800.0) as fleet:
        fleet.wait_acked(2000)
        profile.haproxy.reload()
        fleet.wait_acked(4000)
        profile.haproxy.reload(profile.cfg.gateway_ports[1:])  # and one that takes gateway-1 out of the pool
        fleet.wait_acked(6000)
        profile.haproxy.reload()
        fleet.check("haproxy reloads")
    assert profile.haproxy.process.pid() == master
    assert set(fleet.statuses) <= {200, 503}, fleet.statuses
