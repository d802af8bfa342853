"""What replication costs: the same SDK load through HAProxy to RF=1 and RF=3 topics of one private cluster profile,
in alternating rounds of one run; prints events per gateway core-second and per broker core-second for each, their
ratio, and one JSON line at the end (docs/cluster.md, "Capacity with replication").

    python -m bench.replication [--events 20000] [--rounds 2] [--producers 4]      (make bench-replication)

HEADWATER_BENCH_WARM_S (default 120; 0 skips it): the longest warm-up of the brokers before the first phase
(bench/gateway/warm.py: their JIT compiles the transaction and replication paths during the first minutes).

Not a test: nothing is asserted. CPU is read from /proc for every gateway and broker process (user + system), so
the figures are per core-second actually used, whatever else the shared machine runs; compare the two rows of the
same run, not absolute figures between runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import headwater

from bench.gateway.warm import WARM_TOPIC, warm_broker
from common.ports import free_port
from loadtest.events import EventFactory
from stack.config import CLUSTER, StackConfig
from stack.kafka import admin_settings
from stack.launcher import Stack
from stack.process import _group_members
from stack.topics import TopicSpec, ensure_topics, topic_specs

TICKS = os.sysconf("SC_CLK_TCK")
# Under the events topic's prefix: the gateway's ACLs let it write there only (the cluster profile is secured).
TOPICS = {1: "headwater.events.bench-rf1", 3: "headwater.events.bench-rf3"}



def cpu_seconds(pids: list[int]) -> float:
    """user + system CPU of these processes and their process-group members (a gateway's workers)."""
    total = 0
    seen: set[int] = set()
    for leader in pids:
        for pid in {leader, *_group_members(leader)} - seen:
            seen.add(pid)
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


@dataclass
class Phase:
    rf: int
    broker_idle_cores: float  # what the three brokers burn with no load (quorum, replica fetchers, GC)
    events: int = 0
    seconds: float = 0.0
    gateway_cpu_s: float = 0.0
    broker_cpu_s: float = 0.0

    def add(self, events: int, seconds: float, gateway_cpu_s: float, broker_cpu_s: float) -> None:
        self.events += events
        self.seconds += seconds
        self.gateway_cpu_s += gateway_cpu_s
        self.broker_cpu_s += broker_cpu_s

    def figures(self) -> dict[str, float]:
        above_idle = max(0.01, self.broker_cpu_s - self.broker_idle_cores * self.seconds)
        return {"events": self.events, "events_per_s": round(self.events / self.seconds, 1),
                "events_per_gateway_core_s": round(self.events / self.gateway_cpu_s, 1),
                "events_per_broker_core_s": round(self.events / self.broker_cpu_s, 1),
                "events_per_broker_core_s_above_idle": round(self.events / above_idle, 1),
                "gateway_cpu_s": round(self.gateway_cpu_s, 2), "broker_cpu_s": round(self.broker_cpu_s, 2),
                # The capacity rule of docs/capacity.md: cores per 10 k events/s (brokers: all three, above idle).
                "gateway_cores_per_10k_events_per_s": round(10_000 * self.gateway_cpu_s / self.events, 2),
                "broker_cores_per_10k_events_per_s": round(10_000 * above_idle / self.events, 2)}


def send(env: dict[str, str], events: int, producers: int, seed: int) -> int:
    """`events` realistic 1-3 KB events from `producers` SDK clients, as fast as they go; returns acknowledged."""
    ca = env.get("HEADWATER_CA_BUNDLE") or None  # the secured profile's private CA (HAProxy serves TLS)
    clients = [headwater.Client(env["GATEWAY_URL"], env["HEADWATER_WRITE_KEY"], linger_s=0.1, ca_bundle=ca,
                                max_queue_events=events, retry_max_s=2.0) for _ in range(producers)]
    factory = EventFactory(seed=seed)
    for i in range(events):
        client = clients[i % producers]
        wire = factory.event(client.producer_id, f"node-{i % 200:04d}", i, int(time.time() * 1000))
        client.track(str(wire["event_type"]), wire["properties"], partition_key=f"node-{i % 200:04d}")
    acknowledged = 0
    for client in clients:
        client.close(timeout=600)
        acknowledged += client.metrics().acknowledged
    return acknowledged


def broker_idle_cores(cluster: Stack, seconds: float = 15.0) -> float:
    """CPU cores the three brokers use with no load, measured over `seconds`."""
    brokers = [p for n in cluster.kafka.nodes if (p := n.process.pid()) is not None]
    time.sleep(5)  # let start-up work settle
    c0, t0 = cpu_seconds(brokers), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(brokers) - c0) / (time.monotonic() - t0)


def run_phase(cluster: Stack, env: dict[str, str], phase: Phase, events: int, *, producers: int, seed: int) -> None:
    """Point every gateway at this phase's topic (restart), warm up, then measure one load."""
    cluster.gateway_env["HEADWATER_GATEWAY_EVENTS_TOPIC"] = TOPICS[phase.rf]
    for i in range(1, len(cluster.cfg.gateway_ports) + 1):
        cluster.gateway_process(i).stop(30)
    cluster.start_gateways(env)
    send(env, 2000, producers, seed + 1000)  # warm-up: connections, schema caches, transactional producers
    gateways = [p for i in range(1, len(cluster.cfg.gateway_ports) + 1)
                if (p := cluster.gateway_process(i).pid()) is not None]
    brokers = [p for n in cluster.kafka.nodes if (p := n.process.pid()) is not None]
    g0, b0, t0 = cpu_seconds(gateways), cpu_seconds(brokers), time.monotonic()
    acked = send(env, events, producers, seed)
    phase.add(acked, time.monotonic() - t0, cpu_seconds(gateways) - g0, cpu_seconds(brokers) - b0)
    print(f"RF={phase.rf}: {acked} events in {time.monotonic() - t0:.1f}s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replication", description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="events per phase and round (default 20000)")
    parser.add_argument("--rounds", type=int, default=2, help="RF=1 then RF=3, this many times (default 2)")
    parser.add_argument("--producers", type=int, default=4, help="SDK clients (default 4)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="headwater-bench-replication-") as state:
        cfg = StackConfig.on_free_ports(Path(state), free_port, replace(CLUSTER, console=False, spark=False))
        cluster = Stack(cfg)
        try:
            env = cluster.up().env
            admin = admin_settings(cfg)  # the administrator's credentials when the profile is secured
            specs = {rf: next(s for s in topic_specs(cfg, rf) if s.name == "headwater.events") for rf in TOPICS}
            for rf, spec in specs.items():
                ensure_topics(cfg.bootstrap, [TopicSpec(TOPICS[rf], spec.partitions, spec.config)],
                              timeout_s=60, replication_factor=rf, client=admin)
            warm_s = float(os.environ.get("HEADWATER_BENCH_WARM_S", "120"))
            if warm_s:  # the brokers' JIT, before anything is measured (bench/gateway/warm.py)
                ensure_topics(cfg.bootstrap, [TopicSpec(WARM_TOPIC, specs[3].partitions, specs[3].config)],
                              timeout_s=60, replication_factor=3, client=admin)
                leader = cluster.kafka.nodes[0].process.pid() or 0
                warm = warm_broker(cfg.bootstrap, leader, max_seconds=warm_s, client=admin)
                print(f"brokers warmed by {warm.transactions} transactions in {warm.seconds} s", flush=True)
            idle = broker_idle_cores(cluster)
            phases = {rf: Phase(rf, idle) for rf in TOPICS}
            for r in range(args.rounds):
                for rf in TOPICS:
                    run_phase(cluster, env, phases[rf], args.events, producers=args.producers, seed=r * 10 + rf)
        finally:
            cluster.down()
    one, three = phases[1].figures(), phases[3].figures()
    ratio_g = three["events_per_gateway_core_s"] / one["events_per_gateway_core_s"]
    ratio_b = three["events_per_broker_core_s"] / one["events_per_broker_core_s"]
    ratio_i = three["events_per_broker_core_s_above_idle"] / one["events_per_broker_core_s_above_idle"]
    for name, fig in (("RF=1", one), ("RF=3", three)):
        print(f"{name}: {fig['events_per_s']:.0f} events/s, {fig['events_per_gateway_core_s']:.0f} events per gateway "
              f"core-second, {fig['events_per_broker_core_s']:.0f} events per broker core-second (all 3 brokers; "
              f"{fig['events_per_broker_core_s_above_idle']:.0f} counting only CPU above their idle use); per 10 k "
              f"events/s: {fig['gateway_cores_per_10k_events_per_s']} gateway cores, "
              f"{fig['broker_cores_per_10k_events_per_s']} broker cores (the three, above idle)")
    print(f"brokers idle: {phases[1].broker_idle_cores:.2f} cores for the three")
    print(f"RF=3 / RF=1: gateway {ratio_g:.2f}, brokers {ratio_b:.2f} ({ratio_i:.2f} above idle)")
    print(json.dumps({"bench": "replication", "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
                      "gateways": len(cfg.gateway_ports), "brokers": len(cfg.broker_ports),
                      "events_per_phase": args.events * args.rounds,
                      "broker_idle_cores": round(phases[1].broker_idle_cores, 3), "rf1": one, "rf3": three,
                      "ratio_rf3_rf1": {"events_per_gateway_core_s": round(ratio_g, 3),
                                        "events_per_broker_core_s": round(ratio_b, 3),
                                        "events_per_broker_core_s_above_idle": round(ratio_i, 3)}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
