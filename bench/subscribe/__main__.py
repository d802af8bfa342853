"""`python -m bench.subscribe` (`make bench-subscribe`): the subscription server's latency and cost, on a private stack.

A producer commits page_view records (Avro, as the gateway writes them) to the events topic in transactions at
`--rate` events/s; subscribers of `event.page_view` (the real server process, real HTTP) measure Kafka commit ->
arrival for every record (probe connections) while the others only read. Phases: 1, 100 and 1,000 subscribers;
100 with and without slow and stalled subscribers beside them, interleaved (what a slow subscriber costs the
others); and N consumers of the topic in one process, decoding for each (the one-consumer-per-subscriber design
this server does not use, for comparison). Prints a table and one JSON line (`bench: subscribe`) at the end.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import urllib.request
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.subscribe import clients, consumers, producer
from bench.subscribe.stats import latency_ms, server_sample
from stack.config import StackConfig
from stack.launcher import Stack
from stack.services import services
from tests.subscribe.harness import Keys, Server, free_port, start_server

PROBES = 10
PER_PROCESS = 500


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.subscribe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=int, default=1000, help="events/s committed (default 1000)")
    p.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase (default 20)")
    p.add_argument("--subscribers", default="1,100,1000", help="subscriber counts (default 1,100,1000)")
    p.add_argument("--slow", type=int, default=10, help="slow subscribers beside 100 (default 10)")
    p.add_argument("--stalled", type=int, default=10, help="stalled subscribers beside 100 (default 10)")
    p.add_argument("--consumers", type=int, default=20, help="per-subscriber consumers to compare (default 20)")
    return p.parse_args(argv)


def _split(counts: dict[str, int]) -> list[dict[str, int]]:
    """The connections of a phase over client processes of at most PER_PROCESS each."""
    total = sum(counts.values())
    procs = max(1, -(-total // PER_PROCESS))
    return [{k: n // procs + (1 if i < n % procs else 0) for k, n in counts.items()} for i in range(procs)]


def phase(name: str, server: Server, key: str, counts: dict[str, int], *, seconds: float) -> dict[str, Any]:
    server_url, server_pid = server.url, server.proc.pid
    ctx = mp.get_context("spawn")
    pipes: list[Connection] = []
    procs: list[mp.process.BaseProcess] = []
    for part in _split(counts):
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=clients.run, args=(server_url, key, "event.page_view", part, theirs), daemon=True)
        proc.start()
        pipes.append(mine)
        procs.append(proc)
    for pipe in pipes:
        if not pipe.poll(300):
            raise RuntimeError(f"{name}: a client process did not connect in 300 s")
        said = pipe.recv()
        if said != "ready":
            raise RuntimeError(f"{name}: {said}")
    time.sleep(2.0)  # warm: every subscriber is reading the live tail
    before, t0 = server_sample(server_pid), time.time()
    for pipe in pipes:
        pipe.send("go")
    time.sleep(seconds)
    for pipe in pipes:
        pipe.send("stop")
    t1, after = time.time(), server_sample(server_pid)
    results = [pipe.recv() for pipe in pipes]
    for client_proc in procs:
        client_proc.join(10)
        if client_proc.is_alive():
            client_proc.kill()
    _wait_idle(server_url)
    tallies: dict[str, dict[str, Any]] = {}
    for r in results:
        for kind, t in r["tallies"].items():
            sums = tallies.setdefault(kind, {"records": 0, "bytes": 0, "arrivals": [], "reconnects": 0,
                                             "cutoffs": 0})
            for k in ("records", "bytes", "reconnects", "cutoffs"):
                sums[k] += t[k]
            sums["arrivals"] += t["arrivals"]
    return {"name": name, "counts": counts, "window": (t0, t1), "tallies": tallies,
            "server_cpu_s_per_s": (after["cpu_s"] - before["cpu_s"]) / (t1 - t0), "server_rss_mb": after["rss_mb"],
            "client_failures": sum(r["failed_count"] for r in results)}


def _wait_idle(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        if "headwater_subscribe_subscribers 0.0" in text:
            return
        time.sleep(0.2)


def _schema(registry_url: str) -> tuple[int, Any]:
    with urllib.request.urlopen(f"{registry_url}/subjects/headwater.events.page_view/versions/latest",
                                timeout=10) as resp:
        doc = json.loads(resp.read())
    return int(doc["id"]), json.loads(doc["schema"])


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="headwater-bench-subscribe-") as state:
        cfg = StackConfig.from_env({
            "HEADWATER_STATE_DIR": state, "HEADWATER_KAFKA_PORT": str(free_port()),
            "HEADWATER_KAFKA_CONTROLLER_PORT": str(free_port()), "HEADWATER_REGISTRY_PORT": str(free_port()),
            "HEADWATER_GATEWAY_PORT": str(free_port())})
        stack = Stack(cfg)
        try:
            print("starting a private stack (Kafka, registry) ...", flush=True)
            env = stack.up().env
            for service in services(cfg):  # the benchmark writes to Kafka itself: no gateway, no console
                if service.name in ("gateway", "console"):
                    service.process(cfg).stop()
            results = _run(args, env, Path(state))
        finally:
            stack.down()
    results["loadavg_1m"] = {"start": round(load_start, 1), "end": round(os.getloadavg()[0], 1),
                             "cores": os.cpu_count()}
    from bench.subscribe.stats import report  # noqa: PLC0415

    report(results)
    return 0


def _run(args: argparse.Namespace, env: dict[str, str], state: Path) -> dict[str, Any]:
    keys = Keys()
    server = start_server(env, state, keys, HEADWATER_SUBSCRIBE_MAX_SUBSCRIBERS="5000",
                          HEADWATER_SUBSCRIBE_MAX_PER_KEY="5000", HEADWATER_SUBSCRIBE_LOG_LEVEL="WARNING")
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    mine, theirs = ctx.Pipe()
    schema_id, schema_doc = _schema(env["REGISTRY_URL"])
    prod = ctx.Process(target=producer.run, args=(env["KAFKA_BOOTSTRAP"], env["EVENTS_TOPIC"], stop, theirs),
                       kwargs={"schema_doc": schema_doc, "schema_id": schema_id, "rate": args.rate}, daemon=True)
    prod.start()
    phases = []
    try:
        for n in (int(x) for x in args.subscribers.split(",")):
            probes = min(PROBES, n)
            print(f"phase: {n} subscribers ...", flush=True)
            phases.append(phase(f"n{n}", server, keys.all, {"probe": probes, "drain": n - probes},
                                seconds=args.seconds))
        base = {"probe": PROBES, "drain": 100 - PROBES}
        for i in range(2):  # interleaved A/B: the same 100, alone and beside slow and stalled subscribers
            print(f"phase: 100 subscribers, alone and beside {args.slow} slow + {args.stalled} stalled ({i + 1}/2)",
                  flush=True)
            phases.append(phase(f"n100-alone-{i + 1}", server, keys.all, base, seconds=args.seconds))
            phases.append(phase(f"n100-beside-slow-{i + 1}", server, keys.all,
                                {**base, "slow": args.slow, "stalled": args.stalled}, seconds=args.seconds))
        print(f"phase: {args.consumers} consumers of the topic, one per subscriber ...", flush=True)
        c_mine, c_theirs = ctx.Pipe()
        cproc = ctx.Process(target=consumers.run, args=(env["KAFKA_BOOTSTRAP"], env["REGISTRY_URL"],
                                                        env["EVENTS_TOPIC"], c_theirs),
                            kwargs={"n": args.consumers, "seconds": args.seconds})
        cproc.start()
        per_consumer = c_mine.recv()
        cproc.join(30)
    finally:
        stop.set()
        produced: dict[str, Any] = mine.recv() if mine.poll(60) else {"commits": [], "rate": 0.0}
        prod.join(30)
        server.stop()
    return {"rate": args.rate, "produced_rate": round(produced["rate"], 1), "seconds": args.seconds,
            "phases": [latency_ms(p, produced["commits"]) for p in phases], "per_subscriber_consumers": per_consumer}


if __name__ == "__main__":
    sys.exit(main())
