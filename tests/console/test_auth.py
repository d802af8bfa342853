"""The console beyond loopback: it refuses to start without a users file and TLS, and then serves nothing but
/healthz without valid credentials (real HTTPS on loopback; the Kafka view replaced by a fake)."""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from common.basic_auth import hash_password
from common.tls import client_context
from console.app import make_app
from console.config import ConfigError, ConsoleConfig
from console.kafka_view import KafkaFigures
from tests.certs import TestCA
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


class FakeKafka:
    def poll(self) -> KafkaFigures:
        return KafkaFigures()

    def close(self) -> None:
        pass


def secured(tmp_path: Path) -> tuple[dict[str, str], TestCA]:
    ca = TestCA(tmp_path / "ca")
    cert = ca.issue("console")
    users = tmp_path / "users"
    users.write_text(f"ops:view:{hash_password('ops-pw', iterations=1000)}\n")
    return {"HEADWATER_CONSOLE_HOST": "0.0.0.0", "HEADWATER_CONSOLE_USERS_FILE": str(users),
            "HEADWATER_CONSOLE_TLS_CERT": str(cert.cert), "HEADWATER_CONSOLE_TLS_KEY": str(cert.key),
            "HEADWATER_CONSOLE_PORT": str(free_port())}, ca


def test_beyond_loopback_it_needs_users_and_tls(tmp_path: Path) -> None:
    env, _ = secured(tmp_path)
    with pytest.raises(ConfigError, match="HEADWATER_CONSOLE_USERS_FILE"):
        ConsoleConfig.from_env({k: v for k, v in env.items() if k != "HEADWATER_CONSOLE_USERS_FILE"})
    with pytest.raises(ConfigError, match="HEADWATER_CONSOLE_TLS_CERT"):
        ConsoleConfig.from_env({k: v for k, v in env.items() if "TLS" not in k})
    plain = ConsoleConfig.from_env({**{k: v for k, v in env.items() if "TLS" not in k},
                                    "HEADWATER_CONSOLE_PLAIN_HTTP": "1"})
    assert plain.tls is None and plain.users_file
    assert ConsoleConfig.from_env({}).users_file == ""  # loopback: open, as before
    (tmp_path / "bad").write_text("ops:admin:x\n")
    with pytest.raises(ConfigError, match="line 1"):
        ConsoleConfig.from_env({**env, "HEADWATER_CONSOLE_USERS_FILE": str(tmp_path / "bad")})


def test_every_page_but_healthz_needs_credentials(tmp_path: Path) -> None:
    env, ca = secured(tmp_path)
    cfg = ConsoleConfig.from_env(env)

    async def main() -> None:
        runner = web.AppRunner(make_app(cfg, FakeKafka()))  # type: ignore[arg-type]
        await runner.setup()
        assert cfg.tls is not None
        await web.TCPSite(runner, "127.0.0.1", cfg.port, ssl_context=cfg.tls.context()).start()
        url = f"https://localhost:{cfg.port}"
        good = "Basic " + base64.b64encode(b"ops:ops-pw").decode()
        bad = "Basic " + base64.b64encode(b"ops:guess").decode()
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_context(str(ca.pem)))) as s:
                for path in ("/", "/api/snapshot", "/metrics", "/static/console.js"):
                    async with s.get(url + path) as resp:
                        assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Basic"), path
                    async with s.get(url + path, headers={"Authorization": bad}) as resp:
                        assert resp.status == 401, path
                async with s.get(url + "/healthz") as resp:
                    assert resp.status == 200
                for path in ("/", "/api/snapshot", "/metrics"):
                    async with s.get(url + path, headers={"Authorization": good}) as resp:
                        assert resp.status == 200, path
            async with aiohttp.ClientSession() as plain:
                with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
                    await plain.get(f"http://localhost:{cfg.port}/")
        finally:
            await runner.cleanup()

    asyncio.run(main())
