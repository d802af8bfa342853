"""client_ip: X-Forwarded-For believed only on a connection from an authenticated proxy (a verified TLS client
certificate of a trusted name, or the proxy's unix socket), never because of the peer's address."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from gateway.connections import client_ip

pytestmark = pytest.mark.unit
NAMES = frozenset({"haproxy.headwater"})
PROXY_CERT = {"subject": ((("commonName", "haproxy.headwater"),),), "subjectAltName": (("DNS", "localhost"),)}


def _request(peer: Any, *forwarded: str, cert: Any = None, sockname: Any = ("127.0.0.1", 8080)) -> web.Request:
    extra = {"peername": peer, "peercert": cert, "sockname": sockname}
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: extra.get(name, default)
    headers = CIMultiDict(("X-Forwarded-For", value) for value in forwarded)
    return make_mocked_request("POST", "/v1/batch", headers=headers, transport=transport)


def test_a_proxy_with_a_trusted_certificate_is_believed_for_the_hop_it_added() -> None:
    # HAProxy's `option forwardfor` adds its own line after the one the client sent: only that last hop counts.
    assert client_ip(_request(("127.0.0.1", 4321), "6.6.6.6", "10.1.2.3", cert=PROXY_CERT), NAMES) == "10.1.2.3"
    assert client_ip(_request(("127.0.0.1", 4321), "6.6.6.6, 10.1.2.3", cert=PROXY_CERT), NAMES) == "10.1.2.3"
    assert client_ip(_request(("127.0.0.1", 4321), cert=PROXY_CERT), NAMES) == "127.0.0.1"


def test_an_address_proves_nothing() -> None:
    """The attack: any local user binds 127.0.0.2 (the old trusted address) and forges X-Forwarded-For."""
    assert client_ip(_request(("127.0.0.2", 4321), "6.6.6.6"), NAMES) == "127.0.0.2"
    assert client_ip(_request(("127.0.0.2", 4321), "6.6.6.6"), frozenset({"127.0.0.2"})) == "127.0.0.2"


def test_a_certificate_of_another_name_or_none_is_not_trusted() -> None:
    sdk_cert = {"subject": ((("commonName", "some-producer"),),)}
    assert client_ip(_request(("10.0.0.9", 1), "6.6.6.6", cert=sdk_cert), NAMES) == "10.0.0.9"
    assert client_ip(_request(("10.0.0.9", 1), "6.6.6.6", cert={}), NAMES) == "10.0.0.9"
    assert client_ip(_request(("10.0.0.9", 1), "6.6.6.6", cert=PROXY_CERT), frozenset()) == "10.0.0.9"


def test_the_proxy_unix_socket_is_believed() -> None:
    request = _request("", "6.6.6.6", "10.1.2.3", sockname="/run/headwater/gateway.sock")
    assert client_ip(request, frozenset()) == "10.1.2.3"


def test_a_peer_without_address_on_a_tcp_socket_is_not_a_proxy() -> None:
    assert client_ip(_request(None, "6.6.6.6", sockname=("127.0.0.1", 8080)), NAMES) == ""
