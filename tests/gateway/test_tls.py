"""The gateway serving HTTPS itself (real TLS on loopback, the production runner and sites; fake registry and
producer): batches accepted, keep-alive and connection recycling over TLS, X-Forwarded-For believed only from a
proxy that showed a trusted client certificate or came through the unix socket, certificates reloaded on SIGHUP."""

from __future__ import annotations

import asyncio
import os
import ssl
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from common.tls import ServerTls, client_context
from gateway.app import build_app
from gateway.config import GatewayConfig
from gateway.loop import run
from gateway.proxy_socket import bind_proxy_socket
from gateway.server import _reload_tls, make_runner, sites
from tests.certs import TestCA
from tests.gateway.helpers import FakeProducer, FakeRegistry, batch, dumps, page_view, zstd
from tests.gateway.test_http import headers, make_cfg

pytestmark = pytest.mark.integration
PROXY_NAME = "haproxy.headwater"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("gateway-tls"))


def tls_cfg(ca: TestCA, **overrides: object) -> GatewayConfig:
    server = ca.issue("gateway")
    tls = ServerTls(str(server.cert), str(server.key), client_ca=str(ca.pem))
    return replace(make_cfg(trusted_proxies=frozenset({PROXY_NAME}), tls=tls), **overrides)  # type: ignore[arg-type]


@asynccontextmanager
async def serving(cfg: GatewayConfig, producers: list[FakeProducer]) -> AsyncIterator[ssl.SSLContext]:
    """The gateway on cfg.port over TLS (and cfg.proxy_socket); yields its server context (for reloads)."""
    def factory() -> FakeProducer:
        producers.append(FakeProducer())
        return producers[-1]

    runner = make_runner(build_app(cfg, source=FakeRegistry(), factory=factory), cfg)
    await runner.setup()
    assert cfg.tls is not None
    server_ctx = cfg.tls.context()
    proxy = bind_proxy_socket(cfg.proxy_socket) if cfg.proxy_socket else None
    for site in sites(runner, cfg, server_ctx, proxy):
        await site.start()
    try:
        yield server_ctx
    finally:
        await runner.cleanup()


def client_ssl(ca: TestCA, cert_name: str | None = None, other_ca: TestCA | None = None) -> ssl.SSLContext:
    ctx = client_context(str(ca.pem))
    if cert_name is not None:
        issued = (other_ca or ca).issue(cert_name, usage="client")
        ctx.load_cert_chain(str(issued.cert), str(issued.key))
    return ctx


async def send(session: aiohttp.ClientSession, url: str, *forwarded: str) -> tuple[int, str]:
    extra = {"X-Forwarded-For": ", ".join(forwarded)} if forwarded else {}
    async with session.post(url + "/v1/batch", data=zstd(dumps(batch(page_view()))),
                            headers={**headers(), **extra}) as resp:
        await resp.read()
        return resp.status, resp.headers.get("Connection", "")


def client_ips(producers: list[FakeProducer]) -> list[bytes]:
    return [dict(r[3])["client_ip"] for p in producers for t in p.committed for r in t]


def test_batches_over_tls_keep_alive_and_recycling(ca: TestCA) -> None:
    cfg = tls_cfg(ca, conn_max_requests=3)

    async def main() -> None:
        producers: list[FakeProducer] = []
        async with serving(cfg, producers):
            url = f"https://localhost:{cfg.port}"
            conn = aiohttp.TCPConnector(ssl=client_ssl(ca), limit=1)
            async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as session:
                answers = [await send(session, url) for _ in range(4)]
            assert [a[0] for a in answers] == [200] * 4
            # The 3rd request on the kept-alive TLS connection is its last (conn_max_requests=3); the 4th opened a
            # new connection, so the server saw two connections, each with more than one request before closing.
            assert [a[1].lower() == "close" for a in answers] == [False, False, True, False]
            async with aiohttp.ClientSession() as plain:  # plain HTTP on the TLS port gets no answer
                with pytest.raises(aiohttp.ClientError):
                    await send(plain, f"http://localhost:{cfg.port}")
            stranger = TestCA(Path(cfg.tls.cert).parent / "stranger", "stranger CA")  # type: ignore[union-attr]
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_context(str(stranger.pem)))) \
                    as untrusting:  # a client that does not trust the gateway's CA refuses it
                with pytest.raises(aiohttp.ClientConnectorCertificateError):
                    await send(untrusting, url)
        assert len(client_ips(producers)) == 4

    run(main(), True)  # uvloop, as in production (its TLS transport differs from asyncio's)


@pytest.mark.parametrize(("who", "believed"), [
    ("proxy", True),          # a client certificate named as a trusted proxy, signed by the CA
    ("no certificate", False),  # SDKs connecting directly
    ("other name", False),    # a valid certificate of another name
])
def test_forwarded_for_is_believed_only_from_a_proxy_certificate(ca: TestCA, who: str, believed: bool) -> None:
    cfg = tls_cfg(ca)
    name = {"proxy": PROXY_NAME, "no certificate": None, "other name": "some-producer"}[who]

    async def main() -> None:
        producers: list[FakeProducer] = []
        async with serving(cfg, producers):
            conn = aiohttp.TCPConnector(ssl=client_ssl(ca, name))
            async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as session:
                assert (await send(session, f"https://localhost:{cfg.port}", "6.6.6.6", "10.1.2.3"))[0] == 200
        assert client_ips(producers) == [b"10.1.2.3" if believed else b"127.0.0.1"]

    run(main(), True)  # uvloop, as in production (its TLS transport differs from asyncio's)


def test_a_proxy_certificate_from_another_ca_is_refused_at_the_handshake(ca: TestCA, tmp_path: Path) -> None:
    cfg = tls_cfg(ca)
    forger = TestCA(tmp_path / "forger", "forger CA")

    async def main() -> None:
        async with serving(cfg, []):
            conn = aiohttp.TCPConnector(ssl=client_ssl(ca, PROXY_NAME, other_ca=forger))
            async with aiohttp.ClientSession(connector=conn) as session:
                with pytest.raises(aiohttp.ClientError):
                    await send(session, f"https://localhost:{cfg.port}", "6.6.6.6")

    run(main(), True)  # uvloop, as in production (its TLS transport differs from asyncio's)


def test_the_proxy_unix_socket_is_believed_and_closed_to_others(ca: TestCA, tmp_path: Path) -> None:
    cfg = tls_cfg(ca, proxy_socket=str(tmp_path / "gateway.sock"))

    async def main() -> None:
        producers: list[FakeProducer] = []
        async with serving(cfg, producers):
            mode = stat.S_IMODE(os.stat(cfg.proxy_socket).st_mode)
            assert mode & 0o007 == 0, oct(mode)  # no access for other users
            unix = aiohttp.UnixConnector(path=cfg.proxy_socket)
            async with aiohttp.ClientSession(connector=unix, auto_decompress=False) as session:
                assert (await send(session, "http://gateway", "6.6.6.6", "10.1.2.3"))[0] == 200
            tcp = aiohttp.TCPConnector(ssl=client_ssl(ca))
            async with aiohttp.ClientSession(connector=tcp, auto_decompress=False) as session:
                assert (await send(session, f"https://localhost:{cfg.port}", "10.1.2.3"))[0] == 200
        assert client_ips(producers) == [b"10.1.2.3", b"127.0.0.1"]

    run(main(), True)  # uvloop, as in production (its TLS transport differs from asyncio's)


def test_a_stale_socket_file_is_replaced_but_another_file_is_not(tmp_path: Path) -> None:
    path = tmp_path / "gateway.sock"
    bind_proxy_socket(str(path)).close()  # left behind, as by a killed gateway
    bind_proxy_socket(str(path)).close()
    other = tmp_path / "notes.txt"
    other.write_text("keep me")
    with pytest.raises(OSError, match="exists and is not a socket"):
        bind_proxy_socket(str(other))
    assert other.read_text() == "keep me"


def test_sighup_reload_serves_the_rotated_certificate_to_new_connections(ca: TestCA) -> None:
    cfg = tls_cfg(ca)

    async def serial() -> int:
        _, writer = await asyncio.open_connection("127.0.0.1", cfg.port, ssl=client_ssl(ca),
                                                  server_hostname="localhost")
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        await writer.wait_closed()
        from cryptography import x509
        return int(x509.load_der_x509_certificate(der).serial_number)

    async def main() -> None:
        async with serving(cfg, []) as server_ctx:
            before = await serial()
            rotated = ca.issue("gateway", renew=True)  # new key and certificate written over the same files
            assert cfg.tls is not None and rotated.cert == Path(cfg.tls.cert)
            _reload_tls(cfg, server_ctx)
            after = await serial()
            assert after != before
            Path(cfg.tls.key).write_text("not a key")
            _reload_tls(cfg, server_ctx)  # a bad file is logged; the previous certificate is still served
            assert await serial() == after

    run(main(), True)  # uvloop, as in production (its TLS transport differs from asyncio's)
