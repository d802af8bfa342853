"""`python -m bench.peers` (`make bench-peers`): the gateway against a native peer, Benthos v4.27.0, doing the same
job on one private broker with the same bodies, A/B interleaved; prints per side and round events/s, events per
CPU-second of the server and of server + broker, the ack latency at one common open-loop rate, the durability
check, the ratios gateway ÷ peer and their medians; ends with one JSON line (appended to
docs/benchmarks/runs/peers.jsonl, and the dated page regenerated, unless HEADWATER_PEERS_RECORD=0).

Each server runs alone on one pinned core (core 0); the broker, the registry, the gateway's supervisor and the
load generator share the others (on a 2-core machine: one core for all of them, which bounds what either side can
reach). Variables: HEADWATER_PEERS_SECONDS (each phase, default 8), HEADWATER_PEERS_ROUNDS (default 2),
HEADWATER_PEERS_RATE (the common open-loop rate in events/s; default half the lower saturation of round 1),
HEADWATER_BENCH_CONCURRENCY (keep-alive connections, default 64), HEADWATER_GATEWAY_WORKERS (default 1; with
more, give HEADWATER_BENCH_PIN=0: neither side is pinned and both may use every core), HEADWATER_BENCH_PIN
(default 1), HEADWATER_PEERS_COMPRESSION (the peer's producer codec; default the gateway's:
HEADWATER_GATEWAY_KAFKA_COMPRESSION, else the gateway configuration's default), HEADWATER_PEERS_EVENT_BYTES
(pad each event's JSON to this size; default: the workload's, about 1.2 KB), HEADWATER_PEERS_AVRO (default 1:
also send the same events as Avro bodies to the gateway's fast path, a third side "gateway-avro"),
HEADWATER_PEERS_WARM_S (longest broker warm-up before the rounds, default 120; 0 skips it),
HEADWATER_PEERS_NOTE (added to the run's note).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.peers.build import BuildError, build
from bench.peers.report import print_report, record
from bench.peers.session import Options, Session
from bench.private_stack import stack_env
from common.ports import free_port
from gateway.config import GatewayConfig


def _env_int(name: str, default: int, lo: int = 0) -> int:
    raw = os.environ.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError:
        sys.exit(f"bench-peers: {name}={raw!r} is not an integer")
    if value < lo:
        sys.exit(f"bench-peers: {name}={value} is below {lo}")
    return value


def _commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parent)
    return proc.stdout.strip() or "unknown"


def gateway_compression() -> str:
    """The producer codec the gateway under test uses: its variable, else its configuration's default (zstd for a
    gateway that has no such setting), so both sides give the broker the same kind of record batches."""
    raw = os.environ.get("HEADWATER_GATEWAY_KAFKA_COMPRESSION", "").strip().lower()
    return raw or str(getattr(GatewayConfig, "kafka_compression", "zstd"))


def options() -> Options:
    rate = _env_int("HEADWATER_PEERS_RATE", 0)
    return Options(
        seconds=_env_int("HEADWATER_PEERS_SECONDS", 8, 1), rounds=_env_int("HEADWATER_PEERS_ROUNDS", 2, 1),
        rate=rate or None, concurrency=_env_int("HEADWATER_BENCH_CONCURRENCY", 64, 1),
        workers=_env_int("HEADWATER_GATEWAY_WORKERS", 1, 1), pin=os.environ.get("HEADWATER_BENCH_PIN", "1") != "0",
        compression=os.environ.get("HEADWATER_PEERS_COMPRESSION") or gateway_compression(),
        event_bytes=_env_int("HEADWATER_PEERS_EVENT_BYTES", 0),
        avro=os.environ.get("HEADWATER_PEERS_AVRO", "1") != "0", warm_s=_env_int("HEADWATER_PEERS_WARM_S", 120),
    )


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    opts = options()
    commit = _commit()  # the code measured (read before the run, which may take minutes)
    os.environ["HEADWATER_GATEWAY_WORKERS"] = str(opts.workers)
    os.environ.setdefault("HEADWATER_GATEWAY_LOG_LEVEL", "WARNING")
    try:
        binary = build()
    except BuildError as exc:
        print(f"bench-peers: {exc}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="headwater-peers-") as state:
        load_before = os.getloadavg()[0]
        session = Session(Path(state), stack_env(state), binary, free_port(), opts)
        results: dict[str, Any] = session.run()
    pinned = results["pinned"]
    note = (f"Gateway at {commit} ({opts.workers} worker(s)) against Benthos v4.27.0, same bodies, A/B interleaved; "
            + ("each server alone on core 0, broker, registry and load generator on the other core(s)"
               if pinned else "nothing pinned") + ". " + os.environ.get("HEADWATER_PEERS_NOTE", ""))
    line: dict[str, Any] = {
        "bench": "peers", "note": note.strip(), "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
        "commit": commit,
        "peer": "benthos v4.27.0", "workers": opts.workers, "pinned": results.pop("pinned"),
        "cpus": os.cpu_count(), "concurrency": opts.concurrency, "seconds": opts.seconds,
        "peer_compression": opts.compression, "event_bytes_target": opts.event_bytes,
        # How busy the shared machine was (other sessions included): the ratios are what compare.
        "loadavg_1m_start": round(load_before, 1), "loadavg_1m_end": round(os.getloadavg()[0], 1), **results,
    }
    ok = print_report(line)
    print(json.dumps(line))
    if os.environ.get("HEADWATER_PEERS_RECORD", "1") != "0":
        print(f"recorded: {record(line)}")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
