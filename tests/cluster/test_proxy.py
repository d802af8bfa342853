"""HAProxy in front of the gateways: X-Forwarded-For believed from HAProxy only, and a graceful reload under load."""

from __future__ import annotations

import http.client
import uuid

import pytest

from stack.launcher import Stack
from stack.topics import EVENTS_TOPIC
from tests.cluster.fleet import Fleet
from tests.gateway.helpers import batch, dumps, json_headers, page_view, zstd
from tests.support.kafka import consume_all, end_offsets

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]
CLIENT = "127.0.0.3"  # the test client's own loopback address, distinct from HAProxy's 127.0.0.2


def _post_from(client: str, port: int, env: dict[str, str], marker: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(client, 0))
    try:
        headers = {**json_headers(env["HEADWATER_WRITE_KEY"]), "X-Forwarded-For": "6.6.6.6"}
        conn.request("POST", "/v1/batch", zstd(dumps(batch(page_view(0, marker)))), headers)
        return conn.getresponse().status
    finally:
        conn.close()


def _client_ip(env: dict[str, str], marker: str, start: dict[int, int]) -> str:
    records = [r for r in consume_all(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC, start=start, expected_at_least=1)
               if marker.encode() in (r.value() or b"")]
    assert len(records) == 1, records
    value = dict(records[0].headers() or [])["client_ip"]
    return value.decode() if isinstance(value, bytes) else str(value)


def test_forwarded_for_is_believed_from_haproxy_only(cluster: tuple[Stack, dict[str, str]]) -> None:
    profile, env = cluster
    via_lb, direct = uuid.uuid4().hex, uuid.uuid4().hex
    start = end_offsets(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    assert _post_from(CLIENT, profile.cfg.gateway_port, env, via_lb) == 200
    # HAProxy appended the client's address after the forged one; the gateway takes the nearest untrusted hop.
    assert _client_ip(env, via_lb, start) == CLIENT
    start = end_offsets(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    assert _post_from(CLIENT, profile.cfg.gateway_ports[0], env, direct) == 200
    assert _client_ip(env, direct, start) == CLIENT  # not 6.6.6.6: the client itself is no trusted proxy


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
