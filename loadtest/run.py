"""Runs one load test end to end: locust headless (one process, or a master plus workers), then the reconciliation.

    python -m loadtest.run --nodes 100000 --rate 0.05 --batch 5 --users 200 --duration 60 [--workers 2]

Each run gets a folder `<runs dir>/<run id>/` with run.json, the ack files, locust's CSV files (`stats_*.csv`),
its HTML report (`report.html`), `reconcile.json` and `summary.json`. Exit status: non-zero if locust saw a
broken contract or the reconciliation found an acknowledged event missing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from common.envfile import read_env
from loadtest.reconcile import Report, reconcile
from loadtest.settings import DEFAULT_RUNS_DIR, DEFAULT_STACK_ENV, REPO_ROOT, SHAPES

LOCUSTFILE = REPO_ROOT / "loadtest" / "locustfile.py"
ACK_NAME = "batch acknowledged (incl. retries)"


@dataclass(frozen=True)
class Summary:
    """One run's figures, as loadtest/README.md reports them."""

    run_id: str
    nodes: int
    rate: float
    batch: int
    users: int
    workers: int
    duration_s: float
    locust_exit: int
    locust_cpu_s: float
    requests: int
    request_failures: int
    events_per_s: float
    ack_p50_ms: float
    ack_p99_ms: float
    post_p50_ms: float
    post_p99_ms: float
    reconcile: Report


def _locust(args: argparse.Namespace, run_dir: Path, env: dict[str, str]) -> int:
    exe = str(Path(sys.executable).with_name("locust"))
    common = ["-f", str(LOCUSTFILE), "--loglevel", "WARNING" if args.quiet else "INFO"]
    report = ["--headless", "--csv", str(run_dir / "stats"), "--html", str(run_dir / "report.html"),
              "--only-summary"]
    if args.workers <= 1:
        return subprocess.call([exe, *common, *report], env=env, cwd=REPO_ROOT)
    port = str(args.master_port)
    workers = [subprocess.Popen([exe, *common, "--worker", "--master-port", port], env=env, cwd=REPO_ROOT)
               for _ in range(args.workers)]
    try:
        return subprocess.call([exe, *common, *report, "--master", "--master-bind-port", port,
                                "--expect-workers", str(args.workers)], env=env, cwd=REPO_ROOT)
    finally:
        for proc in workers:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _stats(run_dir: Path) -> dict[str, dict[str, str]]:
    path = run_dir / "stats_stats.csv"
    if not path.exists():
        return {}
    with path.open() as rows:
        return {row["Name"]: row for row in csv.DictReader(rows)}


def _num(row: dict[str, str] | None, column: str) -> float:
    try:
        return float((row or {}).get(column) or 0)
    except ValueError:
        return 0.0


def run(args: argparse.Namespace) -> Summary:
    run_id = str(uuid.uuid4())
    run_dir = Path(args.runs_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HEADWATER_LT_STACK_ENV": str(args.stack_env),
           "HEADWATER_LT_RUN_ID": run_id, "HEADWATER_LT_RUNS_DIR": str(args.runs_dir),
           "HEADWATER_LT_NODES": str(args.nodes), "HEADWATER_LT_RATE": str(args.rate),
           "HEADWATER_LT_BATCH": str(args.batch), "HEADWATER_LT_USERS": str(args.users),
           "HEADWATER_LT_WORKERS": str(max(1, args.workers)), "HEADWATER_LT_DURATION_S": str(args.duration),
           "HEADWATER_LT_SHAPE": args.shape}
    started, cpu_before = time.monotonic(), _children_cpu()
    code = _locust(args, run_dir, env)
    wall, locust_cpu = time.monotonic() - started, _children_cpu() - cpu_before
    report = reconcile(run_dir, read_env(Path(args.stack_env)))
    rows = _stats(run_dir)
    post, ack = rows.get("/v1/batch"), rows.get(ACK_NAME)
    summary = Summary(
        run_id=run_id, nodes=args.nodes, rate=args.rate, batch=args.batch, users=args.users,
        workers=max(1, args.workers), duration_s=args.duration, locust_exit=code, locust_cpu_s=locust_cpu,
        requests=int(_num(post, "Request Count")), request_failures=int(_num(post, "Failure Count")),
        events_per_s=report.acknowledged / min(wall, args.duration) if wall else 0.0,
        ack_p50_ms=_num(ack, "50%"), ack_p99_ms=_num(ack, "99%"),
        post_p50_ms=_num(post, "50%"), post_p99_ms=_num(post, "99%"), reconcile=report,
    )
    (run_dir / "reconcile.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    (run_dir / "summary.json").write_text(json.dumps(asdict(summary), indent=2) + "\n")
    return summary


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m loadtest.run", description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=1000, help="distinct simulated producer nodes")
    p.add_argument("--rate", type=float, default=4.0, help="events per node per second")
    p.add_argument("--batch", type=int, default=40, help="events per batch (1..40)")
    p.add_argument("--users", type=int, default=100, help="locust users = concurrent connections")
    p.add_argument("--duration", type=float, default=60.0, help="seconds")
    p.add_argument("--shape", choices=SHAPES, default="soak")
    p.add_argument("--workers", type=int, default=1, help="1: one process; N > 1: a master and N workers")
    p.add_argument("--master-port", type=int, default=5557)
    p.add_argument("--stack-env", default=str(DEFAULT_STACK_ENV))
    p.add_argument("--runs-dir", default=str(DEFAULT_RUNS_DIR))
    p.add_argument("--quiet", action="store_true", help="locust logs warnings only")
    return p


def main(argv: list[str] | None = None) -> int:
    summary = run(parser().parse_args(argv))
    r = summary.reconcile
    print(f"run {summary.run_id}: {summary.nodes} nodes, {summary.duration_s:g}s, {summary.events_per_s:.0f} events/s "
          f"acknowledged; ack p50 {summary.ack_p50_ms:.0f} ms, p99 {summary.ack_p99_ms:.0f} ms; "
          f"{summary.requests} requests, {summary.request_failures} failed (retried)")
    print(f"reconciliation: acknowledged {r.acknowledged}, found {r.found}, missing {r.missing}, "
          f"duplicates {r.duplicates}, id mismatches {r.id_mismatches}, unacknowledged but stored "
          f"{r.unacknowledged_found}, seq gaps in Kafka {r.seq_gaps}; {r.producers_acknowledged} of {summary.nodes} "
          "nodes sent")
    print("OK" if r.ok and summary.locust_exit == 0 else "FAIL")
    return 0 if r.ok and summary.locust_exit == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
