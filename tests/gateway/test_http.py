"""The gateway app over real HTTP (aiohttp runner as in production), with a fake registry and a fake producer."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.app import build_app
from gateway.auth import parse_keys
from gateway.config import GatewayConfig, Limits
from gateway.server import make_runner
from tests.gateway.helpers import (
    WRITE_KEY,
    FakeProducer,
    FakeRegistry,
    batch,
    dumps,
    json_headers,
    page_view,
    zstd,
)
from tests.support.keys import key_entry
from tests.support.ports import free_port
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration  # real HTTP on a loopback socket: not a unit test
REVOKED = "hw_revoked-key-0123456789abcdefghijklmnopqrstuvwxyz"


def make_cfg(**overrides: Any) -> GatewayConfig:
    keys = parse_keys(f"{key_entry(WRITE_KEY)},{key_entry(REVOKED, 'old', revoked=True)}")
    cfg = GatewayConfig(host="127.0.0.1", port=free_port(), workers=1, bootstrap="unused:1",
                        registry_url="http://unused", keys=keys,
                        limits=Limits(max_ratio=20), commit_window_ms=1.0, body_timeout_s=0.5,
                        idle_timeout_s=0.5, conn_max_requests=3, conn_jitter=0.0)
    return replace(cfg, **overrides)


@asynccontextmanager
async def running(cfg: GatewayConfig, registry: FakeRegistry | None = None,
                  producers: list[FakeProducer] | None = None) -> AsyncIterator[str]:
    producers = [] if producers is None else producers

    def factory() -> FakeProducer:
        producers.append(FakeProducer())
        return producers[-1]

    app = build_app(cfg, source=registry or FakeRegistry(), factory=factory)
    runner = make_runner(app, cfg)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{cfg.port}"
    finally:
        await runner.cleanup()


def run(test: Callable[..., Awaitable[None]], **cfg: Any) -> Callable[[], None]:
    """Run `test(url, session, producers, registry)` against a fresh gateway."""
    def wrapper() -> None:
        async def main() -> None:
            producers: list[FakeProducer] = []
            registry = FakeRegistry()
            async with running(make_cfg(**cfg), registry, producers) as url, aiohttp.ClientSession(
                    auto_decompress=False) as session:
                await test(url, session, producers, registry)
        asyncio.run(main())
    return wrapper


def headers(encoding: str = "zstd", key: str | None = WRITE_KEY, ctype: str = "application/json") -> dict[str, str]:
    """helpers.json_headers with this module's write key as the default."""
    return json_headers(key, encoding, ctype)


async def post(session: aiohttp.ClientSession, url: str, body: bytes, hdrs: dict[str, str]) -> tuple[int, Any, Any]:
    async with session.post(url + "/v1/batch", data=body, headers=hdrs) as resp:
        return resp.status, await resp.json(content_type=None), resp.headers


async def _valid(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer], _r: FakeRegistry) -> None:
    doc = batch(page_view(0), page_view(1))
    status, body, _ = await post(s, url, zstd(dumps(doc)), headers())
    assert status == 200 and body == {"batch_id": doc["batch_id"], "accepted": 2, "rejected": []}
    status, _, _ = await post(s, url, gzip.compress(dumps(batch(page_view()))), headers("gzip"))
    assert status == 200
    basic = base64.b64encode(f"{WRITE_KEY}:".encode()).decode()
    status, _, _ = await post(s, url, dumps(batch(page_view())), {**headers("identity"),
                                                                   "Authorization": f"Basic {basic}"})
    assert status == 200
    records = [r for t in producers[0].committed for r in t]
    assert len(records) == 4 and all(r[0] == "headwater.events" for r in records)
    hdrs = dict(records[0][3])
    assert hdrs["client_ip"] == b"127.0.0.1" and hdrs["source"] == b"dev"
    status, again, replay = await post(s, url, zstd(dumps(doc)), headers())
    assert status == 200 and again["accepted"] == 2 and replay["X-Headwater-Replayed"] == "true"
    assert len([r for t in producers[0].committed for r in t]) == 4  # the retry wrote nothing


test_valid_batches = run(_valid)


async def _errors(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer], _r: FakeRegistry) -> None:
    good = dumps(batch(page_view()))
    bomb = b"\0" * 5_000_000
    cases = [
        (zstd(good), headers(key=None), 401, "missing_write_key"),
        (zstd(good), headers(key="hw_wrong"), 401, "invalid_write_key"),
        (zstd(good), headers(key=REVOKED), 403, "write_key_revoked"),
        (zstd(good), headers(ctype="text/plain"), 415, "unsupported_media_type"),
        (good, headers("br"), 415, "unsupported_encoding"),
        (zstd(bomb), headers(), 413, "ratio_too_large"),
        (gzip.compress(bomb), headers("gzip"), 413, "ratio_too_large"),
        (zstd(good)[:-4], headers(), 400, "invalid_compression"),
        (b"\x28\xb5\x2f\xfd" + b"junk" * 10, headers(), 400, "invalid_compression"),
        (zstd(b'{"a": NaN}'), headers(), 400, "invalid_json"),
        (zstd(dumps(batch(*[page_view(i) for i in range(41)]))), headers(), 413, "too_many_events"),
        (b"x" * (1024 * 1024 + 1), headers("identity"), 413, "body_too_large"),
    ]
    for body, hdrs, status, code in cases:
        got_status, got, _ = await post(s, url, body, hdrs)
        assert (got_status, got["code"]) == (status, code), (hdrs, got)
        assert set(got) == {"code", "message"}
    doc = batch(page_view(event_type="unknown_type"))
    status, body, _ = await post(s, url, zstd(dumps(doc)), headers())
    assert status == 422 and body["accepted"] == 0 and body["rejected"][0]["code"] == "unknown_event_type"
    committed = [r for t in producers[0].committed for r in t]
    assert [r[0] for r in committed] == ["headwater.deadletter"]  # only the dead letter of the 422


test_error_answers = run(_errors)


async def _slow(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    async def trickle() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b" "
            await asyncio.sleep(0.1)  # a slow client: the pace of its body is the test's input

    status, body, _ = await post(s, url, trickle(), headers("identity"))  # type: ignore[arg-type]
    assert status == 408 and body["code"] == "request_timeout"
    # Slow headers: the idle timeout closes a connection that never completes its request head.
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /v1/batch HTTP/1.1\r\nHost: x\r\n")
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    assert data == b""  # closed without an answer
    writer.close()


test_slow_clients_are_cut_off = run(_slow)


async def _recycle(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    seen = []
    for _ in range(3):
        async with s.get(url + "/livez") as resp:
            seen.append(resp.headers.get("Connection", "keep-alive").lower())
    assert seen == ["keep-alive", "keep-alive", "close"]


test_connection_closed_after_max_requests = run(_recycle)


async def _overload(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    status, body, hdrs = await post(s, url, zstd(dumps(batch(page_view()))), headers())
    assert status == 503 and body["code"] == "overloaded" and hdrs["Retry-After"] == "1"


test_inflight_cap_gives_503 = run(_overload, limits=Limits(max_inflight_bytes=10))


async def _kafka_down(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer], _r: FakeRegistry) -> None:
    from confluent_kafka import KafkaError, KafkaException

    producers[0].fail_commit = KafkaException(KafkaError(KafkaError._TIMED_OUT, "broker down (fake)"))
    status, body, hdrs = await post(s, url, zstd(dumps(batch(page_view()))), headers())
    assert status == 503 and body["code"] == "kafka_unavailable" and "Retry-After" in hdrs
    producers[0].fail_commit = None
    # The lane replaces its producer (the commit was in doubt) after answering: until the new one is ready every
    # batch gets the same 503 at once, then 200s, as a producer following Retry-After sees it.
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        status, body, hdrs = await post(s, url, zstd(dumps(batch(page_view()))), headers())
        if status == 200 or asyncio.get_running_loop().time() > deadline:
            break
        assert status == 503 and body["code"] == "kafka_unavailable" and "Retry-After" in hdrs
        await asyncio.sleep(0.05)
    assert status == 200


test_kafka_failure_gives_503_then_recovers = run(_kafka_down)


async def _registry_down(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], reg: FakeRegistry) -> None:
    reg.down = True
    status, body, hdrs = await post(s, url, zstd(dumps(batch(page_view(schema_version=77)))), headers())
    assert status == 503 and body["code"] == "registry_unavailable" and "Retry-After" in hdrs
    status, _, _ = await post(s, url, zstd(dumps(batch(page_view()))), headers())
    assert status == 200  # cached schemas keep serving while the registry is away


test_registry_failure_on_a_miss_gives_503 = run(_registry_down)


async def _ops(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    async with s.get(url + "/readyz") as resp:
        assert resp.status == 200 and (await resp.json())["checks"]["kafka"] is True
    await post(s, url, zstd(dumps(batch(page_view()))), headers())
    async with s.get(url + "/metrics") as resp:
        text = await resp.text()
    assert "headwater_gateway_commit_seconds_bucket" in text
    assert 'headwater_gateway_events_total{format="json",outcome="accepted"}' in text
    async with s.get(url + "/nope") as resp:
        assert resp.status == 404 and json.loads(await resp.text())["code"]


test_operations_endpoints = run(_ops)


def test_graceful_shutdown_finishes_in_flight_batches() -> None:
    async def main() -> None:
        cfg = make_cfg()
        producers: list[FakeProducer] = []

        def factory() -> FakeProducer:
            producers.append(FakeProducer())
            producers[-1].commit_delay = 0.5
            return producers[-1]

        app = build_app(cfg, source=FakeRegistry(), factory=factory)
        runner = make_runner(app, cfg)
        await runner.setup()
        await web.TCPSite(runner, cfg.host, cfg.port).start()
        url = f"http://127.0.0.1:{cfg.port}"
        async with aiohttp.ClientSession() as session:
            in_flight = asyncio.create_task(post(session, url, zstd(dumps(batch(page_view()))), headers()))
            await wait_until("the batch in the commit thread's transaction", lambda: producers and producers[0].open)
            await runner.cleanup()
            status, body, _ = await in_flight
        assert status == 200 and body["accepted"] == 1
        assert len(producers[0].committed) == 1
        with pytest.raises(aiohttp.ClientConnectionError):
            async with aiohttp.ClientSession() as session:
                await post(session, url, zstd(dumps(batch(page_view()))), headers())

    asyncio.run(main())


async def _concurrent_retry(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer],
                            _r: FakeRegistry) -> None:
    producers[0].commit_delay = 0.3
    body = zstd(dumps(batch(page_view(), page_view())))
    first, second = await asyncio.gather(post(s, url, body, headers()), post(s, url, body, headers()))
    assert first[0] == second[0] == 200 and first[1] == second[1]
    assert "true" in (first[2].get("X-Headwater-Replayed"), second[2].get("X-Headwater-Replayed"))
    assert sum(len(t) for t in producers[0].committed) == 2  # written once


test_concurrent_retry_waits_for_the_first_attempt = run(_concurrent_retry)


async def _not_ready(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer], _r: FakeRegistry) -> None:
    producers[0].unreachable = True
    async with s.get(url + "/readyz") as resp:
        body = await resp.json()
    assert resp.status == 503 and body == {"status": "not_ready", "registry_reachable": True,
                                           "checks": {"kafka": False, "schemas": True, "accepting": True}}


test_readyz_reports_an_unreachable_broker = run(_not_ready)


async def _rate(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer], _r: FakeRegistry) -> None:
    status, _, _ = await post(s, url, zstd(dumps(batch(*[page_view(i) for i in range(20)]))), headers())
    assert status == 200  # the burst: 2 s of 10 events/s
    status, body, hdrs = await post(s, url, zstd(dumps(batch(*[page_view(i) for i in range(5)]))), headers())
    assert status == 429 and body["code"] == "rate_limited" and int(hdrs["Retry-After"]) >= 1


test_source_rate_limit_gives_429 = run(_rate, limits=Limits(max_ratio=20, source_events_per_s=10))
