"""The topology's settings: counts from the environment, broker properties of one node and of three, HAProxy's
config, per-gateway settings, what `down` stops."""

from __future__ import annotations

import itertools
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from stack.config import CLUSTER, HAPROXY_CLIENT_NAME, SINGLE, ConfigError, StackConfig, Topology, topology_from_env
from stack.haproxy import HAProxy, render_config
from stack.kafka import Brokers, node_properties
from stack.launcher import Stack, running_topology
from stack.services import gateway_env, services
from stack.topics import topic_specs


def _cfg(tmp_path: Path, gateways: int = 3) -> StackConfig:
    ports = itertools.count(40000)
    return StackConfig.on_free_ports(tmp_path, lambda: next(ports), replace(CLUSTER, gateways=gateways))


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
        # A dead node's partitions get new leaders within seconds (the broker-loss window of docs/cluster.md).
        assert int(props["broker.heartbeat.interval.ms"]) * 4 <= int(props["broker.session.timeout.ms"]) <= 5000
    assert {s.config["min.insync.replicas"] for s in topic_specs(cfg)} == {"2"}
    assert {s.config["min.insync.replicas"] for s in topic_specs(cfg, replication_factor=1)} == {"1"}


@pytest.mark.unit
def test_one_node_is_a_quorum_of_itself_with_everything_on_one_replica(tmp_path: Path) -> None:
    cfg = StackConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path)})
    props = node_properties(cfg, 1)
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
    assert "controller.quorum.voters" not in props and "replica.lag.time.max.ms" not in props
    assert props["min.insync.replicas"] == props["offsets.topic.replication.factor"] == "1"
    node = Brokers(cfg).node(1)
    assert (node.name, node.props_file, node.data_dir) == ("kafka", tmp_path / "conf" / "server.properties",
                                                           tmp_path / "data" / "kafka")


@pytest.mark.unit
def test_haproxy_config_checks_readyz_forwards_for_and_lists_every_instance(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, gateways=4)
    text = render_config(cfg)
    assert "option httpchk GET /readyz" in text and "option forwardfor" in text
    assert "tcp-request connection reject if { sc_conn_cur(0) gt 256 }" in text  # per source address
    assert "deny_status 429 if { sc_http_req_rate(0) gt 20000 }" in text
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
    assert {e.get("HEADWATER_GATEWAY_TRUSTED_PROXY_NAMES") for e in envs} == (
        {HAPROXY_CLIENT_NAME} if cfg.topology.secure else {None})
    assert not any("HEADWATER_GATEWAY_TRUSTED_PROXIES" in e for e in envs)  # never an address
    assert [e["HEADWATER_GATEWAY_PORT"] for e in envs] == [str(p) for p in cfg.gateway_ports]
    alone = gateway_env(StackConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path)}))
    assert not {"HEADWATER_GATEWAY_TRUSTED_PROXY_NAMES", "HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX"} & set(alone)


@pytest.mark.unit
def test_topology_and_sizes_from_the_environment(tmp_path: Path) -> None:
    assert topology_from_env({}) == SINGLE and topology_from_env({"HEADWATER_TOPOLOGY": "Cluster"}) == CLUSTER
    with pytest.raises(ConfigError, match="HEADWATER_TOPOLOGY"):
        topology_from_env({"HEADWATER_TOPOLOGY": "mesh"})
    env = {"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_TOPOLOGY": "cluster", "GATEWAYS": "5",
           "HEADWATER_CLUSTER_PORT_BASE": "30000"}
    cfg = StackConfig.from_env(env)
    assert cfg.gateway_ports == (30031, 30032, 30033, 30034, 30035)
    assert cfg.bootstrap == "127.0.0.1:30001,127.0.0.1:30002,127.0.0.1:30003"
    assert cfg.gateway_url == "https://localhost:8080" and cfg.kafka_heap_mb == 384 and cfg.gateway_workers == 1
    assert cfg.topology.secure and not StackConfig.from_env({**env, "HEADWATER_SECURE": "0"}).topology.secure
    with pytest.raises(ConfigError, match="GATEWAYS"):
        StackConfig.from_env({**env, "GATEWAYS": "0"})


@pytest.mark.unit
def test_counts_are_set_one_by_one_and_several_instances_need_haproxy(tmp_path: Path) -> None:
    env = {"HEADWATER_STATE_DIR": str(tmp_path)}
    three_gateways = topology_from_env({**env, "GATEWAYS": "3"})
    assert (three_gateways.brokers, three_gateways.gateways, three_gateways.haproxy) == (1, 3, True)
    assert topology_from_env({"HEADWATER_TOPOLOGY": "cluster", "HEADWATER_CLUSTER_SPARK": "0"}).spark is False
    with pytest.raises(ConfigError, match="HEADWATER_HAPROXY=0"):
        topology_from_env({"HEADWATER_REGISTRIES": "2", "HEADWATER_HAPROXY": "0"})
    cfg = StackConfig.from_env({**env, "GATEWAYS": "3"})
    assert cfg.bootstrap == "127.0.0.1:9092" and len(set(cfg.gateway_ports)) == 3 and cfg.gateway_port == 8080
    assert [s.name for s in services(cfg)] == ["registry", "gateway-1", "gateway-2", "gateway-3", "subscribe",
                                               "console"]


@pytest.mark.unit
def test_the_console_port_comes_from_the_given_environment_only(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A test stack on chosen ports never takes the console port exported in the shell (two consoles collided)."""
    monkeypatch.setenv("HEADWATER_CONSOLE_PORT", "8090")
    cfg = StackConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_GATEWAY_PORT": "18080"})
    assert cfg.console_port != 8090
    assert StackConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_GATEWAY_PORT": "18080"}
                                ).console_port == cfg.console_port  # kept for the next `up`


@pytest.mark.unit
def test_down_and_status_follow_the_recorded_topology(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    cfg.topology_file.parent.mkdir(parents=True, exist_ok=True)
    cfg.topology_file.write_text(cfg.topology.to_json())
    assert Topology.from_json(cfg.topology_file.read_text()) == cfg.topology
    assert Topology.from_json("cluster\n") == CLUSTER  # what earlier versions wrote
    status = Stack(cfg).status()
    assert set(status) == {"kafka-1", "kafka-2", "kafka-3", "registry-1", "registry-2", "gateway-1", "gateway-2",
                           "gateway-3", "subscribe-1", "subscribe-2", "haproxy", "console", "spark-master",
                           "spark-worker"}
    assert not any(status.values())


@pytest.mark.unit
def test_an_unreadable_topology_record_is_a_config_error(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    cfg.topology_file.parent.mkdir(parents=True, exist_ok=True)
    cfg.topology_file.write_text('{"brokers": "many", "colour": 1}')
    with pytest.raises(ConfigError, match="topology is unreadable"):
        running_topology(cfg)
