"""The cluster profile's settings: broker properties, HAProxy's config, per-gateway settings, the topology switch."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from stack.cluster.brokers import node_properties
from stack.cluster.cli import topology
from stack.cluster.config import HAPROXY_SOURCE, ClusterConfig
from stack.cluster.haproxy import HAProxy, render_config
from stack.cluster.services import gateway_env
from stack.cluster.topology import replicated_specs
from stack.config import ConfigError


def _cfg(tmp_path: Path, gateways: int = 3) -> ClusterConfig:
    ports = itertools.count(40000)
    return ClusterConfig.on_free_ports(tmp_path, lambda: next(ports), gateways=gateways)


@pytest.mark.unit
def test_three_voters_replication_three_min_insync_two_no_unclean_election(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    nodes = [node_properties(cfg, n) for n in (1, 2, 3)]
    assert len({p["listeners"] for p in nodes}) == 3 and len({p["log.dirs"] for p in nodes}) == 3
    assert {p["controller.quorum.voters"] for p in nodes} == {
        ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(cfg.controller_ports))}
    for props in nodes:
        assert props["default.replication.factor"] == props["transaction.state.log.replication.factor"] == "3"
        assert props["min.insync.replicas"] == props["transaction.state.log.min.isr"] == "2"
        assert props["unclean.leader.election.enable"] == "false"
    assert {s.config["min.insync.replicas"] for s in replicated_specs(cfg)} == {"2"}
    assert {s.config["min.insync.replicas"] for s in replicated_specs(cfg, replication_factor=1)} == {"1"}


@pytest.mark.unit
def test_haproxy_config_checks_readyz_forwards_for_and_lists_every_instance(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, gateways=4)
    text = render_config(cfg)
    assert "option httpchk GET /readyz" in text and "option forwardfor" in text
    assert f"source {HAPROXY_SOURCE}" in text
    for i, port in enumerate(cfg.gateway_ports):
        assert f"server gateway-{i + 1} 127.0.0.1:{port} check" in text
    assert f"server registry-1 127.0.0.1:{cfg.registry_ports[0]} check\n" in text
    assert f"server registry-2 127.0.0.1:{cfg.registry_ports[1]} check backup" in text
    assert f"bind 127.0.0.1:{cfg.gateway_port}" in text and f"bind 127.0.0.1:{cfg.registry_port}" in text
    assert "gateway-1 " not in render_config(cfg, cfg.gateway_ports[1:])


@pytest.mark.integration
def test_haproxy_accepts_the_rendered_config(tmp_path: Path) -> None:
    path = tmp_path / "haproxy.cfg"
    path.write_text(render_config(_cfg(tmp_path)))
    done = subprocess.run([HAProxy.binary(), "-c", "-f", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.unit
def test_each_gateway_has_its_own_transactional_ids_and_cache_and_trusts_only_haproxy(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    envs = [gateway_env(cfg, i) for i in (1, 2, 3)]
    assert len({e["HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX"] for e in envs}) == 3
    assert len({e["HEADWATER_GATEWAY_SHARED_DIR"] for e in envs}) == 3
    assert {e["HEADWATER_GATEWAY_TRUSTED_PROXIES"] for e in envs} == {HAPROXY_SOURCE}
    assert [e["HEADWATER_GATEWAY_PORT"] for e in envs] == [str(p) for p in cfg.gateway_ports]


@pytest.mark.unit
def test_topology_and_sizes_from_the_environment(tmp_path: Path) -> None:
    assert topology({}) == "single" and topology({"HEADWATER_TOPOLOGY": "Cluster"}) == "cluster"
    with pytest.raises(ConfigError, match="HEADWATER_TOPOLOGY"):
        topology({"HEADWATER_TOPOLOGY": "mesh"})
    env = {"HEADWATER_STATE_DIR": str(tmp_path), "GATEWAYS": "5", "HEADWATER_CLUSTER_PORT_BASE": "30000"}
    cfg = ClusterConfig.from_env(env)
    assert cfg.gateway_ports == (30031, 30032, 30033, 30034, 30035)
    assert cfg.bootstrap == "127.0.0.1:30001,127.0.0.1:30002,127.0.0.1:30003"
    assert cfg.gateway_url == "http://127.0.0.1:8080" and cfg.stack.kafka_heap_mb == 384
    with pytest.raises(ConfigError, match="GATEWAYS"):
        ClusterConfig.from_env({**env, "GATEWAYS": "0"})
