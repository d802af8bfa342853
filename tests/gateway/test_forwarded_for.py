"""client_ip: X-Forwarded-For believed only from a trusted proxy, every header line of it read (issue 18)."""

from __future__ import annotations

from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from gateway.connections import client_ip

pytestmark = pytest.mark.unit
PROXY = frozenset({"127.0.0.2"})


def _request(peer: str, *forwarded: str) -> web.Request:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (peer, 4321) if name == "peername" else default
    headers = CIMultiDict(("X-Forwarded-For", value) for value in forwarded)
    return make_mocked_request("POST", "/v1/batch", headers=headers, transport=transport)


def test_a_proxy_line_added_after_a_forged_one_wins() -> None:
    # HAProxy's `option forwardfor` adds its own line after the one the client sent.
    assert client_ip(_request("127.0.0.2", "6.6.6.6", "10.1.2.3"), PROXY) == "10.1.2.3"
    assert client_ip(_request("127.0.0.2", "6.6.6.6, 10.1.2.3"), PROXY) == "10.1.2.3"


def test_forwarded_for_from_an_untrusted_peer_is_ignored() -> None:
    assert client_ip(_request("10.9.9.9", "6.6.6.6"), PROXY) == "10.9.9.9"
    assert client_ip(_request("127.0.0.2"), PROXY) == "127.0.0.2"
