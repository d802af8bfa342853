"""What TLS costs per event: the same batches sent over plain HTTP and over TLS, to a gateway alone and through
HAProxy, in alternating rounds of one run; CPU read from /proc for the gateway and HAProxy processes.

    python -m bench.tls [--rounds 3] [--batches 600] [--concurrency 16]      (make bench-tls)

Variants (one private Kafka + registry; gateways and HAProxy started here, one worker each):

| name | path |
| --- | --- |
| gw-http | client -> gateway, HTTP |
| gw-tls | client -> gateway, HTTPS (the single-node deployment) |
| ha-http | client -> HAProxy -> gateway, HTTP on both hops |
| ha-tls-front | client -> HAProxy (terminates TLS) -> gateway over HTTP |
| ha-tls | client -> HAProxy (TLS) -> gateway over TLS, HAProxy showing its client certificate (cluster profile) |
| ha-tls-unix | client -> HAProxy (TLS) -> gateway's unix socket (HAProxy on the gateways' host) |
| gw-http-new, gw-tls-new | as gw-http / gw-tls, but a new connection for every batch (the handshake's cost) |

Prints gateway and HAProxy CPU microseconds per event for each, the TLS differences, and one JSON line with the
load average. Not a test: nothing is asserted. Compare rows of one run, not absolute figures between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.gateway.costs import cpu_seconds
from bench.gateway.schemas import schema_cache, schema_doc
from bench.gateway.workload import Body, Workload
from bench.private_stack import stack_config
from common.ports import free_port
from common.tls import client_context
from common.write_keys import key_entry
from stack.certs import CertificateAuthority
from stack.launcher import Stack

ROOT = Path(__file__).resolve().parents[1]
PROXY_NAME = "haproxy.bench"
VARIANTS = ("gw-http", "gw-tls", "ha-http", "ha-tls-front", "ha-tls", "ha-tls-unix", "gw-http-new", "gw-tls-new")


@dataclass
class Gateway:
    proc: subprocess.Popen[bytes]
    port: int
    tls: bool
    socket: str = ""


def start_gateway(env: dict[str, str], ca: CertificateAuthority | None, proxy_socket: str = "") -> Gateway:
    port = free_port()
    extra: dict[str, str] = {}
    if ca is not None:
        cert = ca.issue("gateway")
        extra = {"HEADWATER_GATEWAY_TLS_CERT": str(cert.cert), "HEADWATER_GATEWAY_TLS_KEY": str(cert.key),
                 "HEADWATER_GATEWAY_TLS_CLIENT_CA": str(ca.pem), "HEADWATER_GATEWAY_TRUSTED_PROXY_NAMES": PROXY_NAME}
    proc_env = {**os.environ, **env, "HEADWATER_GATEWAY_WRITE_KEYS": key_entry(env["HEADWATER_WRITE_KEY"], "dev"),
                "HEADWATER_GATEWAY_PORT": str(port), "HEADWATER_GATEWAY_WORKERS": "1",
                "HEADWATER_GATEWAY_LOG_LEVEL": "WARNING",
                "HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX": f"headwater-bench-tls-{port}",
                "HEADWATER_GATEWAY_PROXY_SOCKET": proxy_socket, **extra}
    proc = subprocess.Popen([sys.executable, "-m", "gateway"], cwd=ROOT, env=proc_env)
    url = f"{'https' if ca else 'http'}://localhost:{port}/readyz"
    context = client_context(str(ca.pem)) if ca else None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                if resp.status == 200:
                    return Gateway(proc, port, ca is not None, proxy_socket)
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("a bench gateway did not become ready")


def haproxy_config(front_tls: Path | None, backend: Gateway, ca: CertificateAuthority, client: Path,
                   port: int, *, unix: bool = False) -> str:
    bind = f"bind 127.0.0.1:{port}" + (f" ssl crt {front_tls}" if front_tls else "")
    server = f"server gw unix@{backend.socket}" if unix else f"server gw 127.0.0.1:{backend.port}"
    if backend.tls and not unix:
        server += f" ssl verify required ca-file {ca.pem} crt {client} sni str(localhost)"
    return "\n".join([
        "global", "    maxconn 4000", "    nbthread 1", "defaults", "    mode http", "    option http-keep-alive",
        "    http-reuse safe", "    timeout connect 2s", "    timeout client 60s", "    timeout server 60s",
        "frontend f", f"    {bind}", "    option forwardfor", "    default_backend b",
        "backend b", f"    {server}", ""])


def start_haproxy(folder: Path, name: str, text: str, port: int) -> subprocess.Popen[bytes]:
    path = folder / f"{name}.cfg"
    path.write_text(text)
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    proc = subprocess.Popen([binary, "-db", "-f", str(path)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"haproxy {name} did not start")


async def send(url: str, key: str, bodies: list[Body], concurrency: int, context: ssl.SSLContext | None, *,
               new_connections: bool = False) -> tuple[int, int]:
    """Every body sent once by `concurrency` workers (kept-alive connections, or a new one per batch);
    (events acknowledged, errors)."""
    queue = list(reversed(bodies))
    ok = errors = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal ok, errors
        while queue:
            body = queue.pop()
            headers = {"Authorization": f"Bearer {key}", "Content-Type": body.content_type,
                       "Content-Encoding": "zstd"}
            try:
                async with session.post(url, data=body.data, headers=headers) as resp:
                    await resp.read()
                    ok, errors = (ok + body.events, errors) if resp.status == 200 else (ok, errors + 1)
            except aiohttp.ClientError:
                errors += 1

    connector = aiohttp.TCPConnector(limit=concurrency, ssl=context if context else False,
                                     force_close=new_connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return ok, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tls", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=600, help="batches of 40 events per variant and round")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--kind", choices=("json", "avro"), default="json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="headwater-bench-tls-") as state:
        folder = Path(state)
        cfg = stack_config(state)
        stack = Stack(cfg)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            print("starting a private stack (Kafka, registry) ...", flush=True)
            env = stack.up().env
            result = _run(env, folder, procs, args)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            stack.down()
    print(json.dumps(result))
    return 0


def _run(env: dict[str, str], folder: Path, procs: list[subprocess.Popen[bytes]],
         args: argparse.Namespace) -> dict[str, object]:
    ca = CertificateAuthority(folder / "tls", "bench CA")
    front = ca.combined_pem(ca.issue("haproxy"))
    client = ca.combined_pem(ca.issue(PROXY_NAME, usage="client"))
    plain, tls = start_gateway(env, None, str(folder / "gateway.sock")), start_gateway(env, ca)
    procs += [plain.proc, tls.proc]
    ports = {name: free_port() for name in ("ha-http", "ha-tls-front", "ha-tls", "ha-tls-unix")}
    haproxies = {
        "ha-http": start_haproxy(folder, "ha-http", haproxy_config(None, plain, ca, client, ports["ha-http"]),
                                 ports["ha-http"]),
        "ha-tls-front": start_haproxy(folder, "ha-tls-front",
                                      haproxy_config(front, plain, ca, client, ports["ha-tls-front"]),
                                      ports["ha-tls-front"]),
        "ha-tls": start_haproxy(folder, "ha-tls", haproxy_config(front, tls, ca, client, ports["ha-tls"]),
                                ports["ha-tls"]),
        "ha-tls-unix": start_haproxy(folder, "ha-tls-unix",
                                     haproxy_config(front, plain, ca, client, ports["ha-tls-unix"], unix=True),
                                     ports["ha-tls-unix"]),
    }
    procs += list(haproxies.values())
    cache = asyncio.run(schema_cache(env["REGISTRY_URL"]))
    latest = cache.by_version(cache.routes["page_view"], None)
    if latest is None:
        raise RuntimeError("page_view has no schema in the registry")
    workload = Workload(json.dumps(schema_doc(env["REGISTRY_URL"], latest.schema_id)), latest.schema_id)
    context = client_context(str(ca.pem))
    routes = {  # variant -> (url, client TLS, new connection per batch, gateway process, HAProxy process)
        "gw-http": (f"http://localhost:{plain.port}", False, False, plain.proc, None),
        "gw-tls": (f"https://localhost:{tls.port}", True, False, tls.proc, None),
        "ha-http": (f"http://localhost:{ports['ha-http']}", False, False, plain.proc, haproxies["ha-http"]),
        "ha-tls-front": (f"https://localhost:{ports['ha-tls-front']}", True, False, plain.proc,
                         haproxies["ha-tls-front"]),
        "ha-tls": (f"https://localhost:{ports['ha-tls']}", True, False, tls.proc, haproxies["ha-tls"]),
        "ha-tls-unix": (f"https://localhost:{ports['ha-tls-unix']}", True, False, plain.proc,
                        haproxies["ha-tls-unix"]),
        "gw-http-new": (f"http://localhost:{plain.port}", False, True, plain.proc, None),
        "gw-tls-new": (f"https://localhost:{tls.port}", True, True, tls.proc, None),
    }
    rows: dict[str, list[tuple[float, float, float]]] = {v: [] for v in VARIANTS}
    key = env["HEADWATER_WRITE_KEY"]
    for url, tls_on, _, _, _ in routes.values():  # warm-up: schemas cached, connections made
        asyncio.run(send(url + "/v1/batch", key, workload.bodies(args.kind, 20), 4, context if tls_on else None))
    for r in range(args.rounds):
        for name in VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS)):
            url, tls_on, new, gw, ha = routes[name]
            bodies = workload.bodies(args.kind, args.batches)
            g0, h0, t0 = cpu_seconds(gw.pid), cpu_seconds(ha.pid) if ha else 0.0, time.perf_counter()
            events, errors = asyncio.run(send(url + "/v1/batch", key, bodies, args.concurrency,
                                              context if tls_on else None, new_connections=new))
            elapsed = time.perf_counter() - t0
            g, h = cpu_seconds(gw.pid) - g0, (cpu_seconds(ha.pid) - h0) if ha else 0.0
            n = max(1, events)
            rows[name].append((g * 1e6 / n, h * 1e6 / n, events / elapsed))
            print(f"round {r + 1} {name:13} {events / elapsed:8,.0f} ev/s  gateway {g * 1e6 / n:6.1f} µs/event  "
                  f"haproxy {h * 1e6 / n:6.1f} µs/event  errors {errors}", flush=True)
    return _report(rows, args)


def _report(rows: dict[str, list[tuple[float, float, float]]], args: argparse.Namespace) -> dict[str, object]:
    mean = {v: tuple(sum(r[i] for r in rs) / len(rs) for i in range(3)) for v, rs in rows.items()}
    delta = {
        "gateway_tls_us_per_event": mean["gw-tls"][0] - mean["gw-http"][0],
        "haproxy_termination_us_per_event": mean["ha-tls-front"][1] - mean["ha-http"][1],
        "haproxy_tls_both_hops_us_per_event": mean["ha-tls"][1] - mean["ha-http"][1],
        "gateway_behind_tls_haproxy_us_per_event": mean["ha-tls"][0] - mean["ha-tls-front"][0],
        "gateway_behind_unix_socket_us_per_event": mean["ha-tls-unix"][0] - mean["ha-tls-front"][0],
        "gateway_handshake_us_per_connection": (mean["gw-tls-new"][0] - mean["gw-http-new"][0]) * 40
        - (mean["gw-tls"][0] - mean["gw-http"][0]) * 40,
    }
    print()
    print(f"{'variant':13} {'events/s':>9} {'gateway µs/ev':>14} {'haproxy µs/ev':>14}")
    for v in VARIANTS:
        print(f"{v:13} {mean[v][2]:9,.0f} {mean[v][0]:14.1f} {mean[v][1]:14.1f}")
    for k, value in delta.items():
        print(f"{k}: {value:.1f}")
    now = dt.datetime.now(dt.UTC)
    return {"bench": "tls", "date": now.date().isoformat(), "at": now.isoformat(timespec="seconds"),
            "rounds": args.rounds, "batches": args.batches, "concurrency": args.concurrency, "kind": args.kind,
            "loadavg": os.getloadavg()[0], "variants": {v: [round(x, 2) for x in mean[v]] for v in VARIANTS},
            **{k: round(v, 2) for k, v in delta.items()}}


if __name__ == "__main__":
    sys.exit(main())
