"""Command line of the local stack: `python -m stack up|down|status|env|reset`."""

from __future__ import annotations

import argparse
import shutil
import sys

from stack.cluster.cli import cluster_running, topology
from stack.cluster.cli import run as run_cluster
from stack.config import ConfigError, StackConfig
from stack.kafka import BrokerError
from stack.launcher import Stack
from stack.services import ServiceError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start Kafka on loopback, create the topics, write .headwater/stack.env")
    sub.add_parser("down", help="stop every service of the stack; no process is left behind")
    sub.add_parser("status", help="say which services run")
    sub.add_parser("env", help="print .headwater/stack.env")
    sub.add_parser("reset", help="stop the stack and delete its data (topics, offsets, schemas)")
    sub.add_parser("restart-gateways", help="cluster profile: restart every gateway, one at a time, behind HAProxy")
    args = parser.parse_args(argv)
    try:
        cluster = topology() == "cluster"
        single = StackConfig.from_env()
    except ConfigError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 2
    # The cluster profile (docs/cluster.md): asked for, or already up (so `make down` / `make status` find it).
    if (args.command in ("up", "restart-gateways") and cluster) or (
            args.command in ("down", "status") and (cluster or cluster_running(single))):
        return run_cluster(args.command)
    if args.command == "reset" and cluster_running(single):
        run_cluster("down")
    if args.command == "up" and cluster_running(single):
        print("stack: the cluster profile is up (`make down` first)", file=sys.stderr)
        return 1
    if args.command == "restart-gateways":
        print("stack: restart-gateways needs the cluster profile (HEADWATER_TOPOLOGY=cluster)", file=sys.stderr)
        return 2

    try:
        cfg = StackConfig.from_env()
    except ConfigError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 2
    stack = Stack(cfg)
    try:
        if args.command == "up":
            report = stack.up()
            print(f"stack up in {report.seconds:.1f}s (started: {', '.join(report.started) or 'nothing new'}; "
                  f"topics created: {', '.join(report.created_topics) or 'none'})")
            print(f"# {cfg.env_file}")
            for key, value in report.env.items():
                print(f"{key}={value}")
        elif args.command == "down":
            stopped = stack.down()
            print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        elif args.command == "status":
            for name, running in stack.status().items():
                print(f"{name}: {'running' if running else 'stopped'}")
        elif args.command == "env":
            if not cfg.env_file.exists():
                print(f"stack: {cfg.env_file} does not exist: run `make up`", file=sys.stderr)
                return 1
            print(cfg.env_file.read_text(), end="")
        elif args.command == "reset":
            stack.down()
            shutil.rmtree(cfg.state_dir / "data", ignore_errors=True)
            print(f"deleted {cfg.state_dir / 'data'}")
    except (BrokerError, ServiceError) as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
