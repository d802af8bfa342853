"""Connection scale: memory per idle keep-alive connection, and how recycling spreads load over gateway processes.

    python -m loadtest.connections idle --connections 10000     # one gateway process, RSS delta from /proc
    python -m loadtest.connections spread --users 3             # two workers, recycling off then on
    python -m loadtest.connections kill --every 10              # SIGKILL a worker every 10 s during a run

`idle` opens that many connections to a private one-worker gateway, makes one request on each (so each is an
established HTTP keep-alive connection in aiohttp's handler) and holds them while reading the process's RSS.
`spread` drives a private two-worker gateway (SO_REUSEPORT: the kernel picks a worker per new connection) with
3 locust connections, first with recycling off, then with a low request cap, and reads each worker's CPU
seconds: without recycling one worker must hold at least two of the three connections for the whole run.
`kill` runs load against a private two-worker gateway and SIGKILLs one of its workers every `--every` seconds
(the supervisor restarts it): every connection to that worker breaks mid-request, locust resends those
batches, and the reconciliation must still find every acknowledged event. All write their figures to
`<out>/connections.json` (merged with what is there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from common.envfile import read_env, write_env
from loadtest import run as loadrun
from loadtest.curve import RESULTS_DIR
from loadtest.gateway_proc import cpu_seconds, open_sockets, private_gateway, rss_bytes
from loadtest.settings import DEFAULT_RUNS_DIR, DEFAULT_STACK_ENV

REQUEST = b"GET /livez HTTP/1.1\r\nHost: gateway\r\nConnection: keep-alive\r\n\r\n"


async def _open_one(host: str, port: int) -> asyncio.StreamWriter:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(REQUEST)
    head = await reader.readuntil(b"\r\n\r\n")
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    length = lengths[0] if lengths else 0
    if length:
        await reader.readexactly(length)
    if b"connection: close" in head.lower():
        raise RuntimeError("the gateway closed a connection after one request")
    return writer


async def _hold(url: str, count: int, pid: int, settle_s: float) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    await asyncio.sleep(settle_s)
    before = rss_bytes(pid)
    writers: list[asyncio.StreamWriter] = []
    started = time.monotonic()
    for start in range(0, count, 500):
        writers += await asyncio.gather(*(_open_one(host, int(port)) for _ in range(min(500, count - start))))
    opened_s = time.monotonic() - started
    await asyncio.sleep(settle_s)
    after, sockets = rss_bytes(pid), open_sockets(pid)
    for writer in writers:
        writer.close()
    return {"connections": count, "rss_before_bytes": before, "rss_after_bytes": after,
            "bytes_per_connection": (after - before) / count, "gateway_sockets": sockets,
            "open_seconds": round(opened_s, 2)}


def idle(args: argparse.Namespace) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < args.connections + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.connections + 1000), hard))
    extra = {"HEADWATER_GATEWAY_IDLE_TIMEOUT_S": "600", "HEADWATER_GATEWAY_CONN_MAX_AGE_S": "3600"}
    with tempfile.TemporaryDirectory() as tmp, \
            private_gateway(read_env(Path(args.stack_env)), 1, extra, Path(tmp) / "gateway.log") as gateway:
        result = asyncio.run(_hold(gateway.url, args.connections, gateway.pid, args.settle))
    print(f"{result['connections']} idle keep-alive connections: gateway RSS {result['rss_before_bytes'] / 2**20:.1f} "
          f"-> {result['rss_after_bytes'] / 2**20:.1f} MiB, {result['bytes_per_connection'] / 1024:.1f} KiB per "
          f"connection ({result['gateway_sockets']} sockets open in the gateway)")
    return {"idle": result}


def spread(args: argparse.Namespace) -> dict[str, Any]:
    stack_env = read_env(Path(args.stack_env))
    phases = []
    for label, cap in (("off", "1000000000"), ("on", str(args.max_requests))):
        extra = {"HEADWATER_GATEWAY_CONN_MAX_REQUESTS": cap, "HEADWATER_GATEWAY_CONN_MAX_AGE_S": "3600"}
        with tempfile.TemporaryDirectory() as tmp, \
                private_gateway(stack_env, 2, extra, Path(tmp) / "gateway.log") as gateway:
            env_file = Path(tmp) / "stack.env"
            write_env(env_file, {**stack_env, "GATEWAY_URL": gateway.url, "HEADWATER_WRITE_KEY": gateway.write_key})
            workers = gateway.workers()
            before = [cpu_seconds(pid) for pid in workers]
            summary = loadrun.run(loadrun.parser().parse_args([
                "--nodes", "3000", "--rate", f"{args.load / 3000:.9g}", "--batch", "10", "--users", str(args.users),
                "--duration", str(args.duration), "--stack-env", str(env_file), "--runs-dir", args.runs_dir,
                "--quiet"]))
            used = [cpu_seconds(pid) - b for pid, b in zip(workers, before, strict=True)]
        shares = [round(u / sum(used), 3) if sum(used) else 0.0 for u in used]
        phases.append({"recycling": label, "max_requests": int(cap), "users": args.users,
                       "worker_cpu_s": [round(u, 2) for u in used], "shares": shares,
                       "missing": summary.reconcile.missing, "acknowledged": summary.reconcile.acknowledged})
        print(f"recycling {label} (max {cap} requests per connection): worker CPU shares {shares}, "
              f"missing {summary.reconcile.missing} of {summary.reconcile.acknowledged}", flush=True)
    return {"spread": phases}


def kill(args: argparse.Namespace) -> dict[str, Any]:
    stack_env = read_env(Path(args.stack_env))
    with tempfile.TemporaryDirectory() as tmp, private_gateway(stack_env, 2, {}, Path(tmp) / "gateway.log") as gateway:
        env_file = Path(tmp) / "stack.env"
        write_env(env_file, {**stack_env, "GATEWAY_URL": gateway.url, "HEADWATER_WRITE_KEY": gateway.write_key})
        killed: list[int] = []
        done = threading.Event()

        def killer() -> None:
            while not done.wait(args.every):
                workers = [pid for pid in gateway.workers() if pid != gateway.pid]
                if workers:
                    os.kill(workers[0], signal.SIGKILL)
                    killed.append(workers[0])

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            summary = loadrun.run(loadrun.parser().parse_args([
                "--nodes", "5000", "--rate", f"{args.load / 5000:.9g}", "--batch", "10", "--users", "20",
                "--duration", str(args.duration), "--stack-env", str(env_file), "--runs-dir", args.runs_dir,
                "--quiet"]))
        finally:
            done.set()
            thread.join()
    r = summary.reconcile
    result = {"workers_killed": len(killed), "duration_s": args.duration, "requests": summary.requests,
              "retried_requests": summary.request_failures, "acknowledged": r.acknowledged, "found": r.found,
              "missing": r.missing, "duplicates": r.duplicates, "seq_gaps": r.seq_gaps}
    print(f"{len(killed)} workers killed in {args.duration:g}s: {summary.request_failures} of {summary.requests} "
          f"requests retried; acknowledged {r.acknowledged}, found {r.found}, missing {r.missing}, "
          f"duplicates {r.duplicates}, seq gaps {r.seq_gaps}")
    return {"kill": result}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.connections", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    p_idle = sub.add_parser("idle", help="memory per idle keep-alive connection on one gateway process")
    p_idle.add_argument("--connections", type=int, default=10_000)
    p_idle.add_argument("--settle", type=float, default=2.0, help="seconds to wait before each RSS reading")
    p_spread = sub.add_parser("spread", help="load per worker without and with connection recycling")
    p_spread.add_argument("--users", type=int, default=3)
    p_spread.add_argument("--load", type=float, default=1000.0, help="offered events/s")
    p_spread.add_argument("--duration", type=float, default=15.0)
    p_spread.add_argument("--max-requests", type=int, default=20, help="recycling cap in the second phase")
    p_spread.add_argument("--runs-dir", default=str(DEFAULT_RUNS_DIR))
    p_kill = sub.add_parser("kill", help="SIGKILL a gateway worker every few seconds during a run")
    p_kill.add_argument("--every", type=float, default=10.0)
    p_kill.add_argument("--load", type=float, default=2000.0, help="offered events/s")
    p_kill.add_argument("--duration", type=float, default=45.0)
    p_kill.add_argument("--runs-dir", default=str(DEFAULT_RUNS_DIR))
    for sp in (p_idle, p_spread, p_kill):
        sp.add_argument("--stack-env", default=str(DEFAULT_STACK_ENV))
        sp.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = p.parse_args(argv)
    result = {"idle": idle, "spread": spread, "kill": kill}[args.what](args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "connections.json"
    merged = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**merged, **result}, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
