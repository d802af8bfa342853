"""Command line of the local stack: `python -m stack up|down|status|env|reset|clean|restart-gateways|tail`, for every
profile (single, cluster, custom counts, and the two-region `regions` profile of stack/regions.py)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping

from common.basic_auth import AuthConfigError
from common.envfile import stack_settings, state_dir
from common.kafka_read import KafkaReadError
from common.kafka_security import KafkaSecurity, KafkaSecurityError
from common.registry_access import RegistryAccess
from common.registry_client import RegistryClient
from stack.config import SINGLE, ConfigError, StackConfig
from stack.kafka import BrokerError
from stack.launcher import Stack, running_topology
from stack.mirror import MirrorError
from stack.regions import Regions, RegionsConfig, recorded
from stack.services import ServiceError
from stack.tail import tail

# What `clean` deletes besides the data: everything a run leaves in the state directory, but the development write
# key (<state>/gateway/), which the user's own services may hold. The pipeline's outputs go too: their checkpoints
# name offsets of topics that no longer exist.
CLEANED = ("logs", "run", "conf", "pipeline", "spark", "console", "demo-spool")


def _describe(cfg: StackConfig) -> str:
    t = cfg.topology
    return (f"{t.name} topology: {t.brokers} Kafka node(s), {t.registries} registry instance(s), {t.gateways} "
            f"gateway(s){' behind HAProxy' if t.haproxy else ''}{', Spark standalone' if t.spark else ''}")


def _tail(cfg: StackConfig, args: argparse.Namespace) -> int:
    settings = stack_settings(cfg.env_file)
    if not settings.get("KAFKA_BOOTSTRAP"):
        print(f"stack: no KAFKA_BOOTSTRAP in {cfg.env_file} or the environment: run `make up`", file=sys.stderr)
        return 1
    try:
        registry = RegistryClient.of(settings.get("REGISTRY_URL", ""), RegistryAccess.from_env(settings, "TAIL"))
        tail(settings["KAFKA_BOOTSTRAP"], registry, args.topic, last=args.last, follow=args.follow,
             say=lambda line: print(line, flush=True), security=KafkaSecurity.from_env(settings, "TAIL"))
    except (KafkaSecurityError, AuthConfigError) as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 2
    except KafkaReadError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


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
    elif command in ("reset", "clean"):
        stopped = stack.down()
        print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        for folder in [recorded.data_dir, *(recorded.state_dir / name for name in CLEANED if command == "clean")]:
            if folder.exists():
                shutil.rmtree(folder)
                print(f"deleted {folder}")
    elif command == "restart-gateways":
        if not recorded.topology.haproxy:
            print("stack: restart-gateways needs gateways behind HAProxy (HEADWATER_TOPOLOGY=cluster)", file=sys.stderr)
            return 2
        stack.rolling_restart()
        print(f"restarted {recorded.topology.gateways} gateways one at a time behind HAProxy")
    return 0


def wants_regions(env: Mapping[str, str]) -> bool:
    return (env.get("HEADWATER_TOPOLOGY") or "").strip().lower() == "regions"


def _run_regions(command: str, cfg: RegionsConfig) -> int:
    """`up`, `down`, `status`, `env`, `reset`, `clean` of the two-region profile (docs/regions.md)."""
    regions = Regions(cfg)
    if command == "up":
        single = StackConfig.from_env(topology=SINGLE) if not recorded(cfg.root) else None
        if single is not None and (running_topology(single) is not None or Stack(single).kafka.running()):
            print(f"stack: another topology is up in {cfg.root} (`make down` first)", file=sys.stderr)
            return 1
        report = regions.up()
        started = ", ".join(report.started) or "nothing new"
        print(f"stack up in {report.seconds:.1f}s (regions topology: regions a and b, each 1 Kafka node, 1 registry, "
              f"2 gateways behind HAProxy; MirrorMaker 2 between them; started: {started})")
        regional = ", ".join(str(c.env_file) for c in cfg.regions)
        print(f"# {cfg.env_file} (mode 0600; each region's own: {regional})")
        for key, value in report.env.items():
            print(f"{key}={'<hidden>' if is_secret(key) else value}")
    elif command == "down":
        print(f"stopped: {', '.join(regions.down()) or 'nothing was running'}")
    elif command == "status":
        for name, running in regions.status().items():
            print(f"{name}: {'running' if running else 'stopped'}")
    elif command == "env":
        if not cfg.env_file.exists():
            print(f"stack: {cfg.env_file} does not exist: run `make up TOPOLOGY=regions`", file=sys.stderr)
            return 1
        print(cfg.env_file.read_text(), end="")
    elif command in ("reset", "clean"):
        print(f"stopped: {', '.join(regions.down()) or 'nothing was running'}")
        folders = [c.data_dir for c in cfg.regions]
        if command == "clean":
            folders = [cfg.root / "regions"]
        for folder in folders:
            if folder.exists():
                shutil.rmtree(folder)
                print(f"deleted {folder}")
    else:
        print(f"stack: `{command}` is not available in the regions topology (docs/regions.md)", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start the topology the environment asks for; write .headwater/stack.env")
    sub.add_parser("down", help="stop every process of the running stack; no process is left behind")
    sub.add_parser("status", help="say which processes run")
    sub.add_parser("env", help="print .headwater/stack.env")
    sub.add_parser("reset", help="stop the stack and delete its data (topics, offsets, schemas)")
    sub.add_parser("clean", help="stop the stack and delete its data, logs, pid files, configs and the pipeline's "
                                 "outputs (not the jars, not the development write key)")
    sub.add_parser("restart-gateways", help="restart every gateway, one at a time, behind HAProxy")
    tail_cmd = sub.add_parser("tail", help="a topic's newest records, decoded, as JSON lines (stack.tail)")
    tail_cmd.add_argument("topic", help="for example headwater.events, headwater.deadletter, headwater.aggregates")
    tail_cmd.add_argument("-n", "--last", type=int, default=10, help="newest records to show first (default 10)")
    tail_cmd.add_argument("-f", "--follow", action="store_true", help="then show new records until Ctrl-C")
    args = parser.parse_args(argv)
    try:
        if args.command != "tail" and (wants_regions(os.environ) or recorded(state_dir())):
            if args.command == "up" and not wants_regions(os.environ):
                print(f"stack: the regions topology is up in {state_dir()} (`make down` first)", file=sys.stderr)
                return 1
            return _run_regions(args.command, RegionsConfig.from_env())
        if args.command == "tail":
            # the regions profile's stack.env holds region a's endpoints under the usual names
            return _tail(StackConfig.from_env(topology=SINGLE if wants_regions(os.environ) else None), args)
        return _run(args.command, StackConfig.from_env())
    except ConfigError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 2
    except (BrokerError, ServiceError, MirrorError) as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 1


def is_secret(key: str) -> bool:
    """stack.env lines that hold a secret itself (the others name files, URLs and ports)."""
    return key.endswith(("WRITE_KEY", "READ_KEY", "PASSWORD", "USER_INFO")) and not key.endswith("_FILE")


if __name__ == "__main__":
    sys.exit(main())
