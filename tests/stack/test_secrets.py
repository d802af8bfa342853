"""The stack's credentials: made once, kept, 0600 in a 0700 folder; the registry's users file verifies them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from common.basic_auth import Users
from common.kafka_security import KafkaSecurity
from common.registry_access import RegistryAccess
from stack.kafka_acls import PRINCIPALS
from stack.secrets import StackSecrets

pytestmark = pytest.mark.unit


def test_made_once_private_and_verifiable(tmp_path: Path) -> None:
    s = StackSecrets(tmp_path / "secrets")
    passwords = s.kafka_passwords()
    assert set(passwords) == {"admin", *PRINCIPALS} and len(set(passwords.values())) == len(passwords)
    assert StackSecrets(tmp_path / "secrets").kafka_passwords() == passwords  # kept across `up`s
    users = Users(s.registry_users_file(), frozenset({"read", "write", "admin"}))
    assert users.check(*s.admin_registry_credentials()) == "admin"
    for path in (tmp_path / "secrets").rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


def test_tools_env_names_each_tool_its_own_principal(tmp_path: Path) -> None:
    s = StackSecrets(tmp_path / "secrets")
    ca = tmp_path / "ca.pem"
    ca.write_text("pem")
    env = s.tools_env(ca)
    assert "password" not in "".join(env.values()).lower().replace(".password", "")
    rules = KafkaSecurity.from_env(env, "RULES")
    assert (rules.username, rules.protocol) == ("rules", "SASL_SSL")
    assert rules.password == (tmp_path / "secrets" / "kafka" / "rules.password").read_text().strip()
    assert RegistryAccess.from_env(env, "SCHEMAS").user == "admin"
    assert RegistryAccess.from_env(env, "DEADLETTER").user == "deadletter"
    assert KafkaSecurity.from_env(s.tools_env(None), "RULES").protocol == "PLAINTEXT"  # a PLAINTEXT stack


def test_a_secret_made_by_several_threads_at_once_is_one_secret(tmp_path: Path) -> None:
    """The brokers' storage formats, run in parallel, each made the password files and raced on one temp file."""
    from concurrent.futures import ThreadPoolExecutor

    store = StackSecrets(tmp_path)
    with ThreadPoolExecutor(8) as pool:
        seen = set(pool.map(lambda _: store.kafka_password_file("rules").read_text(), range(32)))
    assert len(seen) == 1 and sorted(p.name for p in (tmp_path / "kafka").iterdir()) == ["rules.password"]


def test_the_development_keys_are_made_once_by_concurrent_callers_and_kept_private(tmp_path: Path) -> None:
    """`dev_write_key` / `dev_read_key` wrote through one fixed `.tmp` name: two `up`s or services at once raced."""
    from concurrent.futures import ThreadPoolExecutor

    from stack.services import dev_read_key, dev_write_key
    from tests.support.stack import private_stack_config

    cfg = private_stack_config(tmp_path / "state")
    for make, folder, prefix in ((dev_write_key, "gateway", "hw_"), (dev_read_key, "subscribe", "hwr_")):
        with ThreadPoolExecutor(8) as pool:
            keys = set(pool.map(lambda _, make=make: make(cfg), range(32)))
        (key,) = keys
        assert key.startswith(prefix) and make(cfg) == key
        names = {p.name for p in (cfg.state_dir / folder).iterdir()}
        assert not [n for n in names if n.endswith(".tmp")], names  # no temp file left behind
        kind = "write" if folder == "gateway" else "read"
        assert stat.S_IMODE((cfg.state_dir / folder / f"dev-{kind}-key").stat().st_mode) == 0o600
