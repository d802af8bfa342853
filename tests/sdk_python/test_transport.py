"""The urllib3 transport over real HTTP: keep-alive, recycling by age, errors translated at the boundary."""

from __future__ import annotations

import json

import headwater
import pytest
from headwater import Request, Urllib3Transport

from tests.support.ports import free_port

from .local_gateway import LocalGateway

pytestmark = pytest.mark.integration


def batch_request(url: str) -> Request:
    body = json.dumps({"batch_id": "b", "sent_at": 1, "events": []}).encode()
    return Request("POST", url + "/v1/batch", {"Content-Type": "application/json"}, body)


def test_connections_are_kept_alive_and_recycled_by_age() -> None:
    with LocalGateway() as gw:
        kept = Urllib3Transport(max_age_s=3600)
        for _ in range(5):
            assert kept.send(batch_request(gw.url), 10).status == 200
        kept.close()
        assert len(gw.peers) == 1
        gw.peers.clear()
        recycled = Urllib3Transport(max_age_s=1e-9)
        for _ in range(3):
            assert recycled.send(batch_request(gw.url), 10).status == 200
        recycled.close()
        assert len(gw.peers) == 3


def test_status_and_headers_come_back_and_errors_become_transport_errors() -> None:
    with LocalGateway() as gw:
        gw.fail_with = 503
        resp = Urllib3Transport().send(batch_request(gw.url), 10)
        assert resp.status == 503 and resp.headers["retry-after"] == "0"
    port = free_port()
    with pytest.raises(headwater.TransportError):
        Urllib3Transport().send(batch_request(f"http://127.0.0.1:{port}"), 2)
