"""Hostile clients over real HTTP, protocol details (issue 14, items 10 and 11): a client gone mid-body, 405 with
Allow, `Expect` after authentication, huge numbers in ignored fields, reused batch ids. Each fails without its fix.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.gateway.helpers import WRITE_KEY, FakeProducer, FakeRegistry, avro_batch, batch, dumps, page_view, zstd
from tests.gateway.hostile import LogCapture, avro_event_bytes, capture_logs, http_request, n, raw_http, records
from tests.gateway.test_http import headers, post, run

pytestmark = pytest.mark.integration


@pytest.fixture
def captured() -> Iterator[LogCapture]:
    yield from capture_logs()


# 10. A client gone mid-body: its own code, one log line, no 500 -------------------------------------------------

async def _counts(s: aiohttp.ClientSession, url: str) -> tuple[float, float]:
    """(client_disconnected answers, 500 answers) of /v1/batch so far, from /metrics (process-wide counters)."""
    async with s.get(url + "/metrics") as resp:
        text = await resp.text()
    gone = errors = 0.0
    for line in text.splitlines():
        if line.startswith("headwater_gateway_requests_total{") and 'path="/v1/batch"' in line:
            if 'code="client_disconnected"' in line and 'status="499"' in line:
                gone += float(line.rsplit(" ", 1)[1])
            if 'status="500"' in line:
                errors += float(line.rsplit(" ", 1)[1])
    return gone, errors


def test_client_disconnect_mid_body_is_counted_apart(captured: LogCapture) -> None:
    clients = n(3, 50)

    async def check(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
        host, port = url.removeprefix("http://").split(":")
        gone0, errors0 = await _counts(s, url)
        for _ in range(clients):
            _reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(http_request(b"x" * 10_000)[:-9_000])  # head and 1,000 of the 10,000 bytes declared
            await writer.drain()
            await asyncio.sleep(0.1)
            writer.close()
        for _ in range(100):  # the handlers see the disconnection asynchronously
            gone, errors = await _counts(s, url)
            if gone - gone0 >= clients:
                break
            await asyncio.sleep(0.1)
        assert (gone - gone0, errors - errors0) == (clients, 0)
        status, _, _ = await post(s, url, zstd(dumps(batch(page_view()))), headers())
        assert status == 200

    run(check)()
    gone = [line for line in captured.lines if "client_disconnected" in line or "onnection" in line]
    assert len(gone) == clients, gone  # one line each
    assert not [line for line in captured.lines if '"level": "error"' in line or "Traceback" in line]


# 11. 405 with Allow, Expect after authentication, numbers in ignored fields, reused batch ids ----------------------

async def _allow(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    async with s.get(url + "/v1/batch") as resp:
        assert resp.status == 405 and resp.headers["Allow"] == "POST"
        assert (await resp.json())["code"] == "method_not_allowed"


test_405_names_the_allowed_method = run(_allow)


async def _expect(url: str, _s: aiohttp.ClientSession, producers: list[FakeProducer], _r: FakeRegistry) -> None:
    body = zstd(dumps(batch(page_view())))
    head = http_request(body, "Content-Encoding: zstd\r\nExpect: 100-continue\r\n")[:-len(body)]
    for auth in ("", "Authorization: Bearer hw_wrong\r\n"):
        status, _, answer = await raw_http(url, head.replace(f"Authorization: Bearer {WRITE_KEY}\r\n".encode(),
                                                             auth.encode()))
        assert status == 401 and json.loads(answer)["code"] in ("missing_write_key", "invalid_write_key")
    status, _, answer = await raw_http(url, head.replace(b"100-continue", b"200-ok"))
    assert status == 417 and json.loads(answer)["code"] == "expectation_failed"
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head)
    await writer.drain()
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert interim.startswith(b"HTTP/1.1 100 Continue")
    writer.write(body)
    await writer.drain()
    final = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert final.startswith(b"HTTP/1.1 200"), final
    writer.close()
    assert len(records(producers)) == 1


test_100_continue_only_after_authentication = run(_expect)


async def _ignored(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer], _r: FakeRegistry) -> None:
    huge = "123456789012345678901234567890"
    bodies = [
        dumps(batch(page_view())).replace(b'"sent_at"', b'"future": 1e400, "sent_at"'),
        dumps(batch(page_view())).replace(b'"sent_at"', f'"future": [{{"n": {huge}}}], "sent_at"'.encode()),
        dumps(batch(page_view())).replace(b'"version": "0"', f'"version": "0", "build": -{huge}'.encode()),
        dumps(batch(page_view())).replace(b'"seq"', f'"extra": {huge}, "seq"'.encode()),
        dumps(batch(page_view())).replace(b'"seq"', b'"extra": {"x": -1e999}, "seq"'),
    ]
    for body in bodies:
        status, answer, _ = await post(s, url, zstd(body), headers())
        assert (status, answer.get("code")) == (400, "invalid_number"), (body[:200], answer)
    ok = dumps(batch(page_view())).replace(b'"seq"', b'"extra": {"x": [1, 2.5e10, "1e400"]}, "seq"')
    status, _, _ = await post(s, url, zstd(ok), headers())
    assert status == 200  # unknown fields with ordinary numbers are still ignored
    assert len(records(producers)) == 1


test_huge_numbers_in_ignored_fields_are_400 = run(_ignored)


async def _reuse(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer], _r: FakeRegistry) -> None:
    batch_id = str(uuid.uuid4())
    first = batch(page_view(0), page_view(1), batch_id=batch_id)
    status, _, _ = await post(s, url, zstd(dumps(first)), headers())
    assert status == 200
    status, answer, hdrs = await post(s, url, gzip.compress(dumps(first)), headers("gzip"))  # a true retry
    assert status == 200 and hdrs["X-Headwater-Replayed"] == "true"
    other = batch(page_view(2), batch_id=batch_id)
    status, answer, _ = await post(s, url, zstd(dumps(other)), headers())
    assert (status, answer["code"]) == (409, "batch_id_reused")
    avro_other = avro_batch([avro_event_bytes(_r)], batch_id=batch_id)
    status, answer, _ = await post(s, url, zstd(avro_other), headers(ctype="application/vnd.headwater.batch+avro"))
    assert (status, answer["code"]) == (409, "batch_id_reused")
    assert len(records(producers)) == 2  # only the first attempt wrote


test_reused_batch_id_with_other_events_is_409 = run(_reuse)


def test_openapi_states_the_event_type_pattern() -> None:
    text = (Path(__file__).resolve().parents[2] / "sdk-specs" / "openapi.yaml").read_text()
    event_type = text[text.index("        event_type:\n"):][:200]
    assert 'pattern: "^[a-z][a-z0-9_]{0,63}$"' in event_type
