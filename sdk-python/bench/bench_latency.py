"""Delivered events/s of headwater, segment-analytics-python and posthog behind added network latency.

Not a test: it prints figures. One local sink (aiohttp, its own process) delays every answer by 0, 20, 50
and 100 ms (a stand-in for the round trip to a distant gateway; requests are delayed concurrently, as a
network would). For each latency and each SDK, in a fresh process: `--events` ~1 KB events are tracked in
a loop, then the SDK is flushed, and the clock stops when the sink has counted every event. Figures:
events/s delivered, and whole-process CPU per delivered event (`time.process_time()`: every thread of the
process, the SDK's own included; the headline). Each SDK runs with its defaults (segment and posthog: one
consumer thread, batches of 100; headwater: batches of 40, `max_in_flight=4`), plus `headwater-8` with
`max_in_flight=8`. Prints a table, then one JSON line with the ratios measured in the same run.

Usage: `python sdk-python/bench/bench_latency.py [--events 4000] [--latencies 0,20,50,100] [--sdks ...]`
(needs `sdk-python/bench/requirements.txt`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

SDKS = ("headwater", "headwater-8", "segment", "posthog")


def make_event(i: int) -> dict[str, Any]:
    """A ~1 KB page view."""
    return {"url": f"https://shop.example.com/products/{i % 997}?ref=campaign-{i % 13}", "referrer": None,
            "user_id": f"user-{i % 5000}", "session_id": f"s-{i % 20000:08d}", "duration_ms": i % 3000,
            "user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 " * 6,
            "tags": ["bench", "sdk", str(i % 7)]}


# --- the delaying sink --------------------------------------------------------------------------------------
def serve(port_file: str) -> None:
    """Count events of every POST after `delay_ms`; GET /config?delay_ms=N sets the delay and resets the count."""
    from aiohttp import web

    state = {"events": 0, "requests": 0, "delay_ms": 0}

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()  # aiohttp undid gzip / zstd
        if state["delay_ms"]:
            await asyncio.sleep(state["delay_ms"] / 1000)
        doc = json.loads(body)
        items = doc.get("events") or doc.get("batch") or []
        state["events"] += len(items)
        state["requests"] += 1
        return web.json_response({"batch_id": doc.get("batch_id"), "accepted": len(items), "rejected": [],
                                  "status": "Ok"})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(state)

    async def config(request: web.Request) -> web.Response:
        state.update(events=0, requests=0, delay_ms=int(request.query.get("delay_ms", "0")))
        return web.json_response(state)

    app = web.Application(client_max_size=8 << 20)
    app.router.add_get("/stats", stats)
    app.router.add_get("/config", config)
    app.router.add_route("POST", "/{tail:.*}", handle)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(sock.getsockname()[1]))
    os.replace(port_file + ".tmp", port_file)
    web.run_app(app, sock=sock, print=None, handle_signals=True, backlog=1024)


def get(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url, timeout=10) as resp:  # loopback only
        return json.loads(resp.read())  # type: ignore[no-any-return]


# --- one SDK, one latency -----------------------------------------------------------------------------------
def client_for(name: str, url: str) -> tuple[Any, Any, Any]:
    """(client, track(event), flush()) with the SDK's defaults."""
    if name.startswith("headwater"):
        import headwater

        in_flight = int(name.split("-")[1]) if "-" in name else 4
        hw = headwater.Client(url, "bench-key", max_in_flight=in_flight, on_error=lambda e: None)
        return hw, lambda ev: hw.track("page_view", ev), lambda: hw.flush(600)
    if name == "segment":
        from segment.analytics import Client

        seg = Client("bench-key", host=url, gzip=True, on_error=lambda *a: None)
        return seg, lambda ev: seg.track(user_id=ev["user_id"], event="page_view", properties=ev), seg.flush
    from posthog import Posthog

    ph = Posthog("bench-key", host=url, gzip=True, on_error=lambda *a: None, enable_local_evaluation=False,
                 poll_interval=3600)
    return ph, lambda ev: ph.capture("page_view", distinct_id=ev["user_id"], properties=ev), ph.flush


def run_one(name: str, url: str, n: int) -> dict[str, Any]:
    """Track `n` events and time their delivery; CPU of the whole process (every thread)."""
    events = [make_event(i) for i in range(n)]
    _, track, flush = client_for(name, url)
    cpu0, t0 = time.process_time(), time.perf_counter()
    for ev in events:
        track(ev)
    flush()
    deadline = time.monotonic() + 600
    while get(url + "/stats")["events"] < n and time.monotonic() < deadline:
        time.sleep(0.005)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    delivered = get(url + "/stats")["events"]
    return {"sdk": name, "events": n, "delivered": delivered, "seconds": wall,
            "events_per_s": delivered / wall, "cpu_us_per_event": cpu / max(delivered, 1) * 1e6}


# --- the driver ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=4_000)
    ap.add_argument("--latencies", default="0,20,50,100")
    ap.add_argument("--sdks", default=",".join(SDKS))
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.one:
        print(json.dumps(run_one(args.one, args.url, args.events)), flush=True)
        os._exit(0)  # do not wait for SDK threads
    results = drive(args)
    print_table(results)
    print(json.dumps({"bench": "sdk_latency", "events": args.events, "results": results,
                      "ratios": ratios(results)}))


def drive(args: argparse.Namespace) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        port_file = os.path.join(tmp, "port")
        server = subprocess.Popen([sys.executable, __file__, "--serve", port_file])
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(port_file) and time.monotonic() < deadline:
                time.sleep(0.05)
            with open(port_file) as f:
                url = f"http://127.0.0.1:{f.read()}"
            results = []
            for latency in (int(x) for x in args.latencies.split(",")):
                for name in args.sdks.split(","):
                    get(f"{url}/config?delay_ms={latency}")
                    out = subprocess.run([sys.executable, __file__, "--one", name, "--url", url, "--events",
                                          str(args.events)], capture_output=True, text=True, timeout=900, check=False)
                    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                    if out.returncode != 0 or not lines:
                        print(f"{name} at {latency} ms failed: {out.stderr[-2000:]}", file=sys.stderr)
                        continue
                    results.append({"latency_ms": latency, **json.loads(lines[-1])})
            return results
        finally:
            server.terminate()
            server.wait(10)


def ratios(results: list[dict[str, Any]]) -> dict[str, float]:
    """Per latency: headwater's delivered events/s over the better peer's, and the peers' CPU/event over ours."""
    out: dict[str, float] = {}
    for latency in sorted({r["latency_ms"] for r in results}):
        by = {r["sdk"]: r for r in results if r["latency_ms"] == latency}
        peers = [by[p] for p in ("segment", "posthog") if p in by]
        if "headwater" not in by or not peers:
            continue
        best = max(p["events_per_s"] for p in peers)
        out[f"headwater_over_best_peer_events_per_s_{latency}ms"] = by["headwater"]["events_per_s"] / best
        if "headwater-8" in by:
            out[f"headwater8_over_best_peer_events_per_s_{latency}ms"] = by["headwater-8"]["events_per_s"] / best
        for p in peers:
            out[f"cpu_per_event_{p['sdk']}_over_headwater_{latency}ms"] = \
                p["cpu_us_per_event"] / by["headwater"]["cpu_us_per_event"]
    return out


def print_table(results: list[dict[str, Any]]) -> None:
    head = f"{'latency':>8}  {'sdk':<13}{'delivered':>10}{'events/s':>10}{'CPU us/event':>14}"
    print(head)
    print("-" * len(head))
    for r in results:
        print(f"{r['latency_ms']:>6}ms  {r['sdk']:<13}{r['delivered']:>10}{r['events_per_s']:>10.0f}"
              f"{r['cpu_us_per_event']:>14.1f}")


if __name__ == "__main__":
    main()
