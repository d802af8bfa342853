"""Command line of the local stack: `python -m stack up|down|status|env|reset|restart-gateways`."""

from __future__ import annotations

import argparse
import shutil
import sys

from stack.config import SINGLE, ConfigError, StackConfig
from stack.kafka import BrokerError
from stack.launcher import Stack, running_topology
from stack.services import ServiceError


def _describe(cfg: StackConfig) -> str:
    t = cfg.topology
    return (f"{t.name} topology: {t.brokers} Kafka node(s), {t.registries} registry instance(s), {t.gateways} "
            f"gateway(s){' behind HAProxy' if t.haproxy else ''}{', Spark standalone' if t.spark else ''}")


def _run(command: str, asked: StackConfig) -> int:
    # `down`, `status` and `reset` act on what `up` recorded (or on a stack of earlier versions: the single node).
    recorded_topology = running_topology(asked)
    recorded = StackConfig.from_env(topology=recorded_topology or SINGLE)
    stack = Stack(recorded)
    if command == "up":
        up_now = recorded_topology or (SINGLE if stack.kafka.running() else None)
        if up_now is not None and up_now != asked.topology:
            print(f"stack: the {up_now.name} topology is up in {asked.state_dir} (`make down` first)", file=sys.stderr)
            return 1
        report = Stack(asked).up()
        started = ", ".join(report.started) or "nothing new"
        print(f"stack up in {report.seconds:.1f}s ({_describe(asked)}; started: {started}; "
              f"topics created: {', '.join(report.created_topics) or 'none'})")
        print(f"# {asked.env_file} (mode 0600; `python -m stack env` prints it, secrets included)")
        for key, value in report.env.items():  # never a secret on the terminal or in a CI log
            print(f"{key}={'<hidden>' if is_secret(key) else value}")
    elif command == "down":
        stopped = stack.down()
        print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    elif command == "status":
        for name, running in stack.status().items():
            print(f"{name}: {'running' if running else 'stopped'}")
    elif command == "env":
        if not recorded.env_file.exists():
            print(f"stack: {recorded.env_file} does not exist: run `make up`", file=sys.stderr)
            return 1
        print(recorded.env_file.read_text(), end="")
    elif command == "reset":
        stack.down()
        shutil.rmtree(recorded.data_dir, ignore_errors=True)
        print(f"deleted {recorded.data_dir}")
    elif command == "restart-gateways":
        if not recorded.topology.haproxy:
            print("stack: restart-gateways needs gateways behind HAProxy (HEADWATER_TOPOLOGY=cluster)", file=sys.stderr)
            return 2
        stack.rolling_restart()
        print(f"restarted {recorded.topology.gateways} gateways one at a time behind HAProxy")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start the topology the environment asks for; write .headwater/stack.env")
    sub.add_parser("down", help="stop every process of the running stack; no process is left behind")
    sub.add_parser("status", help="say which processes run")
    sub.add_parser("env", help="print .headwater/stack.env")
    sub.add_parser("reset", help="stop the stack and delete its data (topics, offsets, schemas)")
    sub.add_parser("restart-gateways", help="restart every gateway, one at a time, behind HAProxy")
    args = parser.parse_args(argv)
    try:
        return _run(args.command, StackConfig.from_env())
    except ConfigError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 2
    except (BrokerError, ServiceError) as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 1


def is_secret(key: str) -> bool:
    """stack.env lines that hold a secret itself (the others name files, URLs and ports)."""
    return key.endswith(("WRITE_KEY", "PASSWORD", "USER_INFO")) and not key.endswith("_FILE")


if __name__ == "__main__":
    sys.exit(main())
