"""The cluster profile on free ports for the whole session (3 brokers, 2 registries, 3 gateways, HAProxy), started
once and shared by every fault test of tests/cluster/. The fault suite runs the topology without its security
(plain listeners, no ACLs): it measures what faults cost, and its probes talk to each instance directly; the
secured cluster itself is started and used end to end by tests/cluster/test_secure_cluster.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from stack.config import CLUSTER, REPO_ROOT, StackConfig
from stack.haproxy import HAProxy
from stack.launcher import Stack
from tests.support.ports import free_port

# The gateways' Kafka timeouts stay at their defaults (what a broker loss costs is measured with them); only the
# registry refresh and the drain are shortened, so the registry and rolling-restart faults fit the suite's time.
CLUSTER_GATEWAY_ENV = {
    "HEADWATER_GATEWAY_REGISTRY_REFRESH_S": "2",
    "HEADWATER_GATEWAY_SHUTDOWN_TIMEOUT_S": "10",
}


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, dict[str, str]]]:
    """The running profile and its stack.env, up for this folder's tests only (package scope: its five JVMs and
    services would otherwise idle through the rest of the session); a machine without HAProxy fails here
    (`make setup-haproxy`)."""
    HAProxy.binary()
    # tests/cluster/spark_fault.py starts its own Spark
    topology = replace(CLUSTER, console=False, spark=False, secure=False)
    cfg = StackConfig.on_free_ports(tmp_path_factory.mktemp("cluster"), free_port, topology, events_partitions=6)
    profile = Stack(cfg, gateway_env=CLUSTER_GATEWAY_ENV)
    try:
        yield profile, profile.up().env
    finally:
        profile.down()


@pytest.fixture(scope="session")
def go_producer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go SDK's test producer (sdk-go/cmd/headwater-produce), built once (Go's build cache makes it quick)."""
    out = tmp_path_factory.mktemp("go-bin") / "headwater-produce"
    go = shutil.which("go") or "/usr/local/go/bin/go"
    subprocess.run([go, "build", "-o", str(out), "./cmd/headwater-produce"], cwd=REPO_ROOT / "sdk-go", check=True,
                   timeout=600, env={**os.environ, "GOTOOLCHAIN": "local"})
    return out
