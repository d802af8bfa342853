"""Unit tests of the regions profile's settings: each region's ports and state directory, MirrorMaker 2's
mm2.properties, and which command `python -m stack` routes to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.__main__ import is_secret, wants_regions
from stack.config import ConfigError
from stack.mirror import MirrorError, MirrorSettings, mirror_properties
from stack.regions import NAMES, RegionsConfig

pytestmark = pytest.mark.unit


def test_regions_have_their_own_state_and_disjoint_ports(tmp_path: Path) -> None:
    cfg = RegionsConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_REGIONS_PORT_BASE": "30000"})
    a, b = cfg.regions
    assert (a.state_dir, b.state_dir) == (tmp_path / "regions" / "a", tmp_path / "regions" / "b")
    assert (a.kafka_port, a.registry_port, a.gateway_port) == (30001, 30004, 30005)
    assert (b.kafka_port, b.registry_port, b.gateway_port) == (30201, 30204, 30205)
    ports = [{*c.broker_ports, *c.controller_ports, *c.registry_ports, *c.gateway_ports, *c.subscribe_ports,
              c.registry_port, c.gateway_port, c.subscribe_port, c.stats_port} for c in cfg.regions]
    assert not ports[0] & ports[1]
    assert all(30000 < p < 30400 for p in ports[0] | ports[1])
    assert a.topology.gateways == 2 and a.topology.haproxy and not a.topology.secure and not a.topology.spark
    assert a.kafka_heap_mb == 384 and cfg.env_file == tmp_path / "stack.env"
    assert cfg.pipeline_ports == (30008, 30208) and not cfg.pipeline
    assert RegionsConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_REGIONS_PIPELINE": "1"}).pipeline


def test_a_bad_regions_setting_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="HEADWATER_MIRROR_HEAP_MB"):
        RegionsConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_MIRROR_HEAP_MB": "lots"})


def test_mirror_properties_mirror_both_ways_and_schemas_from_the_primary_only(tmp_path: Path) -> None:
    props = mirror_properties(MirrorSettings({"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, tmp_path))
    assert props["clusters"] == "a, b"
    assert props["a->b.enabled"] == props["b->a.enabled"] == "true"
    assert props["a->b.topics"].endswith("|_schemas")
    assert "_schemas" not in props["b->a.topics"]
    assert props["a.consumer.isolation.level"] == props["b.consumer.isolation.level"] == "read_committed"
    assert props["a.exactly.once.source.support"] == "enabled"
    assert props["emit.checkpoints.enabled"] == props["sync.group.offsets.enabled"] == "true"
    assert props["sync.topic.acls.enabled"] == "false"
    assert props["replication.factor"] == props["offset-syncs.topic.replication.factor"] == "1"


def test_mirror_needs_two_regions(tmp_path: Path) -> None:
    with pytest.raises(MirrorError, match="two regions"):
        mirror_properties(MirrorSettings({"a": "127.0.0.1:1"}, tmp_path))


def test_the_cli_routes_the_regions_topology_and_hides_keys() -> None:
    assert wants_regions({"HEADWATER_TOPOLOGY": " Regions "}) and not wants_regions({"HEADWATER_TOPOLOGY": "cluster"})
    assert NAMES == ("a", "b")
    assert is_secret("HEADWATER_READ_KEY") and is_secret("HEADWATER_WRITE_KEY") and not is_secret("GATEWAY_URL_A")
