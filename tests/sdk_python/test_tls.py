"""TLS (protocol.md §1): the system store by default, a private CA through `ca_bundle`, keep-alive over TLS."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import headwater
import pytest

from stack.certs import CertificateAuthority

from .local_gateway import LocalGateway

pytestmark = pytest.mark.integration


@pytest.fixture()
def tls(tmp_path: Path) -> Iterator[tuple[LocalGateway, Path]]:
    """A local gateway serving TLS with a certificate of a private CA, and that CA's PEM file."""
    ca = CertificateAuthority(tmp_path / "tls")
    leaf = ca.issue("gateway")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(leaf.cert), str(leaf.key))
    with LocalGateway(ssl_context=context) as gw:
        yield gw, ca.pem


def test_a_private_ca_given_as_ca_bundle_delivers_on_one_kept_alive_connection(
        tls: tuple[LocalGateway, Path]) -> None:
    gw, ca = tls
    with headwater.Client(gw.url, "k", ca_bundle=str(ca), max_in_flight=1, max_batch_events=1, linger_s=0.001) as c:
        for i in range(20):
            c.track("page_view", {"i": i})
            assert c.flush(10)
    assert len(gw.events) == 20
    assert len(gw.peers) == 1  # keep-alive holds over TLS


def test_the_system_store_refuses_an_unknown_ca(tls: tuple[LocalGateway, Path]) -> None:
    gw, _ = tls
    errors: list[Exception] = []
    c = headwater.Client(gw.url, "k", linger_s=0.001, retry_base_s=0.005, retry_max_s=0.02, retry_deadline_s=0.3,
                         on_error=errors.append)
    c.track("page_view", {})
    assert c.close(10) is False
    assert not gw.events
    assert any("CERTIFICATE_VERIFY_FAILED" in str(e) or "certificate" in str(e).lower() for e in errors), errors


def test_ca_bundle_must_be_a_readable_file(tmp_path: Path) -> None:
    with pytest.raises(headwater.ConfigError, match="ca_bundle"):
        headwater.Client("https://gw.test", "k", ca_bundle=str(tmp_path / "missing.pem"))
    env = {"HEADWATER_ENDPOINT": "https://gw.test", "HEADWATER_WRITE_KEY": "k",
           "HEADWATER_CA_BUNDLE": str(tmp_path / "missing.pem")}
    with pytest.raises(headwater.ConfigError, match="HEADWATER_CA_BUNDLE"):
        headwater.ClientConfig.from_env(env)
