"""HTTP load against a running gateway: closed-loop sustained throughput, and open-loop latency at a fixed rate."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp

from bench.gateway.workload import Body
from loadtest.curve import scrape


@dataclass
class LoadResult:
    events_per_s: float
    batches: int
    errors: int
    latencies_ms: list[float]
    events: int = 0  # events acknowledged with 200


def _headers(key: str, body: Body) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": body.content_type, "Content-Encoding": "zstd"}


async def _post(session: aiohttp.ClientSession, url: str, key: str, body: Body) -> tuple[bool, float]:
    t0 = time.perf_counter()
    try:
        async with session.post(url, data=body.data, headers=_headers(key, body)) as resp:
            await resp.read()
            ok = resp.status == 200
    except aiohttp.ClientError:
        ok = False
    return ok, (time.perf_counter() - t0) * 1000


async def sustained(url: str, key: str, bodies: list[Body], concurrency: int) -> LoadResult:
    """Every body sent once by `concurrency` keep-alive workers as fast as answers come."""
    queue = list(reversed(bodies))
    ok_events = errors = batches = 0
    latencies: list[float] = []

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal ok_events, errors, batches
        while queue:
            body = queue.pop()
            ok, ms = await _post(session, url, key, body)
            batches += 1
            latencies.append(ms)
            if ok:
                ok_events += body.events
            else:
                errors += 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
    return LoadResult(ok_events / elapsed, batches, errors, latencies, ok_events)


async def at_rate(url: str, key: str, bodies: list[Body], batches_per_s: float) -> LoadResult:
    """Open loop: one batch every 1/rate seconds regardless of answers; the latency of each."""
    latencies: list[float] = []
    errors = ok_events = 0
    connector = aiohttp.TCPConnector(limit=256)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def one(body: Body) -> None:
            nonlocal errors, ok_events
            ok, ms = await _post(session, url, key, body)
            latencies.append(ms)
            if ok:
                ok_events += body.events
            else:
                errors += 1

        t0 = time.perf_counter()
        tasks = []
        for i, body in enumerate(bodies):
            delay = t0 + i / batches_per_s - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(body)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - t0
    return LoadResult(ok_events / elapsed, len(bodies), errors, latencies, ok_events)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def transactions(base_url: str) -> tuple[float, float]:
    """A gateway's Kafka transactions so far and the batches they carried (its /metrics histogram, every worker)."""
    values = scrape(base_url, ("headwater_gateway_commit_batches_",))

    def total(name: str) -> float:
        return sum(v for k, v in values.items() if k.split("{", 1)[0] == name)

    return total("headwater_gateway_commit_batches_count"), total("headwater_gateway_commit_batches_sum")
