"""Benchmark of the headwater SDK beside segment-analytics-python and posthog, on one local endpoint.

Not a test: it prints figures. For each SDK, in its own process (so memory and CPU are its own):

1. the headline: whole-process CPU (every thread, the SDK's own included) per delivered event, from the
   first `track()` until the local endpoint counted all N events of ~1 KB; also as events/s and events per
   CPU-second; every SDK sends batches of 40 (gzip for segment/posthog, zstd for headwater, their own
   defaults otherwise);
2. `track()` cost, microseconds per call: mostly a measure of when the SDK's threads get the GIL, so
   secondary;
3. memory while the endpoint is down: RSS growth after tracking M events towards a closed port.

The endpoint is an aiohttp server in a separate process that accepts everything and counts events.
Usage: `python sdk-python/bench/bench_sdk.py [--events 20000] [--down-events 20000] [--sdks a,b,...]`.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

BATCH = 40
SDKS = ("headwater", "headwater-spool", "segment", "posthog")


def make_event(i: int) -> dict[str, Any]:
    """A ~1 KB page view."""
    return {"url": f"https://shop.example.com/products/{i % 997}?ref=campaign-{i % 13}", "referrer": None,
            "user_id": f"user-{i % 5000}", "session_id": f"s-{i % 20000:08d}", "duration_ms": i % 3000,
            "user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 " * 6,
            "tags": ["bench", "sdk", str(i % 7)]}


# --- the endpoint -------------------------------------------------------------------------------------------
def serve(port_file: str) -> None:
    """Run the counting endpoint until killed; write its port to `port_file`."""
    from aiohttp import web

    count = {"events": 0, "requests": 0}

    async def handle(request: web.Request) -> web.Response:
        doc = json.loads(await request.read())  # aiohttp already undid gzip / zstd
        items = doc.get("events") or doc.get("batch") or []
        count["events"] += len(items)
        count["requests"] += 1
        return web.json_response({"batch_id": doc.get("batch_id"), "accepted": len(items), "rejected": [],
                                  "status": "Ok"})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(count)

    async def reset(request: web.Request) -> web.Response:
        count.update(events=0, requests=0)
        return web.json_response(count)

    app = web.Application(client_max_size=8 << 20)
    app.router.add_get("/stats", stats)
    app.router.add_get("/reset", reset)
    app.router.add_route("POST", "/{tail:.*}", handle)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(sock.getsockname()[1]))
    os.replace(port_file + ".tmp", port_file)
    web.run_app(app, sock=sock, print=None, handle_signals=True)


def stats(url: str, path: str = "/stats") -> dict[str, int]:
    with urllib.request.urlopen(url + path, timeout=10) as resp:  # loopback only
        return json.loads(resp.read())  # type: ignore[no-any-return]


# --- one SDK ------------------------------------------------------------------------------------------------
class Sdk:
    """A uniform face over the three SDKs: track, flush, and a way to stop without waiting."""

    def __init__(self, name: str, url: str, queue: int, spool: str | None) -> None:
        self.name = name
        if name.startswith("headwater"):
            import headwater

            self.client: Any = headwater.Client(url, "bench-key", spool_dir=spool, max_queue_events=queue,
                                                max_pending_batches=queue // BATCH + 10, linger_s=0.05,
                                                on_error=lambda e: None)
            self.track = lambda i, ev: self.client.track("page_view", ev)
            self.flush = lambda: self.client.flush(300)
        elif name == "segment":
            from segment.analytics import Client

            self.client = Client("bench-key", host=url, upload_size=BATCH, upload_interval=0.05,
                                 max_queue_size=queue, gzip=True, on_error=lambda *a: None, max_retries=10)
            self.track = lambda i, ev: self.client.track(user_id=ev["user_id"], event="page_view", properties=ev)
            self.flush = self.client.flush
        else:
            from posthog import Posthog

            self.client = Posthog("bench-key", host=url, flush_at=BATCH, flush_interval=0.05,
                                  max_queue_size=queue, gzip=True, on_error=lambda *a: None,
                                  enable_local_evaluation=False, poll_interval=3600)
            self.track = lambda i, ev: self.client.capture("page_view", distinct_id=ev["user_id"], properties=ev)
            self.flush = self.client.flush


def rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def run_one(name: str, url: str, n: int, down_n: int) -> dict[str, Any]:
    """Measure one SDK in this process and return its figures."""
    events = [make_event(i) for i in range(n)]
    # the SDK's threads may still write to the spool of the down phase while the directory is removed
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        spool = os.path.join(tmp, "spool") if name.endswith("-spool") else None
        sdk = Sdk(name, url, queue=n * 2, spool=spool)
        stats(url, "/reset")
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(n):
            sdk.track(i, events[i])
        t_track = time.perf_counter() - t0
        sdk.flush()
        deadline = time.monotonic() + 300
        while stats(url)["events"] < n and time.monotonic() < deadline:
            time.sleep(0.01)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        delivered = stats(url)["events"]

        dead = socket.socket()
        dead.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{dead.getsockname()[1]}"
        dead.close()  # nothing listens there: connection refused
        spool2 = os.path.join(tmp, "spool2") if spool else None
        down = Sdk(name, dead_url, queue=down_n * 2, spool=spool2)
        rss0 = rss_bytes()
        for i in range(down_n):
            down.track(i, make_event(i))  # a fresh object each time: what the SDK keeps is what it costs
        time.sleep(1.0)
        rss1 = rss_bytes()
    return {"sdk": name, "events": n, "delivered": delivered, "cpu_us_per_event": cpu / max(delivered, 1) * 1e6,
            "track_us": t_track / n * 1e6,
            "events_per_s": n / wall, "events_per_cpu_s": n / cpu if cpu else 0.0,
            "down_events": down_n, "down_rss_growth_mb": (rss1 - rss0) / 2**20}


# --- the driver ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--down-events", type=int, default=20_000)
    ap.add_argument("--sdks", default=",".join(SDKS))
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.one:
        print(json.dumps(run_one(args.one, args.url, args.events, args.down_events)), flush=True)
        os._exit(0)  # do not wait for SDK threads still retrying the dead endpoint
    results = drive(args)
    print_table(results)
    print(json.dumps({"bench": "sdk", "results": results, "ratios": ratios(results)}))


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
            for name in args.sdks.split(","):
                out = subprocess.run([sys.executable, __file__, "--one", name, "--url", url, "--events",
                                      str(args.events), "--down-events", str(args.down_events)],
                                     capture_output=True, text=True, timeout=900, check=False)
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                if out.returncode != 0 or not lines:
                    print(f"{name} failed: {out.stderr[-2000:]}", file=sys.stderr)
                    continue
                results.append(json.loads(lines[-1]))
            return results
        finally:
            server.terminate()
            server.wait(10)


def ratios(results: list[dict[str, Any]]) -> dict[str, float]:
    by = {r["sdk"]: r for r in results}
    out: dict[str, float] = {}
    hw = by.get("headwater")
    for other in ("segment", "posthog"):
        if hw and other in by:
            out[f"cpu_per_event_{other}_over_headwater"] = by[other]["cpu_us_per_event"] / hw["cpu_us_per_event"]
            out[f"track_us_{other}_over_headwater"] = by[other]["track_us"] / hw["track_us"]
            out[f"events_per_cpu_s_headwater_over_{other}"] = hw["events_per_cpu_s"] / by[other]["events_per_cpu_s"]
    return out


def print_table(results: list[dict[str, Any]]) -> None:
    head = (f"{'sdk':<16}{'delivered':>11}{'CPU us/event':>14}{'track us':>10}{'events/s':>10}{'ev/cpu-s':>10}"
            f"{'down RSS MB':>13}")
    print(head)
    print("-" * len(head))
    for r in results:
        print(f"{r['sdk']:<16}{r['delivered']:>11}{r['cpu_us_per_event']:>14.1f}{r['track_us']:>10.2f}"
              f"{r['events_per_s']:>10.0f}"
              f"{r['events_per_cpu_s']:>10.0f}{r['down_rss_growth_mb']:>13.1f}")


if __name__ == "__main__":
    main()
