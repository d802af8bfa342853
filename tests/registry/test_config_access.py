"""The registry's access settings: authentication cannot be left off by accident beyond loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.basic_auth import hash_password
from registry.config import ConfigError, RegistryConfig

pytestmark = pytest.mark.unit
BASE = {"KAFKA_BOOTSTRAP": "127.0.0.1:9092"}


def test_loopback_without_users_serves_open_writes_and_says_so_in_its_log() -> None:
    cfg = RegistryConfig.from_env(BASE)
    assert cfg.access.users_file == "" and cfg.access.reads_open and cfg.tls is None


def test_beyond_loopback_a_users_file_is_required_unless_explicitly_none() -> None:
    with pytest.raises(ConfigError, match=r"REGISTRY_HOST=0\.0\.0\.0 is beyond loopback: set REGISTRY_USERS_FILE"):
        RegistryConfig.from_env({**BASE, "REGISTRY_HOST": "0.0.0.0"})
    cfg = RegistryConfig.from_env({**BASE, "REGISTRY_HOST": "0.0.0.0", "REGISTRY_AUTH": "none"})
    assert cfg.access.users_file == ""


def test_a_users_file_is_checked_at_start(tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text(f"ops:admin:{hash_password('x', iterations=1000)}\n")
    cfg = RegistryConfig.from_env({**BASE, "REGISTRY_HOST": "0.0.0.0", "REGISTRY_USERS_FILE": str(users),
                                   "REGISTRY_READS": "authenticated", "REGISTRY_ALLOWED_ORIGINS": "https://a, https://b"})
    assert not cfg.access.reads_open and cfg.access.allowed_origins == {"https://a", "https://b"}
    users.write_text("ops:superuser:x\n")
    with pytest.raises(ConfigError, match=r"REGISTRY_USERS_FILE: .*users line 1"):
        RegistryConfig.from_env({**BASE, "REGISTRY_USERS_FILE": str(users)})
    with pytest.raises(ConfigError, match=r"REGISTRY_USERS_FILE: .*No such file"):
        RegistryConfig.from_env({**BASE, "REGISTRY_USERS_FILE": str(tmp_path / "missing")})


@pytest.mark.parametrize(("env", "message"), [
    ({"REGISTRY_READS": "closed"}, "REGISTRY_READS='closed' is not open or authenticated"),
    ({"REGISTRY_READS": "authenticated"}, "REGISTRY_READS=authenticated needs REGISTRY_USERS_FILE"),
    ({"REGISTRY_AUTH": "maybe"}, "REGISTRY_AUTH='maybe'"),
    ({"REGISTRY_TLS_CERT": "/x.pem"}, "REGISTRY_TLS_CERT and REGISTRY_TLS_KEY go together"),
    ({"REGISTRY_TLS_CERT": "/x.pem", "REGISTRY_TLS_KEY": "/x.key"}, "cannot load"),
    ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "KAFKA_SECURITY_PROTOCOL=SASL_SSL needs"),
])
def test_bad_settings_name_their_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RegistryConfig.from_env({**BASE, **env})
