"""Hostile clients against the gateway app over real HTTP (issue 14, security items 1, 3, 4, 5, 7, 8, 9): each test
fails without its fix. Small attacks by default; `HEADWATER_CHAOS=full` runs them full size (`make chaos`).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from gateway.config import Limits
from tests.gateway.helpers import (
    WRITE_KEY,
    FakeProducer,
    FakeRegistry,
    avro_batch,
    batch,
    dumps,
    page_view,
    zstd,
)
from tests.gateway.hostile import (
    EMPTY_ZSTD_FRAME,
    MALFORMED,
    LogCapture,
    MiB,
    avro_event_bytes,
    capture_logs,
    http_request,
    n,
    raw_http,
    records,
)
from tests.gateway.test_http import headers, post, run

pytestmark = pytest.mark.integration


@pytest.fixture
def captured() -> Iterator[LogCapture]:
    yield from capture_logs()


# 1. Frame-count CPU blow-up -------------------------------------------------------------------------------------

async def _frame_bomb(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
    zbomb = EMPTY_ZSTD_FRAME * (MiB // len(EMPTY_ZSTD_FRAME))
    member = gzip.compress(b"")
    gbomb = member * (MiB // len(member))
    attackers = n(2, 8)
    legit = [post(s, url, zstd(dumps(batch(page_view(i)))), headers()) for i in range(n(5, 50))]
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

def test_parser_errors_answer_json_and_never_log_the_key(captured: LogCapture) -> None:
    async def check(url: str, _s: aiohttp.ClientSession, _p: list[FakeProducer], _r: FakeRegistry) -> None:
        for data in MALFORMED:
            status, hdrs, body = await raw_http(url, data)
            assert status == 400 and hdrs["content-type"].startswith("application/json"), (status, hdrs, body)
            answer = json.loads(body)
            assert answer["code"] == "invalid_http" and set(answer) == {"code", "message"}
            assert WRITE_KEY.encode() not in body and len(body) < 300
        flood = n(60, 2000)
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
    for _ in range(n(8, 160)):  # each declares 1 MiB and sends nothing; the budget is 4 MiB
        _reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(http_request(b"")[:-len(b"Content-Length: 0\r\n\r\n")] + f"Content-Length: {MiB}\r\n\r\n".encode())
        await writer.drain()
        hogs.append(writer)
    await asyncio.sleep(0.3)  # the hogs' requests are in their handlers, waiting for bodies
    try:
        answers = await asyncio.gather(*[post(s, url, zstd(dumps(batch(page_view(i)))), headers())
                                         for i in range(n(10, 500))])
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

async def _avro_envelope(url: str, s: aiohttp.ClientSession, producers: list[FakeProducer],
                         registry: FakeRegistry) -> None:
    avro = headers("identity", ctype="application/vnd.headwater.batch+avro")
    bad: list[dict[str, Any]] = [{"event_id": "not-a-uuid"}, {"producer_id": "x" * 36}, {"seq": -1}, {"created_at": -5},
           {"node_id": "n" * 60_000}]
    for overrides in bad:
        status, body, _ = await post(s, url, avro_batch([avro_event_bytes(registry, **overrides)]), avro)
        assert (status, body.get("code")) == (400, "invalid_envelope"), (overrides, status, body)
    status, body, _ = await post(s, url, avro_batch([avro_event_bytes(registry)]), avro)
    assert status == 200 and body["accepted"] == 1
    assert len(records(producers)) == 1  # none of the bad batches wrote anything


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
    unreadable = b"\x00" + sid.to_bytes(4, "big") + avro_event_bytes(registry)[5:60] + b"\xff" * 12_000
    status, body, _ = await post(s, url, avro_batch([unreadable]), avro)
    assert status == 422 and len(body["rejected"][0]["message"]) <= 300
    for _topic, _key, value, _headers in records(producers):
        assert len(json.loads(value)["message"]) <= 300  # dead letters too


test_errors_echo_at_most_300_characters = run(_echo)
