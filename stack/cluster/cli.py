"""`python -m stack <command>` for the cluster profile (HEADWATER_TOPOLOGY=cluster or `make up TOPOLOGY=cluster`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from stack.cluster.config import ClusterConfig
from stack.cluster.topology import Cluster
from stack.config import ConfigError, StackConfig
from stack.kafka import BrokerError, KafkaBroker
from stack.services import ServiceError

TOPOLOGIES = ("single", "cluster")


def topology(env: Mapping[str, str] | None = None) -> str:
    """HEADWATER_TOPOLOGY: `single` (default) or `cluster`; anything else is a ConfigError naming the variable."""
    env = os.environ if env is None else env
    value = (env.get("HEADWATER_TOPOLOGY") or "single").strip().lower()
    if value not in TOPOLOGIES:
        raise ConfigError(f"HEADWATER_TOPOLOGY={value!r} is not one of {', '.join(TOPOLOGIES)}")
    return value


def cluster_running(cfg: StackConfig) -> bool:
    """True while a cluster profile of this state directory is up (its marker file exists)."""
    return (cfg.state_dir / "topology").exists()


def run(command: str) -> int:
    """up / down / status of the cluster profile; prints what the single-node commands print."""
    try:
        cfg = ClusterConfig.from_env()
        cluster = Cluster(cfg, with_spark=cfg.spark)
    except ConfigError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 2
    try:
        if command == "up":
            if KafkaBroker(cluster.cfg.stack).running():
                print("stack: the single-node stack is up (`make down` first)", file=sys.stderr)
                return 1
            report = cluster.up()
            print(f"cluster up in {report.seconds:.1f}s (started: {', '.join(report.started) or 'nothing new'}; "
                  f"topics created: {', '.join(report.created_topics) or 'none'})")
            print(f"# {cluster.cfg.stack.env_file}")
            for key, value in report.env.items():
                print(f"{key}={value}")
        elif command == "down":
            stopped = cluster.down()
            print(f"stopped (cluster): {', '.join(stopped) or 'nothing was running'}")
        elif command == "status":
            for name, running in cluster.status().items():
                print(f"{name}: {'running' if running else 'stopped'}")
        elif command == "restart-gateways":
            cluster.rolling_restart()
            print(f"restarted {len(cluster.cfg.gateway_ports)} gateways one at a time behind HAProxy")
    except (BrokerError, ServiceError) as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 1
    return 0
