"""Hostile clients against the real gateway app over real HTTP (issue 14, security items): each test fails
without its fix. Counts are small by default; `HEADWATER_CHAOS=full` runs the full-size attacks (`make chaos`).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.config import Limits
from gateway.logs import JsonFormatter
from tests.conftest import free_port
from tests.gateway.helpers import (
    WRITE_KEY,
    FakeProducer,
    FakeRegistry,
    avro_batch,
    avro_event,
    avro_record,
    batch,
    dumps,
    page_view,
    zstd,
)
from tests.gateway.test_http import headers, post, run

pytestmark = pytest.mark.integration
FULL = os.environ.get("HEADWATER_CHAOS", "") == "full"
EMPTY_ZSTD_FRAME = bytes.fromhex("28b52ffd2000010000")
MiB = 1024 * 1024


def _n(small: int, full: int) -> int:
    return full if FULL else small


def _records(producers: list[FakeProducer]) -> list[Any]:
    return [r for t in producers[0].committed for r in t]


class _Capture(logging.Handler):
    """Every log line of every logger, formatted as the gateway writes them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter(0))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def captured() -> Iterator[_Capture]:
    root = logging.getLogger()
    handler, level = _Capture(), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def raw_http(url: str, data: bytes, timeout: float = 20.0) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes on a new connection; the server's answer (it closes after an error) as status, headers, body."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
    return int(lines[0].split()[1]), {k.strip().lower(): v.strip() for k, v in fields.items()}, body


def _request(body: bytes, extra: str = "", auth: str = f"Authorization: Bearer {WRITE_KEY}\r\n") -> bytes:
    return (f"POST /v1/batch HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n{auth}{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


# 1. Frame-count CPU blow-up -------------------------------------------------------------------------------------

async def _frame_bomb(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    zbomb = EMPTY_ZSTD_FRAME * (MiB // len(EMPTY_ZSTD_FRAME))
    member = gzip.compress(b"")
    gbomb = member * (MiB // len(member))
    attackers = _n(2, 8)
    legit = [post(s, url, zstd(dumps(batch(page_view(i)))), headers()) for i in range(_n(5, 50))]
    bombs = [post(s, url, zbomb if i % 2 == 0 else gbomb, headers("zstd" if i % 2 == 0 else "gzip"))
             for i in range(attackers)]
    t0 = time.perf_counter()
    answers = await asyncio.gather(*bombs, *legit)
    elapsed = time.perf_counter() - t0
    for status, body, _ in answers[:attackers]:
        assert (status, body["code"]) == (413, "too_many_frames")
    assert all(status == 200 for status, _, _ in answers[attackers:])
    print(f"frame bombs: {attackers} bombs + {len(legit)} legit batches answered in {elapsed:.2f}s")


test_frame_bombs_are_refused_cheaply = run(_frame_bomb)


# 3. Secrets in logs, JSON answers for the HTTP parser's errors, bounded log volume ---------------------------------

MALFORMED = [
    # bare LF line ends
    f"POST /v1/batch HTTP/1.1\nHost: gw\nAuthorization: Bearer {WRITE_KEY}\nContent-Length: 2\n\n{{}}".encode(),
    # a control character after the key
    _request(b"{}", auth=f"Authorization: Bearer {WRITE_KEY}\x01\r\n"),
    # white space before the colon
    _request(b"{}", auth=f"Authorization : Bearer {WRITE_KEY}\r\n"),
    # a header line over aiohttp's limit, holding the key
    _request(b"{}", auth=f"Authorization: Bearer {WRITE_KEY}{'x' * 9000}\r\n"),
]


def test_parser_errors_answer_json_and_never_log_the_key(captured: _Capture) -> None:
    async def check(url: str, _s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
        for data in MALFORMED:
            status, hdrs, body = await raw_http(url, data)
            assert status == 400 and hdrs["content-type"].startswith("application/json"), (status, hdrs, body)
            answer = json.loads(body)
            assert answer["code"] == "invalid_http" and set(answer) == {"code", "message"}
            assert WRITE_KEY.encode() not in body and len(body) < 300
        flood = _n(60, 2000)
        before, t0 = len(captured.lines), time.monotonic()
        for _ in range(flood):
            await raw_http(url, MALFORMED[2])
        flood_log = [json.loads(line) for line in captured.lines[before:]]
        # Rate-limited (http_errors.BUDGET: a burst of 20, then 5 a second); the dropped lines are counted.
        assert len(flood_log) <= 20 + 5 * (time.monotonic() - t0) + 1, len(flood_log)
        assert len(flood_log) + sum(doc["suppressed"] for doc in flood_log) <= flood
        assert all(len(json.dumps(doc)) < 400 for doc in flood_log)

    run(check)()
    assert captured.lines, "the errors must still be logged (bounded)"
    assert not [line for line in captured.lines if WRITE_KEY in line or "Traceback" in line]


# 4. Deep nesting inside properties ------------------------------------------------------------------------------

async def _deep(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer], _r: FakeRegistry) -> None:
    for depth in (325, 600, 998, 5000):
        event = page_view()
        event["properties"]["viewport"] = "DEEP"
        raw = dumps(batch(event)).replace(b'"DEEP"', b"[" * depth + b"1" + b"]" * depth)
        status, body, _ = await post(s, url, raw, headers("identity"))  # repetitive: over the ratio cap
        assert status in (400, 422), (depth, status, body)
        code = body["code"] if status == 400 else body["rejected"][0]["code"]
        assert code in ("too_deep", "invalid_properties"), (depth, body)
        assert len(json.dumps(body)) < 1000


test_deep_nesting_in_properties_is_a_4xx = run(_deep)


# 5. Reservation by declared Content-Length; identity bodies counted once -----------------------------------------

async def _headers_only(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    host, port = url.removeprefix("http://").split(":")
    hogs = []
    for _ in range(_n(8, 160)):  # each declares 1 MiB and sends nothing; the budget is 4 MiB
        _reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(_request(b"")[:-len(b"Content-Length: 0\r\n\r\n")] + f"Content-Length: {MiB}\r\n\r\n".encode())
        await writer.drain()
        hogs.append(writer)
    await asyncio.sleep(0.3)  # the hogs' requests are in their handlers, waiting for bodies
    try:
        answers = await asyncio.gather(*[post(s, url, zstd(dumps(batch(page_view(i)))), headers())
                                         for i in range(_n(10, 500))])
        assert [a[0] for a in answers] == [200] * len(answers), [a[1] for a in answers if a[0] != 200][:3]
    finally:
        for writer in hogs:
            writer.close()


test_declared_lengths_reserve_nothing = run(_headers_only, limits=Limits(max_ratio=20, max_inflight_bytes=4 * MiB),
                                            body_timeout_s=10.0, idle_timeout_s=10.0)

IDENTITY_BODY = dumps(batch(page_view()))


async def _identity(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    status, body, _ = await post(s, url, IDENTITY_BODY, headers("identity"))
    assert status == 200, body  # counted twice, the body alone would be over the budget


test_identity_body_is_counted_once = run(
    _identity, limits=Limits(max_ratio=20, max_inflight_bytes=len(IDENTITY_BODY) * 3 // 2))


# 7. A batch larger than the rate limit's burst is admitted (no livelock) --------------------------------------------

async def _rate(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    big = zstd(dumps(batch(*[page_view(i) for i in range(40)])))  # the burst holds 10
    status, body, _ = await post(s, url, big, headers())
    assert status == 200, body
    status, body, hdrs = await post(s, url, zstd(dumps(batch(page_view()))), headers())
    assert status == 429 and body["code"] == "rate_limited" and int(hdrs["Retry-After"]) >= 1


test_batch_over_the_burst_is_admitted_once_the_bucket_is_full = run(
    _rate, limits=Limits(max_ratio=20, source_events_per_s=5))


# 8. The Avro path makes the JSON path's envelope checks ----------------------------------------------------------

def _avro_event(registry: FakeRegistry, **overrides: Any) -> bytes:
    sid = registry.id_of("page_view", 2)
    return avro_event(registry.by_id[sid]["schema"], sid, avro_record(page_view(**overrides)))


async def _avro_envelope(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer],
                         registry: FakeRegistry) -> None:
    avro = headers("identity", ctype="application/vnd.headwater.batch+avro")
    bad: list[dict[str, Any]] = [{"event_id": "not-a-uuid"}, {"producer_id": "x" * 36}, {"seq": -1}, {"created_at": -5},
           {"node_id": "n" * 60_000}]
    for overrides in bad:
        status, body, _ = await post(s, url, avro_batch([_avro_event(registry, **overrides)]), avro)
        assert (status, body.get("code")) == (400, "invalid_envelope"), (overrides, status, body)
    status, body, _ = await post(s, url, avro_batch([_avro_event(registry)]), avro)
    assert status == 200 and body["accepted"] == 1
    assert len(_records(producers)) == 1  # none of the bad batches wrote anything


test_avro_envelope_rules_match_json = run(_avro_envelope)


# 9. Echoed input is capped -------------------------------------------------------------------------------------

async def _echo(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer], registry: FakeRegistry) -> None:
    long_name = "t" * 1000
    weird = page_view()
    weird["properties"]["u" * 5000] = 1
    status, body, _ = await post(s, url, dumps(batch(page_view(event_type=long_name), weird)), headers("identity"))
    assert status == 422 and all(len(r["message"]) <= 300 for r in body["rejected"]), body
    avro = headers("identity", ctype="application/vnd.headwater.batch+avro")
    junk = b"\x02" + b"\xff" * 12_000
    status, body, _ = await post(s, url, junk, avro)
    assert status == 400 and len(body["message"]) <= 300
    sid = registry.id_of("page_view", 2)
    unreadable = b"\x00" + sid.to_bytes(4, "big") + _avro_event(registry)[5:60] + b"\xff" * 12_000
    status, body, _ = await post(s, url, avro_batch([unreadable]), avro)
    assert status == 422 and len(body["rejected"][0]["message"]) <= 300
    for _topic, _key, value, _headers in _records(producers):
        assert len(json.loads(value)["message"]) <= 300  # dead letters too


test_errors_echo_at_most_300_characters = run(_echo)


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


def test_client_disconnect_mid_body_is_counted_apart(captured: _Capture) -> None:
    clients = _n(3, 50)

    async def check(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
        host, port = url.removeprefix("http://").split(":")
        gone0, errors0 = await _counts(s, url)
        for _ in range(clients):
            _reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(_request(b"x" * 10_000)[:-9_000])  # head and 1,000 of the 10,000 bytes declared
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
    head = _request(body, "Content-Encoding: zstd\r\nExpect: 100-continue\r\n")[:-len(body)]
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
    assert len(_records(producers)) == 1


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
    assert len(_records(producers)) == 1


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
    avro_other = avro_batch([_avro_event(_r)], batch_id=batch_id)
    status, answer, _ = await post(s, url, zstd(avro_other), headers(ctype="application/vnd.headwater.batch+avro"))
    assert (status, answer["code"]) == (409, "batch_id_reused")
    assert len(_records(producers)) == 2  # only the first attempt wrote


test_reused_batch_id_with_other_events_is_409 = run(_reuse)


def test_openapi_states_the_event_type_pattern() -> None:
    text = (Path(__file__).resolve().parents[2] / "sdk-specs" / "openapi.yaml").read_text()
    event_type = text[text.index("        event_type:\n"):][:200]
    assert 'pattern: "^[a-z][a-z0-9_]{0,63}$"' in event_type


# The same attacks on a real `python -m gateway` process (real broker and registry of the test stack) -------------

def _wait_live(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the gateway exited"
        try:
            with urllib.request.urlopen(url + "/livez", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError("the gateway did not start listening")


def test_real_gateway_process_logs_no_key_and_no_traceback(bootstrap: str, registry_url: str,
                                                           tmp_path: Path) -> None:
    from gateway.auth import hash_key

    port = free_port()
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url,
           "HEADWATER_GATEWAY_WRITE_KEYS": f"dev:{hash_key(WRITE_KEY)}", "HEADWATER_GATEWAY_PORT": str(port),
           "HEADWATER_GATEWAY_WORKERS": "1", "HEADWATER_GATEWAY_LOG_LEVEL": "DEBUG",
           "HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX": f"hostile-{uuid.uuid4().hex[:8]}"}
    log_path = tmp_path / "gateway.log"
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "gateway"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                cwd=Path(__file__).resolve().parents[2])
        try:
            _wait_live(url, proc)

            async def attack() -> None:
                for data in MALFORMED:
                    status, hdrs, _ = await raw_http(url, data)
                    assert status == 400 and hdrs["content-type"].startswith("application/json")
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(_request(b"x" * 10_000)[:-9_000])
                await writer.drain()
                await asyncio.sleep(0.3)
                writer.close()
                event = page_view()
                event["properties"]["viewport"] = "DEEP"
                deep = dumps(batch(event)).replace(b'"DEEP"', b"[" * 600 + b"1" + b"]" * 600)
                status, _, body = await raw_http(url, _request(deep, "Connection: close\r\n"))
                assert status == 422, body
                status, _, body = await raw_http(url, _request(dumps(batch(page_view())), "Connection: close\r\n"))
                assert status == 200, body

            asyncio.run(attack())
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    text = log_path.read_text()
    assert WRITE_KEY not in text and "Traceback" not in text
    docs = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert not [d for d in docs if d["level"] == "error"], [d for d in docs if d["level"] == "error"]
    assert [d["code"] for d in docs if d.get("code") == "client_disconnected"] == ["client_disconnected"]
    assert sum(1 for d in docs if d.get("status") == 400 and d.get("error")) == len(MALFORMED)
