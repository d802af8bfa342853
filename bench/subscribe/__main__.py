"""`python -m bench.subscribe` (`make bench-subscribe`): the subscription server's latency and cost, on a private stack.

A producer commits page_view records (Avro, as the gateway writes them) to the events topic in transactions at
`--rate` events/s; subscribers of `event.page_view` (the real server process, real HTTP) measure Kafka commit ->
arrival for every record (probe connections, in a client process of their own) while the others only read (in
processes of at most 250). Phases: 1, 100 and 1,000 subscribers; 100 alone and beside subscribers that never read
or read slowly, interleaved (what a slow subscriber costs the others); with `--baseline REV`, 100 on that
revision's server and on this one, then each followers phase on both, interleaved (before/after in one run);
and N consumers of the topic in one process, decoding for each (the one-consumer-per-subscriber design this
server does not use). Each phase reports
the server's hold time (its histogram), the CPU of the server, the clients, the broker and the producer apart,
and its failed connections by reason. With four CPUs or more the server is pinned to a core of its own
(HEADWATER_BENCH_PIN=1: always, 0: never); on two, pinning would leave the broker, the producer and every client
queueing on the other core, and the latencies would be that core's queue. CPU is counted per process either way.
Prints a table, the load average, and one JSON line (`bench: subscribe`) at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

from bench import cpus
from bench.private_stack import stack_config
from bench.subscribe import clients, consumers, producer
from bench.subscribe.server import Keys, Server, start_server
from bench.subscribe.stats import cpu_seconds, hold_pct, latency_ms, scrape_hold, server_sample
from stack.config import REPO_ROOT, StackConfig
from stack.launcher import Stack
from stack.services import services

PROBES = 10
PER_PROCESS = 250


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.subscribe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=int, default=1000, help="events/s committed (default 1000)")
    p.add_argument("--tx-per-s", type=int, default=25,
                   help="Kafka transactions per second (default 25: the gateway commits a transaction per group of "
                   "batches, so 1,000 events/s sent in the SDKs' 40-event batches is at most 25; 100 is the "
                   "gateway's group commit under heavy load, and costs the broker about 4 x the CPU)")
    p.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase (default 20)")
    p.add_argument("--subscribers", default="1,100,1000", help="subscriber counts (default 1,100,1000)")
    p.add_argument("--followers", default="1000",
                   help="subscriber counts of phases where all but the timed ones follow one node each (a filter "
                   "on node_id, about 1 record/s each; default 1000, '' none): 1,000 full-stream subscribers at "
                   "1,000 events/s are 1.5 GB/s, more than two cores read beside the server")
    p.add_argument("--slow", type=int, default=0, help="slow subscribers (read 8 KiB / 100 ms) beside 100 (default 0)")
    p.add_argument("--stalled", type=int, default=1, help="subscribers that never read beside 100 (default 1)")
    p.add_argument("--baseline", metavar="REV", help="also run 100 subscribers on the server of git revision REV, "
                   "interleaved with this one's (--rounds times): before/after in one run")
    p.add_argument("--rounds", type=int, default=2, help="alone/beside rounds, interleaved (default 2; 0: none)")
    p.add_argument("--warmup", type=float, default=60.0,
                   help="seconds of load with one subscriber before the first phase, not reported (default 60: a "
                   "fresh broker's JIT compiler alone takes about half a core for its first minute under load)")
    p.add_argument("--consumers", type=int, default=20,
                   help="per-subscriber consumers to compare (default 20; 0: none)")
    return p.parse_args(argv)


def _split(counts: dict[str, int]) -> list[dict[str, int]]:
    """The connections of a phase over client processes: the probes alone in one (their arrival times are the
    server's, not a busy client's), the others in processes of at most PER_PROCESS each."""
    rest = {k: n for k, n in counts.items() if k != "probe" and n}
    total = sum(rest.values())
    procs = -(-total // PER_PROCESS)
    parts = [{k: n // procs + (1 if i < n % procs else 0) for k, n in rest.items()} for i in range(procs)]
    return ([{"probe": counts["probe"]}] if counts.get("probe") else []) + parts


class Roles(NamedTuple):
    """The processes whose CPU a phase reports apart: the server, and the load around it."""

    server: int
    broker: int
    producer: int
    plan: cpus.CpuPlan | None


def _cpu(pids: list[int]) -> float:
    """CPU seconds of processes (an exited one counts what it had used while it could be read)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += cpu_seconds(pid)
    return total


def run_phase(name: str, server: Server, key: str, counts: dict[str, int], roles: Roles, *,
          seconds: float) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    pipes: list[Connection] = []
    procs: list[mp.process.BaseProcess] = []
    for part in _split(counts):
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=clients.run, args=(server.url, key, "event.page_view", part, theirs), daemon=True)
        proc.start()
        pipes.append(mine)
        procs.append(proc)
    ready = []
    for pipe in pipes:
        if not pipe.poll(clients.OPEN_TIMEOUT_S + 60):
            raise RuntimeError(f"{name}: a client process did not answer in {clients.OPEN_TIMEOUT_S + 60} s")
        ready.append(pipe.recv())
    opened, wanted = sum(r["opened"] for r in ready), sum(r["wanted"] for r in ready)
    open_failures = _merge(r["failures"] for r in ready)
    if opened < wanted:
        print(f"  {name}: {opened} of {wanted} connections opened in {max(r['open_s'] for r in ready)} s; "
              f"failures: {open_failures}", flush=True)
    time.sleep(2.0)  # warm: every subscriber is reading the live tail
    client_pids = [p.pid for p in procs if p.pid]
    hold0, t0 = _scrape(server.url), time.time()
    cpu0 = (_cpu([roles.server]), _cpu(client_pids), _cpu([roles.broker]), _cpu([roles.producer]))
    for pipe in pipes:
        pipe.send("go")
    time.sleep(seconds)
    for pipe in pipes:
        pipe.send("stop")
    t1, after, hold1 = time.time(), server_sample(roles.server), _scrape(server.url)
    cpu1 = (_cpu([roles.server]), _cpu(client_pids), _cpu([roles.broker]), _cpu([roles.producer]))
    results = [pipe.recv() for pipe in pipes]
    for client_proc in procs:
        client_proc.join(10)
        if client_proc.is_alive():
            client_proc.kill()
    _wait_idle(server.url)
    tallies: dict[str, dict[str, Any]] = {}
    for r in results:
        for kind, t in r["tallies"].items():
            sums = tallies.setdefault(kind, {"records": 0, "bytes": 0, "arrivals": [], "reconnects": 0,
                                             "cutoffs": 0})
            for k in ("records", "bytes", "reconnects", "cutoffs"):
                sums[k] += t[k]
            sums["arrivals"] += t["arrivals"]
    window = t1 - t0
    cpu = {role: round((b - a) / window, 3) for role, a, b in zip(("server", "clients", "broker", "producer"),
                                                                   cpu0, cpu1, strict=True)}
    failures = _merge(r["failures"] for r in results)
    return {"name": name, "counts": counts, "window": (t0, t1), "tallies": tallies, "opened": opened,
            "server_cpu_s_per_s": cpu["server"], "server_rss_mb": after["rss_mb"], "cpu_s_per_s": cpu,
            "server_hold_ms": hold_pct(hold0, hold1), "client_failures": sum(failures.values()),
            "failures": {**{f"before start: {k}": v for k, v in open_failures.items()}, **failures}}


def _scrape(url: str) -> dict[float, float]:
    try:
        return scrape_hold(url)
    except OSError:
        return {}


def _merge(counters: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counters:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def _wait_idle(url: str) -> None:
    """Until the server has closed the phase's subscriptions (it may be too busy to answer at once)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
                text = resp.read().decode()
            if "headwater_subscribe_subscribers 0.0" in text and "headwater_subscribe_readers 0.0" in text:
                return
        except OSError:
            pass
        time.sleep(0.2)
    print("  the server still holds subscriptions of the last phase after 120 s", flush=True)


def _schema(registry_url: str) -> tuple[int, Any]:
    with urllib.request.urlopen(f"{registry_url}/subjects/headwater.events.page_view/versions/latest",
                                timeout=10) as resp:
        doc = json.loads(resp.read())
    return int(doc["id"]), json.loads(doc["schema"])


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="headwater-bench-subscribe-") as state:
        cfg = stack_config(state)
        stack = Stack(cfg)
        try:
            print("starting a private stack (Kafka, registry) ...", flush=True)
            env = stack.up().env
            for service in services(cfg):  # the benchmark writes to Kafka and runs its own server: no gateway,
                if service.name.startswith(("gateway", "console", "subscribe")):  # console or stack subscribe
                    service.process(cfg).stop()
            results = _run(args, env, Path(state), stack, cfg)
        finally:
            stack.down()
    results["loadavg_1m"] = {"start": round(load_start, 1), "end": round(os.getloadavg()[0], 1),
                             "cores": os.cpu_count()}
    from bench.subscribe.stats import report  # noqa: PLC0415

    report(results)
    return 0


def _pin(stack: Stack, cfg: StackConfig, *servers: int) -> cpus.CpuPlan | None:
    """The server on a core of its own; the broker, registry, producer and client processes (children of this
    one, started after) on the others: by default with four usable CPUs or more (HEADWATER_BENCH_PIN=1: with two or
    more, 0: never)."""
    wanted = os.environ.get("HEADWATER_BENCH_PIN", "auto")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    plan = cpus.plan(wanted == "1" or (wanted != "0" and usable >= 4))
    if plan is None:
        print(f"not pinning CPUs ({usable} usable; HEADWATER_BENCH_PIN={wanted})", flush=True)
        return None
    for pid in (stack.kafka.node(1).process.pid(), *(s.process(cfg).pid() for s in services(cfg))):
        if pid:
            cpus.pin_process_tree(pid, plan.others)
    cpus.pin_threads(os.getpid(), plan.others)
    for server in servers:
        cpus.pin_process_tree(server, plan.measured)
    print(f"pinning: the subscription server on CPU {sorted(plan.measured)}, broker, registry, producer and "
          f"subscriber clients on CPUs {sorted(plan.others)}", flush=True)
    return plan


def _run(args: argparse.Namespace, env: dict[str, str], state: Path, stack: Stack,
         cfg: StackConfig) -> dict[str, Any]:
    keys = Keys()
    def start(cwd: Path | None = None) -> Server:
        return start_server(env, state, keys, cwd=cwd, HEADWATER_SUBSCRIBE_MAX_SUBSCRIBERS="5000",
                            HEADWATER_SUBSCRIBE_MAX_PER_KEY="5000", HEADWATER_SUBSCRIBE_LOG_LEVEL="WARNING",
                            HEADWATER_SUBSCRIBE_IDLE_READER_S="1")

    server = start()
    baseline = None
    if args.baseline:
        old = state / "baseline"
        old.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline, "subscribe"], cwd=REPO_ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        baseline = start(old)
    plan = _pin(stack, cfg, server.proc.pid, *([baseline.proc.pid] if baseline else []))
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    mine, theirs = ctx.Pipe()
    schema_id, schema_doc = _schema(env["REGISTRY_URL"])
    prod = ctx.Process(target=producer.run, args=(env["KAFKA_BOOTSTRAP"], env["EVENTS_TOPIC"], stop, theirs),
                       kwargs={"schema_doc": schema_doc, "schema_id": schema_id, "rate": args.rate,
                               "tx_per_s": args.tx_per_s}, daemon=True)
    prod.start()
    roles = Roles(server.proc.pid, stack.kafka.node(1).process.pid() or 0, prod.pid or 0, plan)
    phases: list[dict[str, Any] | None] = []

    def phase(name: str, *a: Any, **kw: Any) -> dict[str, Any] | None:
        """One phase; a phase that breaks is reported and skipped, the run goes on."""
        try:
            return run_phase(name, *a, **kw)
        except Exception as exc:  # reported; the other phases are still measured
            print(f"  {name}: the phase failed: {type(exc).__name__}: {exc}", flush=True)
            failed.append({"name": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            return None

    failed: list[dict[str, str]] = []
    try:
        if args.warmup > 0:
            print(f"warm-up: {args.warmup:g} s of load with one subscriber (not reported) ...", flush=True)
            phase("warmup", server, keys.all, {"probe": 1}, roles, seconds=args.warmup)
        for n in (int(x) for x in args.subscribers.split(",")):
            probes = min(PROBES, n)
            print(f"phase: {n} subscribers ...", flush=True)
            phases.append(phase(f"n{n}", server, keys.all, {"probe": probes, "drain": n - probes},
                                roles, seconds=args.seconds))
        # follower count -> the mix: the timed full-stream probes, the rest each following one node
        followers = {n: {"probe": min(PROBES, n), "follower": n - min(PROBES, n)}
                     for n in (int(x) for x in args.followers.split(",") if x.strip())}
        for n, mix in followers.items():
            print(f"phase: {n} subscribers, {mix['follower']} of them following one node each ...", flush=True)
            phases.append(phase(f"n{n}-followers", server, keys.all, mix, roles, seconds=args.seconds))
        base = {"probe": PROBES, "drain": 100 - PROBES}
        for i in range(args.rounds):  # interleaved A/B: the same 100, alone and beside slow and stalled subscribers
            print(f"phase: 100 subscribers, alone and beside {args.slow} slow + {args.stalled} stalled "
                  f"({i + 1}/{args.rounds})", flush=True)
            phases.append(phase(f"n100-alone-{i + 1}", server, keys.all, base, roles, seconds=args.seconds))
            phases.append(phase(f"n100-beside-slow-{i + 1}", server, keys.all,
                                {**base, "slow": args.slow, "stalled": args.stalled}, roles,
                                seconds=args.seconds))
        for i in range(args.rounds if baseline else 0):  # before/after: the same 100 on both servers, interleaved
            print(f"phase: 100 subscribers on {args.baseline}'s server and on this one ({i + 1}/{args.rounds})",
                  flush=True)
            assert baseline is not None
            phases.append(phase(f"n100@{args.baseline}-{i + 1}", baseline, keys.all, base, roles._replace(
                server=baseline.proc.pid), seconds=args.seconds))
            phases.append(phase(f"n100@this-{i + 1}", server, keys.all, base, roles, seconds=args.seconds))
            for n, mix in followers.items():  # and the followers phases, as above
                phases.append(phase(f"n{n}-followers@{args.baseline}-{i + 1}", baseline, keys.all, mix,
                                    roles._replace(server=baseline.proc.pid), seconds=args.seconds))
                phases.append(phase(f"n{n}-followers@this-{i + 1}", server, keys.all, mix, roles,
                                    seconds=args.seconds))
        per_consumer = None
        if args.consumers:
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
        if baseline is not None:
            baseline.stop()
    return {"rate": args.rate, "tx_per_s": args.tx_per_s, "produced_rate": round(produced["rate"], 1),
            "seconds": args.seconds,
            "pinning": plan.describe().replace("measured process", "server") if plan else "not pinned",
            "phases": [latency_ms(p, produced["commits"]) for p in phases if p is not None],
            "failed_phases": failed, "per_subscriber_consumers": per_consumer}


if __name__ == "__main__":
    sys.exit(main())
