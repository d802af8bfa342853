"""The users file, password hashes, Authorization headers and the failed-login limiter (pure, no network)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from common.basic_auth import (
    AuthConfigError,
    FailureLimiter,
    Users,
    hash_password,
    parse_authorization,
    parse_users,
    user_info,
)

pytestmark = pytest.mark.unit
ROLES = frozenset({"read", "write"})


def test_hashes_are_salted_and_verified(tmp_path: Path) -> None:
    pw = "s3cret-pw"  # a "-" never appears in a hash (base64 and "$"): the check below cannot pass or fail by chance
    a, b = hash_password(pw, iterations=1000), hash_password(pw, iterations=1000)
    assert a != b and pw not in a
    path = tmp_path / "users"
    path.write_text(f"alice:write:{a}\nalice:read:{b}\n")
    users = Users(path, ROLES)
    assert users.check("alice", pw) == "write"
    assert users.cached("alice", pw) == "write"
    assert users.check("alice", "wrong") is None and users.check("bob", pw) is None
    assert users.cached("alice", "wrong") is None


@pytest.mark.parametrize("line", ["alice", "alice:write", "alice:root:" + hash_password("x", iterations=1000),
                                  "alice:write:md5$1$x$y", "alice:write:pbkdf2_sha256$10$AA==$AA==",
                                  "alice:write:pbkdf2_sha256$5000$!!$AA==", ":write:" + hash_password("x")])
def test_a_bad_line_is_refused_naming_the_line_not_the_hash(line: str) -> None:
    with pytest.raises(AuthConfigError, match="users line 2: expected") as err:
        parse_users("# comment\n" + line + "\n", "users", ROLES)
    assert "pbkdf2_sha256$5000" not in str(err.value)


@pytest.mark.parametrize(("header", "expected"), [
    ("Basic " + base64.b64encode(b"u:p:q").decode(), ("u", "p:q")),
    ("basic " + base64.b64encode("ü:p".encode()).decode(), ("ü", "p")),
    ("Basic " + base64.b64encode(b"nocolon").decode(), None),
    ("Basic " + base64.b64encode(b":p").decode(), None),
    ("Basic !!!", None), ("Bearer x", None), ("", None), ("Basic", None),
    ("Basic " + base64.b64encode(b"\xff:p").decode(), None),
])
def test_authorization_headers(header: str, expected: tuple[str, str] | None) -> None:
    assert parse_authorization(header) == expected


def test_the_limiter_refuses_after_the_burst_and_recovers() -> None:
    limiter = FailureLimiter(per_s=2.0, burst=3, max_sources=2)
    for _ in range(3):
        assert limiter.blocked("a", now=0.0) == 0.0
        limiter.failed("a", now=0.0)
    assert limiter.blocked("a", now=0.0) == pytest.approx(0.5)
    assert limiter.blocked("b", now=0.0) == 0.0
    assert limiter.blocked("a", now=0.5) == 0.0
    limiter.failed("b", now=0.0)
    limiter.failed("c", now=0.0)  # the oldest source is forgotten, memory stays bounded
    assert len(limiter._buckets) == 2


def test_client_credentials(tmp_path: Path) -> None:
    (tmp_path / "info").write_text("gateway:pw:with:colons\n")
    assert user_info({"HEADWATER_GATEWAY_REGISTRY_BASIC_AUTH_USER_INFO_FILE": str(tmp_path / "info")},
                     "REGISTRY_BASIC_AUTH_USER_INFO", "gateway") == ("gateway", "pw:with:colons")
    assert user_info({}, "REGISTRY_BASIC_AUTH_USER_INFO") is None
    with pytest.raises(AuthConfigError, match="expected user:password"):
        user_info({"REGISTRY_BASIC_AUTH_USER_INFO": "nopassword"}, "REGISTRY_BASIC_AUTH_USER_INFO")


def test_the_hashing_command_reads_the_password_on_stdin(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "common.basic_auth"], input="pw\n", capture_output=True, text=True,
                         check=True, timeout=60)
    path = tmp_path / "users"
    path.write_text(f"ops:read:{out.stdout.strip()}\n")
    assert Users(path, ROLES).check("ops", "pw") == "read"
