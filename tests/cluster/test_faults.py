"""Faults on the cluster profile (issue 18, faults 1-4), each under SDK load through HAProxy (>= 30,000 events in CI)
and checked by a read_committed reconciliation of what the SDKs were told is acknowledged (tests/cluster/fleet.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.config import GatewayConfig
from stack.launcher import Stack
from tests.cluster.faults import active_controller, batch_requests, busiest_leader, leaders, record_schema, registry
from tests.cluster.fleet import EVENTS_PER_FAULT, SCALE, Fleet
from tests.cluster.window import Prober
from tests.sdk_events import EVENTS_TOPIC, arrived
from tests.support.kafka import end_offsets
from tests.support.producers import producer_env
from tests.support.wait import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]
ClusterEnv = tuple[Stack, dict[str, str]]
GO_EVENTS = 5000 * SCALE
# The gateways run with their default timeouts here: a transaction in flight at a kill may still commit until it.
TRANSACTION_TIMEOUT_S = GatewayConfig.transaction_timeout_s  # the dataclass field's default
# Producers should see at most this long without a 200 when one broker dies (issue 28). `make test-cluster` and
# `make chaos-cluster` assert it; `make test` prints the figures (a loaded CI host is not where a bound is measured).
WINDOW_GOAL_S = float(os.environ.get("HEADWATER_CLUSTER_WINDOW_GOAL_S", "0") or 0)


class GoProducer:
    """The Go SDK's test producer as a process: tracks `events` events through HAProxy, then closes (spooled)."""

    def __init__(self, binary: Path, env: dict[str, str], events: int, tmp: Path) -> None:
        proc_env = producer_env(env["GATEWAY_URL"], env["HEADWATER_WRITE_KEY"], tmp / "go-spool",
                                HEADWATER_LINGER_S="0.1", HEADWATER_MAX_QUEUE_EVENTS=str(events),
                                HEADWATER_RETRY_BASE_S="0.2", HEADWATER_RETRY_MAX_S="2",
                                HEADWATER_RETRY_DEADLINE_S="900")
        self.cmd = [str(binary), "-events", str(events), "-goroutines", "2", "-run", f"run-{uuid.uuid4()}"]
        self.env = proc_env
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> GoProducer:
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def result(self, timeout_s: float = 600.0) -> dict[str, Any]:
        assert self.proc is not None
        out, err = self.proc.communicate(timeout=timeout_s)
        assert self.proc.returncode == 0, err[-2000:]
        answer: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return answer


def _report(prober: Prober, killed: float) -> None:
    """Print the no-200 window and the stall per target; hold them to WINDOW_GOAL_S when it is set."""
    windows, stalls = prober.windows(killed), prober.stalls(killed)
    print(f"no-200 window after the kill (first failed answer -> first 200), seconds: {windows}")
    print(f"longest time with no 200 after the kill, seconds: {stalls}")
    if WINDOW_GOAL_S:
        over = {name: (windows[name], stall) for name, stall in stalls.items()
                if (windows[name] or 0) > WINDOW_GOAL_S or stall is None or stall > WINDOW_GOAL_S}
        assert not over, f"over {WINDOW_GOAL_S} s without a 200 (window, stall): {over}"


def _targets(profile: Stack, env: dict[str, str]) -> dict[str, str]:
    """Each gateway directly, and HAProxy (what the SDKs see)."""
    return {**{f"gateway {port}": f"http://127.0.0.1:{port}" for port in profile.cfg.gateway_ports},
            "haproxy": env["GATEWAY_URL"]}


def test_kill_9_the_leader_of_the_busiest_partitions(cluster: ClusterEnv) -> None:
    """Also measures, per gateway and through HAProxy, the window from the first failed answer to the first 200."""
    profile, env = cluster
    with Fleet(env) as fleet, Prober(_targets(profile, env), env["HEADWATER_WRITE_KEY"]) as prober:
        fleet.wait_acked(EVENTS_PER_FAULT // 5)
        node, partitions = busiest_leader(env["KAFKA_BOOTSTRAP"])
        print(f"\nkill -9 of node {node}, leader of partitions {partitions}")
        killed = time.monotonic()
        profile.kafka.node(node).kill()
        killed_at = fleet.acknowledged()
        wait_for("new leaders for the busiest partitions",
                 lambda: all(leaders(env["KAFKA_BOOTSTRAP"])[p] not in (node, -1) for p in partitions), 90)
        fleet.wait_acked(killed_at + 2000)  # producing goes on with two brokers
        wait_for("a 200 from every gateway again", lambda: prober.recovered(killed), 120)
        _report(prober, killed)
        profile.kafka.node(node).start_process()
        profile.kafka.wait_ready(3)
        fleet.check("leader kill -9")


def test_kill_9_the_active_controller(cluster: ClusterEnv) -> None:
    """The KRaft quorum's leader (a broker too, in this profile) killed under load: the two others elect a new
    one, producing goes on; the no-200 window per gateway and through HAProxy is printed."""
    profile, env = cluster
    dirs = [n.data_dir for n in profile.kafka.nodes]
    with Fleet(env) as fleet, Prober(_targets(profile, env), env["HEADWATER_WRITE_KEY"]) as prober:
        fleet.wait_acked(EVENTS_PER_FAULT // 5)
        node = active_controller(dirs)
        assert node is not None, "no node records a quorum leader"
        print(f"\nkill -9 of node {node}, the active controller")
        killed = time.monotonic()
        profile.kafka.node(node).kill()
        killed_at = fleet.acknowledged()
        others = [d for d in dirs if d != profile.kafka.node(node).data_dir]
        wait_for("a new active controller", lambda: active_controller(others) not in (None, node), 60)
        fleet.wait_acked(killed_at + 2000)
        wait_for("a 200 from every gateway again", lambda: prober.recovered(killed), 120)
        _report(prober, killed)
        profile.kafka.node(node).start_process()
        profile.kafka.wait_ready(3)
        fleet.check("active controller kill -9")


def test_kill_9_two_of_three_brokers_503s_then_recovery(cluster: ClusterEnv, go_producer: Path, tmp_path: Path) -> None:
    """With a Go SDK producer among the Python ones."""
    profile, env = cluster
    fleet = Fleet(env)
    start = end_offsets(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    with fleet, GoProducer(go_producer, env, GO_EVENTS, tmp_path) as go:
        fleet.wait_acked(EVENTS_PER_FAULT // 5)
        victims = [2, 3]
        for node in victims:
            profile.kafka.node(node).kill()
        # Requests in flight at the kill may still commit; after the gateways' transaction timeout, none can.
        time.sleep(TRANSACTION_TIMEOUT_S + 2)
        window = time.monotonic()
        acked = fleet.acknowledged()
        time.sleep(12)
        during = fleet.outcomes_since(window)
        print(f"\nunder min.insync.replicas for 12 s: {dict(during)}")
        assert during[200] == 0 and fleet.acknowledged() == acked, during
        assert during[503] > 0, during
        for node in victims:
            profile.kafka.node(node).start_process()
        profile.kafka.wait_ready(3)
        fleet.wait_acked(acked + 1000, timeout_s=180)
        fleet.check("two brokers kill -9")
        result = go.result()
    assert result["close_error"] is None and result["acknowledged"] == GO_EVENTS, result
    assert result["dropped"] == {} and result["rejected"] == 0, result
    by_seq = arrived(env, str(result["producer_id"]), GO_EVENTS, start)
    print(f"Go producer: {result['acknowledged']} acknowledged, {result['retries']} retries, "
          f"{len(by_seq)} seqs found in Kafka")
    assert sorted(by_seq) == list(range(GO_EVENTS))


def test_rolling_restart_of_every_gateway_behind_haproxy(cluster: ClusterEnv) -> None:
    profile, env = cluster
    fleet = Fleet(env, rate=1500.0)
    fleet.keep_going.set()
    with fleet:
        fleet.wait_acked(EVENTS_PER_FAULT // 10)
        started = time.monotonic()
        profile.rolling_restart()
        after = {port: batch_requests(port) for port in profile.cfg.gateway_ports}
        fleet.wait_acked(fleet.acknowledged() + 3000)
        fleet.keep_going.clear()
        spread = {port: batch_requests(port) for port in profile.cfg.gateway_ports}
        print(f"\nrolling restart took {time.monotonic() - started:.1f}s; /v1/batch answers per restarted instance "
              f"after it: {spread} (at the end of the restart: {after})")
        assert all(count > 0 for count in spread.values()), spread
        fleet.check("rolling restart")
    server_errors = {k: v for k, v in fleet.statuses.items() if isinstance(k, int) and k >= 500 and k != 503}
    assert not server_errors, fleet.statuses
    assert set(fleet.statuses) <= {200, 503}, fleet.statuses  # no transport error reached an SDK either


def test_kill_9_a_registry_the_other_serves_and_writes_work(cluster: ClusterEnv) -> None:
    profile, env = cluster
    lb = env["REGISTRY_URL"]
    direct = [f"http://127.0.0.1:{p}" for p in profile.cfg.registry_ports]
    # Both instances take writes (serialised through the _schemas log), and each sees the other's.
    for i, url in enumerate(direct):
        status, body = registry(url, "POST", f"/subjects/cluster-before-{i}/versions",
                                {"schema": record_schema(f"B{i}")})
        assert status == 200 and "id" in body, body
    def both_seen(url: str) -> bool:
        return {"cluster-before-0", "cluster-before-1"} <= set(registry(url, "GET", "/subjects")[1])

    for url in direct:
        wait_for(f"both writes visible on {url}", lambda url=url: both_seen(url), 30)  # type: ignore[misc]
    with Fleet(env) as fleet:
        fleet.wait_acked(EVENTS_PER_FAULT // 5)
        profile.registry_process(1).kill()
        for i in range(5):  # through HAProxy: reads and writes while one instance is dead
            status, body = registry(lb, "GET", "/subjects")
            assert status == 200, body
            status, body = registry(lb, "POST", f"/subjects/cluster-during-{i}/versions",
                                    {"schema": record_schema(f"D{i}")})
            assert status == 200 and "id" in body, body
        status, body = registry(direct[1], "GET", "/subjects/cluster-during-4/versions/latest")
        assert status == 200, body
        fleet.check("registry kill -9")
    profile.start_registry(1)
    status, body = registry(direct[0], "GET", "/subjects/cluster-during-4/versions/latest")
    assert status == 200, body  # the restarted instance replayed what the other wrote
    status, body = registry(direct[0], "POST", "/subjects/cluster-after/versions", {"schema": record_schema("A")})
    assert status == 200, body
