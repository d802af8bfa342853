"""Proxies: the `proxy` option, and HTTP_PROXY / NO_PROXY from the environment (real HTTP on loopback)."""

from __future__ import annotations

import headwater
import pytest
from headwater import Urllib3Transport

from .local_gateway import LocalGateway

pytestmark = pytest.mark.integration
UNRESOLVABLE = "http://gateway.invalid:8080"  # reachable only through the proxy: .invalid never resolves


def test_the_proxy_option_carries_every_request() -> None:
    with LocalGateway() as proxy:  # answers the absolute-form requests a forward proxy receives
        with headwater.Client(UNRESOLVABLE, "k", proxy=proxy.url, linger_s=0.01, retry_deadline_s=30) as c:
            c.track("page_view", {"via": "proxy"})
            assert c.flush(30)
        assert [e["properties"] for e in proxy.events] == [{"via": "proxy"}]


def test_http_proxy_and_no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with LocalGateway() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "localhost,.internal.example")
        transport = Urllib3Transport()
        assert transport.proxy_for(UNRESOLVABLE + "/v1/batch") == proxy.url
        assert transport.proxy_for("http://localhost:8080/v1/batch") is None
        assert transport.proxy_for("http://gw.internal.example/v1/batch") is None
        with headwater.Client(UNRESOLVABLE, "k", linger_s=0.01, retry_deadline_s=30) as c:
            c.track("page_view", {"via": "env"})
            assert c.flush(30)
        assert [e["properties"] for e in proxy.events] == [{"via": "env"}]
    assert Urllib3Transport(trust_env=False).proxy_for(UNRESOLVABLE) is None
