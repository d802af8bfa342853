"""A follower's settings: REGISTRY_PRIMARY_URL makes one, and its URL, CA and bounds are checked at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.config import ConfigError, FollowerConfig, RegistryConfig
from tests.certs import TestCA

pytestmark = pytest.mark.unit
BASE = {"KAFKA_BOOTSTRAP": "127.0.0.1:9092"}


def test_without_a_primary_url_the_registry_is_the_primary() -> None:
    assert RegistryConfig.from_env(BASE).follower is None
    # The bounds are read (and checked) either way: one environment may serve both regions' registries.
    assert RegistryConfig.from_env({**BASE, "REGISTRY_FORWARD_TIMEOUT_S": "3"}).follower is None


def test_a_primary_url_makes_a_follower_with_the_documented_defaults() -> None:
    cfg = RegistryConfig.from_env({**BASE, "REGISTRY_PRIMARY_URL": " http://registry.region-a:8081/ ",
                                   "SCHEMAS_TOPIC": "a._schemas"})
    assert cfg.follower == FollowerConfig("http://registry.region-a:8081", "", 10.0, 5.0)
    assert cfg.topic == "a._schemas"


def test_bounds_and_a_path_prefix() -> None:
    cfg = RegistryConfig.from_env({**BASE, "REGISTRY_PRIMARY_URL": "https://[::1]:9443/registry/",
                                   "REGISTRY_FORWARD_TIMEOUT_S": "2.5", "REGISTRY_FOLLOW_WAIT_S": "0"})
    assert cfg.follower == FollowerConfig("https://[::1]:9443/registry", "", 2.5, 0.0)


def test_a_ca_is_loaded_at_start_and_only_for_an_https_primary(tmp_path: Path) -> None:
    ca = TestCA(tmp_path).pem
    cfg = RegistryConfig.from_env({**BASE, "REGISTRY_PRIMARY_URL": "https://127.0.0.1:8081",
                                   "REGISTRY_PRIMARY_CA": str(ca)})
    assert cfg.follower is not None and cfg.follower.primary_ca == str(ca)
    with pytest.raises(ConfigError, match=r"REGISTRY_PRIMARY_CA applies to an https REGISTRY_PRIMARY_URL only"):
        RegistryConfig.from_env({**BASE, "REGISTRY_PRIMARY_URL": "http://127.0.0.1:8081",
                                 "REGISTRY_PRIMARY_CA": str(ca)})
    with pytest.raises(ConfigError, match=r"REGISTRY_PRIMARY_CA='.*missing.pem': cannot load"):
        RegistryConfig.from_env({**BASE, "REGISTRY_PRIMARY_URL": "https://127.0.0.1:8081",
                                 "REGISTRY_PRIMARY_CA": str(tmp_path / "missing.pem")})
    with pytest.raises(ConfigError, match=r"REGISTRY_PRIMARY_CA is set but REGISTRY_PRIMARY_URL is not"):
        RegistryConfig.from_env({**BASE, "REGISTRY_PRIMARY_CA": str(ca)})


@pytest.mark.parametrize(("url", "message"), [
    ("registry.region-a:8081", r"REGISTRY_PRIMARY_URL='registry.region-a:8081' must start with http:// or https://"),
    ("ftp://registry.region-a", r"must start with http:// or https://"),
    ("http://:8081", r"REGISTRY_PRIMARY_URL='http://:8081' names no host"),
    ("http://registry:notaport", r"REGISTRY_PRIMARY_URL: Port could not be cast"),
    ("http://registry:8081/?x=1", r"must not have a query or fragment"),
    ("http://registry:8081#top", r"must not have a query or fragment"),
])
def test_a_bad_primary_url_is_refused_naming_the_variable(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RegistryConfig.from_env({**BASE, "REGISTRY_PRIMARY_URL": url})


def test_credentials_in_the_url_are_refused_and_not_repeated() -> None:
    with pytest.raises(ConfigError) as info:
        RegistryConfig.from_env({**BASE, "REGISTRY_PRIMARY_URL": "https://ops:s3cret-pw@registry.region-a:8081/"})
    message = str(info.value)
    assert "REGISTRY_PRIMARY_URL='https://registry.region-a:8081/' must not carry user-info" in message
    assert "s3cret-pw" not in message and "ops" not in message


@pytest.mark.parametrize(("env", "message"), [
    ({"REGISTRY_FORWARD_TIMEOUT_S": "0"}, r"REGISTRY_FORWARD_TIMEOUT_S=0.0 is outside \[0.1, 300.0\]"),
    ({"REGISTRY_FORWARD_TIMEOUT_S": "soon"}, r"REGISTRY_FORWARD_TIMEOUT_S='soon' is not a number"),
    ({"REGISTRY_FOLLOW_WAIT_S": "-1"}, r"REGISTRY_FOLLOW_WAIT_S=-1.0 is outside \[0.0, 300.0\]"),
    ({"REGISTRY_FOLLOW_WAIT_S": "301"}, r"REGISTRY_FOLLOW_WAIT_S=301.0 is outside"),
])
def test_bounds_name_their_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RegistryConfig.from_env({**BASE, "REGISTRY_PRIMARY_URL": "http://127.0.0.1:8081", **env})
