"""Measures issue 14 items 1 and 5 on one gateway process: a legitimate client's latency alone, beside frame bombs
(1 MiB of empty zstd frames), and beside header-only connections declaring 1 MiB bodies; CPU seconds per bomb.

`python -m tests.gateway.bench_hostile [--root DIR] [--seconds S]`: the gateway (the app with the test fakes for
Kafka and the registry, over real HTTP, default limits) runs from the source tree DIR (default: this one), so
running it against a checkout of an older commit gives the "before" figures of the same machine. Prints one
JSON line; compare the ratios (attacked p99 / alone p99) of runs made together, not absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.gateway.helpers import WRITE_KEY, batch, dumps, json_headers, page_view, zstd
from tests.support.ports import free_port

CHILD = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from gateway.config import Limits
from tests.gateway.test_http import make_cfg, running

async def main() -> None:
    cfg = make_cfg(port=int(sys.argv[2]), limits=Limits(), body_timeout_s=10.0, idle_timeout_s=15.0,
                   conn_max_requests=10**6)
    async with running(cfg):
        print("ready", flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""
BOMB = bytes.fromhex("28b52ffd2000010000") * (1024 * 1024 // 9)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _legit(url: str, seconds: float, concurrency: int = 4) -> dict[str, Any]:
    latencies: list[float] = []
    failures: dict[str, int] = {}
    body = zstd(dumps(batch(*[page_view(i) for i in range(10)])))
    deadline = time.monotonic() + seconds

    async def client(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            try:
                async with session.post(url + "/v1/batch", data=body, headers=json_headers(WRITE_KEY)) as resp:
                    await resp.read()
                    status = resp.status
            except aiohttp.ClientError as exc:
                status = type(exc).__name__  # type: ignore[assignment]
            latencies.append(time.perf_counter() - t0)
            if status != 200:
                failures[str(status)] = failures.get(str(status), 0) + 1

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        await asyncio.gather(*[client(session) for _ in range(concurrency)])
    return {"requests": len(latencies), "failed": failures, "p50_ms": round(_p(latencies, 0.5) * 1000, 1),
            "p99_ms": round(_p(latencies, 0.99) * 1000, 1)}


async def _bombs(url: str, stop: asyncio.Event, sent: list[int], attackers: int = 2) -> None:
    async def attacker() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            while not stop.is_set():
                async with session.post(url + "/v1/batch", data=BOMB, headers=json_headers(WRITE_KEY)) as resp:
                    await resp.read()
                sent[0] += 1

    await asyncio.gather(*[attacker() for _ in range(attackers)])


async def _hogs(url: str, count: int = 160) -> list[asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").split(":")
    writers = []
    for _ in range(count):
        _reader, writer = await asyncio.open_connection(host, int(port))
        writer.write((f"POST /v1/batch HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {WRITE_KEY}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n").encode())
        writers.append(writer)
    return writers


async def measure(url: str, pid: int, seconds: float) -> dict[str, Any]:
    alone = await _legit(url, seconds)
    stop, sent = asyncio.Event(), [0]
    cpu0 = _cpu_seconds(pid)
    attack = asyncio.create_task(_bombs(url, stop, sent))
    await asyncio.sleep(0.5)
    bombed = await _legit(url, seconds)
    stop.set()
    await attack
    bomb_cpu = _cpu_seconds(pid) - cpu0
    writers = await _hogs(url)
    await asyncio.sleep(0.5)
    hogged = await _legit(url, seconds)
    for writer in writers:
        writer.close()
    return {"alone": alone, "frame_bombs": {**bombed, "bombs": sent[0],
                                            "cpu_s_per_bomb": round(bomb_cpu / max(sent[0], 1), 3)},
            "header_only_hogs": hogged,
            "p99_ratio_bombs": round(bombed["p99_ms"] / alone["p99_ms"], 1),
            "p99_ratio_hogs": round(hogged["p99_ms"] / alone["p99_ms"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    port = free_port()
    child = subprocess.Popen([sys.executable, "-c", CHILD, args.root, str(port)], cwd=args.root,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        result = asyncio.run(measure(f"http://127.0.0.1:{port}", child.pid, args.seconds))
    finally:
        child.terminate()
        child.wait(30)
    print(json.dumps({"root": args.root, **result}))


if __name__ == "__main__":
    main()
