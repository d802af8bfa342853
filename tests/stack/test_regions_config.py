"""Unit tests of the regions profile's settings: each region's ports and state directory, MirrorMaker 2's
mm2.properties (secure: its principal and its file's mode), the grants of a secure region, and which command
`python -m stack` routes to it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from stack.__main__ import is_secret, wants_regions
from stack.certs import CertificateAuthority
from stack.config import ConfigError
from stack.kafka_acls import MIRROR, Grant, bindings, mirror_grants, mirrored_grants
from stack.mirror import MirrorCredentials, MirrorError, MirrorMaker, MirrorSettings, mirror_properties
from stack.regions import NAMES, Regions, RegionsConfig

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
    assert cfg.pipeline_ports == (30008, 30208) and cfg.pipeline  # each region a full stack, its pipeline with it
    without = {"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_REGIONS_PIPELINE": "0"}
    assert not RegionsConfig.from_env(without).pipeline


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


def test_headwater_secure_makes_both_regions_secure(tmp_path: Path) -> None:
    cfg = RegionsConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_SECURE": "1"})
    assert cfg.secure and all(c.topology.secure for c in cfg.regions)
    assert all(c.registry_url.startswith("https://localhost:") for c in cfg.regions)
    mirror = cfg.mirror_settings()
    assert set(mirror.credentials) == {"a", "b"}
    assert mirror.credentials["b"].ca == tmp_path / "regions" / "b" / "secrets" / "tls" / "ca.pem"
    plain = RegionsConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path)})
    assert not plain.secure and not plain.mirror_settings().credentials  # the default: PLAINTEXT
    with pytest.raises(ConfigError, match="HEADWATER_SECURE"):
        RegionsConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_SECURE": "yes"})


def test_secure_mirror_properties_use_the_mirror_principal_of_each_region(tmp_path: Path) -> None:
    creds = {}
    for name in ("a", "b"):
        secrets_dir = tmp_path / name / "secrets"
        (secrets_dir / "kafka").mkdir(parents=True)
        (secrets_dir / "kafka" / "mirror.password").write_text(f"pw-{name}\n")
        creds[name] = MirrorCredentials(tmp_path / name / "ca.pem", secrets_dir)
    props = mirror_properties(MirrorSettings({"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, tmp_path, credentials=creds))
    for name in ("a", "b"):
        assert props[f"{name}.security.protocol"] == "SASL_SSL"
        assert props[f"{name}.sasl.mechanism"] == "SCRAM-SHA-512"
        assert props[f"{name}.sasl.jaas.config"] == (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="mirror" password="pw-{name}";')
        assert props[f"{name}.ssl.truststore.location"] == str(tmp_path / name / "ca.pem")
    with pytest.raises(MirrorError, match="all regions secure, or none"):
        mirror_properties(MirrorSettings({"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, tmp_path,
                                         credentials={"a": creds["a"]}))


def test_the_mm2_properties_file_is_private_from_its_creation(tmp_path: Path) -> None:
    (tmp_path / "s" / "kafka").mkdir(parents=True)
    (tmp_path / "s" / "kafka" / "mirror.password").write_text("secret-pw\n")
    creds = {n: MirrorCredentials(tmp_path / "ca.pem", tmp_path / "s") for n in ("a", "b")}
    maker = MirrorMaker(MirrorSettings({"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, tmp_path, credentials=creds))
    maker.write_config()
    assert stat.S_IMODE(maker.s.props_file.stat().st_mode) == 0o600
    assert 'password="secret-pw"' in maker.s.props_file.read_text()


def _granted(table: tuple[Grant, ...]) -> dict[tuple[str, str, bool], set[str]]:
    return {(g.resource, g.name, g.prefixed): set(g.operations) for g in table}


def test_components_may_read_the_mirrored_copies_and_never_write_them() -> None:
    follower = mirrored_grants(("a",), "a")
    pipeline = _granted(follower["pipeline"])
    assert pipeline[("topic", "a.headwater.events", True)] == {"read", "describe"}
    assert pipeline[("topic", "a.headwater.rule.", True)] == {"read", "describe"}
    assert ("topic", "a._headwater_rules", False) not in pipeline  # not mirrored: not granted
    assert _granted(follower["registry"]) == {("topic", "a._schemas", False): {"read", "describe"}}
    assert "gateway" not in follower  # writes only: nothing mirrored to read
    primary = mirrored_grants(("b",), None)
    assert "registry" not in primary
    assert _granted(primary["loadtest"])[("topic", "b.headwater.events", True)] == {"read", "describe"}
    assert all("write" not in g.operations for gs in (*follower.values(), *primary.values()) for g in gs)


def test_the_mirror_principal_gets_its_least_grants_in_each_region() -> None:
    in_a = _granted(mirror_grants("a", ("b",), "a"))
    in_b = _granted(mirror_grants("b", ("a",), "a"))
    assert in_a[("topic", "headwater.events", False)] == {"read", "describe", "describe_configs"}
    assert ("topic", "_schemas", False) in in_a and ("topic", "_schemas", False) not in in_b
    assert in_b[("topic", "a.", True)] == {"read", "write", "create", "describe", "describe_configs", "alter",
                                            "alter_configs"}
    assert ("topic", "b.", True) not in in_b  # never writes copies named after its own region
    assert in_b[("transactional_id", "a-mm2-", True)] == {"write", "describe"}
    assert in_b[("transactional_id", "connect-cluster-a-mm2", False)] == {"write", "describe"}
    assert in_b[("group", "a-mm2", False)] == {"read", "describe"}
    assert in_a[("topic", "mm2-", True)] >= {"create", "read", "write"}
    assert all(not (r == "topic" and n == "headwater.events" and "write" in ops) for (r, n, _), ops in in_a.items())
    assert len(bindings({MIRROR: mirror_grants("a", ("b",), "a")})) == sum(len(ops) for ops in in_a.values())


def test_secure_regions_share_one_ca_and_the_registry_passwords(tmp_path: Path) -> None:
    cfg = RegionsConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_SECURE": "1"})
    a, b = cfg.regions
    stale = CertificateAuthority(b.tls_dir)  # b had a CA of its own, and a leaf of it
    stale.issue("registry")
    old_ca = stale.pem.read_bytes()
    profile = Regions(cfg)
    profile._share_ca()
    assert (a.tls_dir / "ca.pem").read_bytes() == (b.tls_dir / "ca.pem").read_bytes() != old_ca
    assert not (b.tls_dir / "registry.pem").exists()  # signed by the old CA: removed, reissued at the start
    assert stat.S_IMODE((b.tls_dir / "ca.key").stat().st_mode) == 0o600
    leaf = CertificateAuthority(b.tls_dir).issue("registry")  # b's CA is the shared one, not a new one
    assert (b.tls_dir / "ca.pem").read_bytes() == (a.tls_dir / "ca.pem").read_bytes() and leaf.cert.exists()
    profile._share_registry_credentials()
    for name in ("admin", "pipeline", "gateway"):
        assert (a.secrets_dir / "registry" / f"{name}.credentials").read_text() == (
            b.secrets_dir / "registry" / f"{name}.credentials").read_text()
    (b.secrets_dir / "registry" / "pipeline.credentials").write_text("pipeline:another\n")
    with pytest.raises(ConfigError, match="another registry password"):
        profile._share_registry_credentials()
