"""Measures the ack-latency-versus-load curve of one gateway process, and its events/s per CPU core.

    python -m loadtest.curve --loads 500,1000,2000,3000,4000 --step 20 [--stack-env ...] [--out loadtest/results]

Starts a private one-worker gateway against the stack's Kafka and registry, then runs one short locust step per
offered load (a fresh run id each, reconciled like every run) and reads the gateway's CPU seconds from /proc
around each step. Writes `curve.json` (the points the capacity model reads).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from common.envfile import read_env, write_env
from loadtest import run as loadrun
from loadtest.gateway_proc import cpu_seconds, private_gateway
from loadtest.settings import DEFAULT_RUNS_DIR, DEFAULT_STACK_ENV, REPO_ROOT

RESULTS_DIR = REPO_ROOT / "loadtest" / "results"


@dataclass(frozen=True)
class Point:
    """One step: what was offered, what was acknowledged, how fast, and what it cost the gateway."""

    offered_events_per_s: float
    events_per_s: float
    gateway_cores: float           # CPU seconds of the gateway process per second of the step
    events_per_core_s: float       # acknowledged events per gateway CPU second
    post_p50_ms: float
    post_p99_ms: float
    ack_p99_ms: float
    retried_requests: int
    missing: int
    mean_event_bytes: float        # Confluent-framed Avro value in Kafka
    locust_cores: float            # what the load generator itself used, for comparison
    gateway_ms: dict[str, float]   # from the gateway's /metrics: mean ms per request in each stage, per transaction


_STAGES = ("headwater_gateway_stage_seconds_", "headwater_gateway_request_seconds_",
           "headwater_gateway_commit_seconds_", "headwater_gateway_commit_records_")


def scrape(url: str, wanted: tuple[str, ...] = _STAGES) -> dict[str, float]:
    """The gateway's cumulative sums and counts of the metrics named `wanted` (by default its stages and
    transactions), by sample name with labels, each summed over the lines that repeat it (Prometheus text format);
    {} when the gateway does not answer."""
    values: dict[str, float] = {}
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return values
    for line in text.splitlines():
        if line.startswith(wanted) and ("_sum" in line or "_count" in line):
            name, _, value = line.rpartition(" ")
            values[name] = values.get(name, 0.0) + float(value)
    return values


def stage_means(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Mean milliseconds per request of each stage (and per transaction), and records per transaction."""
    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    means: dict[str, float] = {}
    for key in after:
        if not key.endswith("_sum") and "_sum{" not in key:
            continue
        count = delta(key.replace("_sum", "_count"))
        if count:
            means[_label(key)] = round(delta(key) / count * (1.0 if "records" in key else 1000.0), 2)
    return means


def _label(key: str) -> str:
    if 'stage="' in key:
        stage = key.split('stage="', 1)[1].split('"', 1)[0]
        return f"{stage}_ms"
    if "commit_seconds" in key:
        return "transaction_ms" if "committed" in key else "failed_transaction_ms"
    if "commit_records" in key:
        return "records_per_transaction"
    return "request_ms"


def measure(args: argparse.Namespace) -> list[Point]:
    stack_env = read_env(Path(args.stack_env))
    points: list[Point] = []
    with tempfile.TemporaryDirectory(prefix="headwater-curve-") as tmp, \
            private_gateway(stack_env, workers=1, log_path=Path(tmp) / "gateway.log") as gateway:
        env_file = Path(tmp) / "stack.env"
        write_env(env_file, {**stack_env, "GATEWAY_URL": gateway.url, "HEADWATER_WRITE_KEY": gateway.write_key})
        for load in args.loads:
            rate = load / args.nodes
            step = loadrun.parser().parse_args([
                "--nodes", str(args.nodes), "--rate", f"{rate:.9g}", "--batch", str(args.batch),
                "--users", str(args.users), "--duration", str(args.step), "--stack-env", str(env_file),
                "--runs-dir", str(args.runs_dir), "--quiet"])
            before, metrics = cpu_seconds(gateway.pid), scrape(gateway.url)
            summary = loadrun.run(step)
            used = cpu_seconds(gateway.pid) - before
            stages = stage_means(metrics, scrape(gateway.url))
            acked = summary.reconcile.acknowledged
            point = Point(
                offered_events_per_s=load, events_per_s=summary.events_per_s,
                gateway_cores=used / args.step, events_per_core_s=acked / used if used else 0.0,
                post_p50_ms=summary.post_p50_ms, post_p99_ms=summary.post_p99_ms, ack_p99_ms=summary.ack_p99_ms,
                retried_requests=summary.request_failures, missing=summary.reconcile.missing,
                mean_event_bytes=summary.reconcile.mean_value_bytes, locust_cores=summary.locust_cpu_s / args.step,
                gateway_ms=stages)
            print(f"offered {load:.0f}/s: {point.events_per_s:.0f} events/s, gateway {point.gateway_cores:.2f} cores, "
                  f"{point.events_per_core_s:.0f} events per core-second, p50 {point.post_p50_ms:.0f} ms, "
                  f"p99 {point.post_p99_ms:.0f} ms, missing {point.missing}; gateway means {stages}", flush=True)
            points.append(point)
    return points


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.curve", description=__doc__.split("\n")[0])
    p.add_argument("--loads", type=lambda s: [float(x) for x in s.split(",")], default=[500, 1000, 2000, 3000],
                   help="offered events/s per step, comma-separated")
    p.add_argument("--step", type=float, default=20.0, help="seconds per step")
    p.add_argument("--nodes", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=40)
    p.add_argument("--users", type=int, default=40)
    p.add_argument("--stack-env", default=str(DEFAULT_STACK_ENV))
    p.add_argument("--runs-dir", default=str(DEFAULT_RUNS_DIR))
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = p.parse_args(argv)
    points = measure(args)
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"gateway_workers": 1, "batch_events": args.batch, "step_s": args.step, "nodes": args.nodes,
           "mean_event_bytes": sum(pt.mean_event_bytes for pt in points) / max(1, len(points)),
           "points": [asdict(pt) for pt in points]}
    (args.out / "curve.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out / 'curve.json'}")
    return 1 if any(pt.missing for pt in points) else 0


if __name__ == "__main__":
    sys.exit(main())
