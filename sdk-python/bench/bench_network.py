"""The Python SDK on a real network, beside segment-analytics-python and posthog: throughput, connections, CPU,
and delivery across an outage.

Not a test: it prints figures. One local sink (aiohttp, its own process) answers every batch after a delay that
stands in for the round trip to a distant gateway (1, 50 and 100 ms by default; requests are delayed
concurrently, as a network would), counts distinct events and the TCP connections it was sent on, and can go
down (503, no Retry-After) for a while. Each run is a fresh process:

1. **throughput**: per latency and SDK, `--events` (60,000) ~1 KB events are tracked in a loop, then flushed;
   the clock stops when the sink has counted every event. Figures: events/s over the whole run (start-up and
   tail included), **steady events/s** (the sink's count rate between 25 % and 75 % of the events delivered:
   the rate the SDK holds once its window is open), connections used, whole-process CPU per delivered event
   (`time.process_time()`, every thread), the sink's CPU over the run's wall time (near 100 % would mean the
   sink, not the SDK, is the limit), and the peers' CPU per event over headwater's. Every SDK runs with its
   defaults, except that each queue holds the whole run (so nothing is dropped for the figures' sake).
2. **outage**: `--tries` times, the sink goes down for `--outage-s` (10 s), headwater tracks `--outage-events`
   (2,000) at once and calls `close(timeout=30)`; the try counts if the sink received every event and close
   returned True.

Usage: `python sdk-python/bench/bench_network.py [--events 60000] [--latencies 1,50,100] [--sdks ...]
[--tries 10]` (needs `sdk-python/bench/requirements.txt`; `make setup` installs it). Prints the load average,
a table, the outage tries, then one JSON line.
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

SDKS = ("headwater", "segment", "posthog")


def make_event(i: int) -> dict[str, Any]:
    """A ~1 KB page view."""
    return {"url": f"https://shop.example.com/products/{i % 997}?ref=campaign-{i % 13}", "referrer": None,
            "user_id": f"user-{i % 5000}", "session_id": f"s-{i % 20000:08d}", "duration_ms": i % 3000,
            "user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 " * 6,
            "tags": ["bench", "sdk", str(i % 7)]}


# --- the sink -----------------------------------------------------------------------------------------------
def serve(port_file: str) -> None:
    """Count distinct events and connections of every POST after `delay_ms`; 503 while down.

    GET /config?delay_ms=N&down_s=S resets the counts, sets the delay, and answers 503 for the next S seconds.
    """
    from aiohttp import web

    state: dict[str, Any] = {"ids": set(), "received": 0, "requests": 0, "conns": set(), "delay_ms": 0,
                             "down_until": 0.0, "progress": [], "cpu0": time.process_time()}

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()  # aiohttp undid gzip / zstd
        state["conns"].add(request.transport.get_extra_info("peername") if request.transport else None)
        if state["delay_ms"]:
            await asyncio.sleep(state["delay_ms"] / 1000)
        if time.monotonic() < state["down_until"]:
            return web.json_response({"code": "overloaded", "message": "down"}, status=503)
        doc = json.loads(body)
        items = doc.get("events") or doc.get("batch") or []
        for e in items:
            state["ids"].add(e.get("event_id") or e.get("messageId") or e.get("uuid"))
        state["progress"].append((time.monotonic(), len(state["ids"])))
        state["received"] += len(items)
        state["requests"] += 1
        return web.json_response({"batch_id": doc.get("batch_id"), "accepted": len(items), "rejected": [],
                                  "status": "Ok"})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"events": len(state["ids"]), "received": state["received"],
                                  "requests": state["requests"], "connections": len(state["conns"]),
                                  "steady_events_per_s": steady_rate(state["progress"]),
                                  "sink_cpu_s": time.process_time() - state["cpu0"]})

    async def config(request: web.Request) -> web.Response:
        state.update(ids=set(), received=0, requests=0, conns=set(), delay_ms=int(request.query.get("delay_ms", "0")),
                     down_until=time.monotonic() + float(request.query.get("down_s", "0")), progress=[],
                     cpu0=time.process_time())
        return web.json_response({"ok": True})

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


def steady_rate(progress: list[tuple[float, int]]) -> float:
    """Distinct events per second between the answers that brought the count to 25 % and to 75 % of its total."""
    if not progress:
        return 0.0
    total = progress[-1][1]
    lo = next(p for p in progress if p[1] >= total * 0.25)
    hi = next(p for p in progress if p[1] >= total * 0.75)
    return (hi[1] - lo[1]) / (hi[0] - lo[0]) if hi[0] > lo[0] else 0.0


def get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as resp:  # loopback only
        return json.loads(resp.read())  # type: ignore[no-any-return]


def wait_for(url: str, n: int, timeout_s: float) -> dict[str, Any]:
    """The sink's stats once it counted `n` distinct events (or at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = get(url + "/stats")
        if stats["events"] >= n or time.monotonic() >= deadline:
            return stats
        time.sleep(0.005)


# --- one SDK in its own process -----------------------------------------------------------------------------
def client_for(name: str, url: str, queue: int) -> tuple[Any, Any, Any]:
    """(client, track(event), flush()) with the SDK's defaults and a queue that holds `queue` events."""
    if name == "headwater":
        import headwater

        hw = headwater.Client(url, "bench-key", max_queue_events=queue, on_error=lambda e: None)
        return hw, lambda ev: hw.track("page_view", ev), lambda: hw.flush(600)
    if name == "segment":
        from segment.analytics import Client

        seg = Client("bench-key", host=url, gzip=True, max_queue_size=queue, on_error=lambda *a: None)
        return seg, lambda ev: seg.track(user_id=ev["user_id"], event="page_view", properties=ev), seg.flush
    from posthog import Posthog

    ph = Posthog("bench-key", host=url, gzip=True, max_queue_size=queue, on_error=lambda *a: None,
                 enable_local_evaluation=False, poll_interval=3600)
    return ph, lambda ev: ph.capture("page_view", distinct_id=ev["user_id"], properties=ev), ph.flush


def run_throughput(name: str, url: str, n: int) -> dict[str, Any]:
    """Track `n` events and time their delivery; CPU of the whole process (every thread)."""
    events = [make_event(i) for i in range(n)]
    _, track, flush = client_for(name, url, n)
    cpu0, t0 = time.process_time(), time.perf_counter()
    for ev in events:
        track(ev)
    flush()
    stats = wait_for(url, n, 600)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"sdk": name, "events": n, "delivered": stats["events"], "seconds": wall,
            "events_per_s": stats["events"] / wall, "steady_events_per_s": stats["steady_events_per_s"],
            "connections": stats["connections"], "cpu_us_per_event": cpu / max(stats["events"], 1) * 1e6,
            "sink_cpu_share": stats["sink_cpu_s"] / wall}


def run_outage(url: str, n: int, close_s: float) -> dict[str, Any]:
    """Track `n` events while the sink is down, then close(close_s): what arrived, and what close said."""
    import headwater

    hw = headwater.Client(url, "bench-key", on_error=lambda e: None)
    for i in range(n):
        hw.track("page_view", make_event(i))
    t0 = time.monotonic()
    closed = hw.close(close_s)
    return {"close_s": time.monotonic() - t0, "close_ok": closed, "delivered": wait_for(url, n, 2)["events"]}


# --- the driver ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--latencies", default="1,50,100")
    ap.add_argument("--sdks", default=",".join(SDKS))
    ap.add_argument("--tries", type=int, default=10)
    ap.add_argument("--outage-s", type=float, default=10.0)
    ap.add_argument("--outage-events", type=int, default=2_000)
    ap.add_argument("--close-s", type=float, default=30.0)
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--outage", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.one or args.outage:
        out = run_outage(args.url, args.outage_events, args.close_s) if args.outage else \
            run_throughput(args.one, args.url, args.events)
        print(json.dumps(out), flush=True)
        os._exit(0)  # do not wait for the peers' threads
    load_before = os.getloadavg()
    results, tries = drive(args)
    report = {"bench": "sdk_network_python", "events": args.events, "load_avg_before": load_before,
              "load_avg_after": os.getloadavg(), "results": results, "ratios": ratios(results),
              "outage": {"outage_s": args.outage_s, "events": args.outage_events, "close_s": args.close_s,
                         "tries": tries}}
    print_report(report)
    print(json.dumps(report))


def child(args: argparse.Namespace, url: str, *extra: str) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--url", url, "--events", str(args.events), "--outage-events",
           str(args.outage_events), "--close-s", str(args.close_s), *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        print(f"{extra} failed: {out.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def drive(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
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
                    got = child(args, url, "--one", name)
                    if got is not None:
                        results.append({"latency_ms": latency, **got})
            tries = []
            for _ in range(args.tries):
                get(f"{url}/config?delay_ms=1&down_s={args.outage_s}")
                got = child(args, url, "--outage")
                tries.append(got or {"close_s": None, "close_ok": False, "delivered": 0})
            return results, tries
        finally:
            server.terminate()
            server.wait(10)


def ratios(results: list[dict[str, Any]]) -> dict[str, float]:
    """Per latency: headwater's events/s over each peer's, and each peer's CPU per event over headwater's."""
    out: dict[str, float] = {}
    for latency in sorted({r["latency_ms"] for r in results}):
        by = {r["sdk"]: r for r in results if r["latency_ms"] == latency}
        if "headwater" not in by:
            continue
        for peer in (p for p in ("segment", "posthog") if p in by):
            out[f"events_per_s_headwater_over_{peer}_{latency}ms"] = \
                by["headwater"]["events_per_s"] / by[peer]["events_per_s"]
            out[f"cpu_per_event_{peer}_over_headwater_{latency}ms"] = \
                by[peer]["cpu_us_per_event"] / by["headwater"]["cpu_us_per_event"]
    return out


def print_report(report: dict[str, Any]) -> None:
    print(f"load average before: {' '.join(f'{x:.2f}' for x in report['load_avg_before'])}; "
          f"after: {' '.join(f'{x:.2f}' for x in report['load_avg_after'])}")
    head = (f"{'latency':>8}  {'sdk':<10}{'delivered':>10}{'events/s':>10}{'steady/s':>10}{'conns':>7}"
            f"{'CPU us/event':>14}{'sink CPU':>10}")
    print(head)
    print("-" * len(head))
    for r in report["results"]:
        print(f"{r['latency_ms']:>6}ms  {r['sdk']:<10}{r['delivered']:>10}{r['events_per_s']:>10.0f}"
              f"{r['steady_events_per_s']:>10.0f}{r['connections']:>7}{r['cpu_us_per_event']:>14.1f}"
              f"{r['sink_cpu_share']:>9.0%}")
    for key, value in report["ratios"].items():
        print(f"{key}: {value:.2f}")
    o = report["outage"]
    full = [t for t in o["tries"] if t["delivered"] == o["events"] and t["close_ok"]]
    closes = sorted(t["close_s"] for t in o["tries"] if t["close_s"] is not None)
    print(f"outage: {o['events']} tracked in a {o['outage_s']:.0f} s outage, close given {o['close_s']:.0f} s: "
          f"all delivered and close() True in {len(full)} of {len(o['tries'])} tries; delivered per try "
          f"{[t['delivered'] for t in o['tries']]}; close took {closes[0] if closes else 0:.1f}-"
          f"{closes[-1] if closes else 0:.1f} s")


if __name__ == "__main__":
    main()
