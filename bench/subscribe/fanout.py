"""`python -m bench.subscribe.fanout`: the server's fan-out alone, without Kafka: the real aiohttp application and
subscriber code, a ring fed with synthetic frames by a timer (as the live reader hands batches over), N raw SSE
readers in a client process. Compares, interleaved in one run, the ring writing each batch to parked subscribers
(`push`) with every subscriber's task waking and writing on its own (`tasks`, the design before): server CPU per
second and the frame's age on arrival (p50/p99). Independent of the broker and the producer, so its ratios hold on
a loaded host better than end-to-end figures do.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing as mp
import os
import re
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

import uvloop
from aiohttp import web

from bench.subscribe.stats import _pct
from common.ports import free_port
from subscribe import hub as hub_module
from subscribe import metrics, sse
from subscribe import position as pos
from subscribe.app import build_app
from subscribe.config import SubscribeConfig
from subscribe.handlers import HUB
from subscribe.ring import Entry, Ring
from subscribe.subscriber import Subscriber

TOPIC = "headwater.events"
KEY = "hwr_" + "b" * 43
SENT = re.compile(rb'"sent": ([0-9.]+)')


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.subscribe.fanout", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--subscribers", type=int, default=100)
    p.add_argument("--rate", type=int, default=1000, help="frames/s (default 1000)")
    p.add_argument("--batches", type=int, default=100, help="batches/s handed over (default 100)")
    p.add_argument("--frame-bytes", type=int, default=1600, help="bytes of JSON per frame (default 1600)")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--rounds", type=int, default=3)
    return p.parse_args(argv)


class _Meta:
    """Kafka look-ups answered without Kafka: one partition, empty."""

    def partitions(self, topic: str) -> int:
        return 1

    def watermarks(self, topic: str, partitions: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return (0,), (0,)

    def close(self) -> None:
        return None


async def _serve(port: int, mode: str, args: argparse.Namespace, conn: Connection) -> None:
    if mode == "tasks":
        async def wait_for_change(self: Subscriber, ring: Ring) -> None:
            await ring.changed.wait()
        Subscriber._park = wait_for_change  # type: ignore[method-assign]
    cfg = SubscribeConfig.from_env({
        "KAFKA_BOOTSTRAP": "127.0.0.1:1", "REGISTRY_URL": "http://127.0.0.1:1",
        "HEADWATER_SUBSCRIBE_READ_KEYS": f"bench:{hashlib.sha256(KEY.encode()).hexdigest()}:*",
        "HEADWATER_SUBSCRIBE_MAX_PER_KEY": "5000", "HEADWATER_SUBSCRIBE_MAX_SUBSCRIBERS": "5000"})
    hub_module.KafkaMeta = lambda conf, timeout_s: _Meta()  # type: ignore[attr-defined,return-value,assignment]
    app = build_app(cfg)
    hub = app[HUB]
    ring = Ring(TOPIC, (0,), cfg.ring_bytes)
    hub.rings[TOPIC] = ring
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    conn.send("listening")
    pad = "x" * max(0, args.frame_bytes - 120)
    offset = 0
    cpu0, t0, stop_at, sent0, delivered0 = time.process_time(), time.monotonic(), None, 0, 0.0
    began = t0
    while True:
        if stop_at is None and conn.poll():
            conn.recv()  # "go": measure from now
            cpu0, t0, stop_at = time.process_time(), time.monotonic(), time.monotonic() + args.seconds
            sent0, delivered0 = offset, metrics.RECORDS._value.get()
        if stop_at is not None and time.monotonic() >= stop_at:
            break
        entries = []
        for _ in range(int((time.monotonic() - began) * args.rate) - offset):
            offset += 1
            event_id = pos.encode(ring.tag, (offset,))
            body = json.dumps({"event_type": "page_view", "sent": time.time(), "pad": pad}).encode()
            entries.append(Entry(sse.record(event_id, body), len(event_id), 0, offset - 1, "page_view", {}))
        if entries:
            ring.append(entries, (offset,), time.monotonic())
        await asyncio.sleep(1 / args.batches)
    elapsed = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    delivered = metrics.RECORDS._value.get() - delivered0
    conn.send({"cpu_s_per_s": cpu / elapsed, "frames_per_s": (offset - sent0) / elapsed,
               "cpu_us_per_delivery": cpu * 1e6 / delivered if delivered else None})
    hub.closing = True
    hub.wake_all()
    await runner.cleanup()


def server(port: int, mode: str, args: argparse.Namespace, conn: Connection) -> None:
    uvloop.run(_serve(port, mode, args, conn))


class _State:
    def __init__(self) -> None:
        self.opened = 0
        self.measuring = False
        self.ages: list[float] = []


async def _read(port: int, probe: bool, state: _State) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    writer.write(f"GET /v1/streams/event.page_view HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n"
                 .encode())
    await reader.readuntil(b"\r\n\r\n")
    state.opened += 1
    while data := await reader.read(1 << 16):
        if probe and state.measuring:
            now = time.time()
            state.ages.extend(now - float(s) for s in SENT.findall(data))


def clients(port: int, n: int, conn: Connection) -> None:
    """N readers; the first one's arrivals are timed (the others only read)."""
    async def main() -> None:
        state = _State()
        tasks = [asyncio.create_task(_read(port, i == 0, state)) for i in range(n)]
        while state.opened < n:
            await asyncio.sleep(0.05)
        conn.send("ready")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, conn.recv)
        state.measuring = True
        await loop.run_in_executor(None, conn.recv)
        conn.send(state.ages)
        for t in tasks:
            t.cancel()

    uvloop.run(main())



def run_one(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    port = free_port()
    s_mine, s_theirs = ctx.Pipe()
    c_mine, c_theirs = ctx.Pipe()
    srv = ctx.Process(target=server, args=(port, mode, args, s_theirs), daemon=True)
    srv.start()
    assert s_mine.recv() == "listening"
    cli = ctx.Process(target=clients, args=(port, args.subscribers, c_theirs), daemon=True)
    cli.start()
    assert c_mine.recv() == "ready"
    time.sleep(1.0)
    s_mine.send("go")
    c_mine.send("go")
    said = s_mine.recv()
    c_mine.send("stop")
    ages = [a * 1000 for a in c_mine.recv()]
    for proc in (cli, srv):
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    return {"mode": mode, "server_cpu_s_per_s": round(said["cpu_s_per_s"], 3),
            "frames_per_s": round(said["frames_per_s"]),
            "cpu_us_per_delivery": said["cpu_us_per_delivery"] and round(said["cpu_us_per_delivery"], 1),
            "age_ms_p50": _pct(ages, 0.5),
            "age_ms_p99": _pct(ages, 0.99), "samples": len(ages)}


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    load = os.getloadavg()[0]
    rows = []
    for i in range(args.rounds):
        for mode in ("tasks", "push"):
            row = {"round": i + 1, **run_one(mode, args)}
            rows.append(row)
            print(row, flush=True)
    print(json.dumps({"bench": "subscribe-fanout", "subscribers": args.subscribers, "rate": args.rate,
                      "batches": args.batches, "rows": rows,
                      "loadavg_1m": {"start": round(load, 1), "end": round(os.getloadavg()[0], 1),
                                     "cores": os.cpu_count()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
