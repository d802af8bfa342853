"""Readiness means "can accept the traffic it will get" (issue 14 item 13): ready while cached schemas serve through
a registry outage; a cold worker does not listen before its first schema load."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from gateway.app import build_app
from gateway.handlers import GATEWAY
from gateway.server import make_runner
from tests.gateway.helpers import FakeProducer, FakeRegistry, batch, dumps, page_view, zstd
from tests.gateway.test_http import headers, make_cfg, post

pytestmark = pytest.mark.integration  # real sockets (fake registry and producer behind)


def test_ready_and_serving_through_a_registry_outage() -> None:
    async def main() -> None:
        cfg, registry = make_cfg(), FakeRegistry()
        app = build_app(cfg, source=registry, factory=FakeProducer)
        runner = make_runner(app, cfg)
        await runner.setup()
        await web.TCPSite(runner, cfg.host, cfg.port).start()
        url = f"http://127.0.0.1:{cfg.port}"
        try:
            registry.down = True
            await app[GATEWAY].cache.refresh()  # the periodic refresh fails
            async with aiohttp.ClientSession() as s:
                async with s.get(url + "/readyz") as resp:
                    body = await resp.json()
                assert resp.status == 200 and body["registry_reachable"] is False, body
                assert body["checks"] == {"kafka": True, "schemas": True, "accepting": True}
                status, answer, _ = await post(s, url, zstd(dumps(batch(page_view()))), headers())
                assert status == 200 and answer["accepted"] == 1
        finally:
            await runner.cleanup()

    asyncio.run(main())


def test_a_cold_worker_does_not_listen_before_its_first_schema_load() -> None:
    async def main() -> None:
        cfg, registry = make_cfg(), FakeRegistry()
        registry.down = True
        runner = make_runner(build_app(cfg, source=registry, factory=FakeProducer), cfg)
        setup = asyncio.create_task(runner.setup())  # serve() listens only after this returns
        await asyncio.sleep(1.5)
        assert not setup.done()
        registry.down = False
        await asyncio.wait_for(setup, 20)
        await runner.cleanup()

    asyncio.run(main())
