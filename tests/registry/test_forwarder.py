"""The follower's client to its primary against a scripted primary on loopback (real HTTP and TLS): the certificate
is verified, only the caller's own headers go through, and every way of not getting a registry answer is a 503."""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from registry.config import FollowerConfig
from registry.errors import PrimaryUnavailable
from registry.follower import FORWARDED_BY, Forwarder
from tests.certs import TestCA
from tests.support.ports import free_port

pytestmark = pytest.mark.integration
JSON = "application/vnd.schemaregistry.v1+json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def primary(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """A stand-in primary answering every request with `handler`; its base URL."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls).start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def forwarder(url: str, ca: str = "", timeout_s: float = 5.0) -> AsyncIterator[Forwarder]:
    fwd = Forwarder(FollowerConfig(url, ca, timeout_s, 0.0))
    await fwd.start()
    try:
        yield fwd
    finally:
        await fwd.close()


async def echo(request: web.Request) -> web.Response:
    """What the primary received, as a registry answer."""
    return web.json_response({"method": request.method, "path": request.path_qs, "body": await request.text(),
                              "headers": dict(request.headers)}, status=200, content_type=JSON)


def test_the_callers_credentials_and_body_go_through_and_nothing_else(tmp_path: Path) -> None:
    async def main() -> None:
        async with primary(echo) as url, forwarder(url + "/") as fwd:
            answer = await fwd.forward("POST", "/subjects/s/versions?normalize=true", b'{"schema": "\\"int\\""}',
                                       {"Authorization": "Basic dTpw", "Content-Type": JSON, "Cookie": "session=1",
                                        "Origin": "https://elsewhere", "X-Forwarded-For": "10.0.0.1"},
                                       idempotent=True)
            got = answer.json()
            assert answer.status == 200 and answer.content_type.startswith(JSON)
            assert (got["method"], got["path"], got["body"]) == ("POST", "/subjects/s/versions?normalize=true",
                                                                 '{"schema": "\\"int\\""}')
            sent = {k.lower(): v for k, v in got["headers"].items()}
            assert sent["authorization"] == "Basic dTpw" and sent["content-type"] == JSON
            assert sent[FORWARDED_BY.lower()] == "follower"
            assert not {"cookie", "origin", "x-forwarded-for"} & set(sent)

    asyncio.run(main())


def test_the_primarys_refusal_is_passed_on_with_its_challenge() -> None:
    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error_code": 401, "message": "Unauthorized"}, status=401, content_type=JSON,
                                 headers={"WWW-Authenticate": 'Basic realm="r"', "Set-Cookie": "x=1"})

    async def main() -> None:
        async with primary(refuse) as url, forwarder(url) as fwd:
            answer = await fwd.forward("DELETE", "/subjects/s", b"", {}, idempotent=False)
            assert (answer.status, answer.json()["error_code"]) == (401, 401)
            assert answer.headers == {"WWW-Authenticate": 'Basic realm="r"'}

    asyncio.run(main())


def test_an_https_primary_is_verified_against_the_configured_ca(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "ca")
    issued = ca.issue("primary")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(issued.cert, issued.key)

    async def main() -> None:
        async with primary(echo, tls) as url:
            async with forwarder(url, str(ca.pem)) as fwd:
                answer = await fwd.forward("PUT", "/config", b"{}", {"Content-Type": JSON}, idempotent=True)
                assert answer.status == 200
            async with forwarder(url) as fwd:  # the system store does not know the test CA
                with pytest.raises(PrimaryUnavailable, match=r"its certificate was not accepted.*CERTIFICATE_VERIFY"):
                    await fwd.forward("PUT", "/config", b"{}", {"Content-Type": JSON}, idempotent=True)

    asyncio.run(main())


@pytest.mark.parametrize(("idempotent", "requests", "status"), [(True, 2, 200), (False, 1, 503)])
def test_a_connection_dropped_unanswered_is_retried_once_only_for_idempotent_writes(idempotent: bool, requests: int,
                                                                                     status: int) -> None:
    seen: list[str] = []

    async def drop_first(request: web.Request) -> web.StreamResponse:
        seen.append(request.method)
        if len(seen) == 1:
            assert request.transport is not None
            request.transport.close()  # as a primary restarting under a pooled connection
            return web.Response()
        return await echo(request)

    async def main() -> None:
        async with primary(drop_first) as url, forwarder(url) as fwd:
            try:
                got = (await fwd.forward("POST", "/subjects/s/versions", b"{}", {"Content-Type": JSON},
                                         idempotent=idempotent)).status
            except PrimaryUnavailable as exc:
                assert "closed the connection" in str(exc)
                got = exc.status
        assert (got, len(seen)) == (status, requests)

    asyncio.run(main())


@pytest.mark.parametrize(("behaviour", "reason"), [
    ("html", r"answered HTTP 502 with 'text/html', not a registry answer"),
    ("slow", r"no answer within 0.5 s"),
    ("down", r"ClientConnectorError"),
])
def test_no_registry_answer_is_a_503_naming_the_primary(behaviour: str, reason: str) -> None:
    async def answer(request: web.Request) -> web.Response:
        if behaviour == "slow":
            await asyncio.sleep(2)
        return web.Response(text="<html>bad gateway</html>", status=502, content_type="text/html")

    async def main() -> None:
        async with primary(answer) as url:
            target = url if behaviour != "down" else f"http://127.0.0.1:{free_port()}"
            async with forwarder(target, timeout_s=0.5) as fwd:
                with pytest.raises(PrimaryUnavailable) as info:
                    await fwd.forward("POST", "/subjects/s/versions", b"{}", {"Content-Type": JSON}, idempotent=True)
        error: Any = info.value
        assert (error.status, error.code) == (503, 50301)
        assert f"the primary registry at {target} cannot be reached" in str(error)
        assert "needs the primary region" in str(error)
        assert re.search(reason, str(error)), str(error)

    asyncio.run(main())
