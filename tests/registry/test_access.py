"""Hostile requests to the registry: anonymous and under-privileged writes, guessed passwords, cross-site pages and
non-JSON bodies; each refused with its status and Confluent error code, and nothing stored. Real HTTP on loopback,
the in-memory schema log."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from common.basic_auth import hash_password
from registry.access import AccessPolicy, cross_site, required_role
from registry.api import make_app
from registry.schema_log import MemoryLog
from registry.service import Registry

pytestmark = pytest.mark.integration
Scenario = Callable[[TestClient[Any, Any]], Awaitable[None]]
SCHEMA = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "string"}]})
JSON = "application/vnd.schemaregistry.v1+json"
PASSWORDS = {"reader": "r-secret", "writer": "w-secret", "admin": "a-secret"}


def users_file(folder: Path) -> Path:
    path = folder / "users"
    path.write_text("# test users\n" + "".join(
        f"{name}:{role}:{hash_password(PASSWORDS[name], iterations=1000)}\n"
        for name, role in (("reader", "read"), ("writer", "write"), ("admin", "admin"))))
    return path


def basic(name: str, password: str | None = None) -> dict[str, str]:
    token = base64.b64encode(f"{name}:{password or PASSWORDS[name]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def run(policy: AccessPolicy, scenario: Scenario) -> None:
    async def main() -> None:
        registry = Registry(MemoryLog())
        await registry.start()
        async with TestClient(TestServer(make_app(registry, policy))) as client:
            await scenario(client)

    asyncio.run(main())


async def call(c: TestClient[Any, Any], method: str, path: str, *, body: Any = None, ctype: str = JSON,
               headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    resp = await c.request(method, path, data=data, headers={"Content-Type": ctype, **(headers or {})})
    return resp.status, await resp.json(content_type=None), resp.headers


async def subjects(c: TestClient[Any, Any]) -> Any:
    return (await call(c, "GET", "/subjects", headers=basic("admin")))[1]


def test_each_route_needs_its_role() -> None:
    assert required_role("GET", "/subjects", "/subjects", reads_open=True) is None
    assert required_role("GET", "/subjects", "/subjects", reads_open=False) == "read"
    assert required_role("GET", "/ready", "/ready", reads_open=False) is None
    assert required_role("POST", "/subjects/s", "/subjects/{subject}", reads_open=True) is None
    assert required_role("POST", "/compatibility/subjects/s/versions", "/compatibility/subjects/{subject}/versions",
                         reads_open=False) == "read"
    assert required_role("POST", "/subjects/s/versions", "/subjects/{subject}/versions", reads_open=True) == "write"
    assert required_role("DELETE", "/subjects/s", "/subjects/{subject}", reads_open=True) == "admin"
    assert required_role("PUT", "/config", "/config", reads_open=True) == "admin"


def test_anonymous_and_wrong_credentials_cannot_write(tmp_path: Path) -> None:
    async def scenario(c: TestClient[Any, Any]) -> None:
        status, body, headers = await call(c, "POST", "/subjects/s/versions", body={"schema": SCHEMA})
        assert (status, body["error_code"]) == (401, 401)
        assert headers["WWW-Authenticate"].startswith("Basic ")
        for who in (basic("writer", "guess"), basic("nobody", "guess"), {"Authorization": "Basic !!notbase64"},
                    {"Authorization": "Bearer abc"}):
            assert (await call(c, "POST", "/subjects/s/versions", body={"schema": SCHEMA}, headers=who))[0] == 401
        for method, path in (("DELETE", "/subjects/s"), ("PUT", "/config"), ("PUT", "/config/s"),
                             ("DELETE", "/config")):
            assert (await call(c, method, path, body={"compatibility": "NONE"}))[0] == 401
        assert await subjects(c) == []
        assert (await call(c, "GET", "/config"))[1] == {"compatibilityLevel": "BACKWARD"}

    run(AccessPolicy(users_file=str(users_file(tmp_path))), scenario)


def test_each_role_is_held_to_its_grant(tmp_path: Path) -> None:
    async def scenario(c: TestClient[Any, Any]) -> None:
        status, body, _ = await call(c, "POST", "/subjects/s/versions", body={"schema": SCHEMA},
                                     headers=basic("reader"))
        assert (status, body["error_code"]) == (403, 40301)
        assert (await call(c, "POST", "/subjects/s/versions", body={"schema": SCHEMA},
                           headers=basic("writer")))[:2] == (200, {"id": 1})
        for method, path in (("DELETE", "/subjects/s"), ("DELETE", "/subjects/s/versions/1"), ("PUT", "/config/s")):
            got = await call(c, method, path, body={"compatibility": "NONE"}, headers=basic("writer"))
            assert (got[0], got[1]["error_code"]) == (403, 40301), (method, path)
        assert await subjects(c) == ["s"]
        # A writer sets the level of a subject it is creating, never lowers an existing one's.
        assert (await call(c, "PUT", "/config/new", body={"compatibility": "FULL"}, headers=basic("writer")))[0] == 200
        assert (await call(c, "PUT", "/config/new", body={"compatibility": "NONE"}, headers=basic("reader")))[0] == 403
        assert (await call(c, "PUT", "/config", body={"compatibility": "NONE"}, headers=basic("writer")))[0] == 403
        assert (await call(c, "PUT", "/config/s", body={"compatibility": "NONE"}, headers=basic("admin")))[0] == 200
        assert (await call(c, "DELETE", "/subjects/s", headers=basic("admin")))[:2] == (200, [1])
        assert await subjects(c) == []

    run(AccessPolicy(users_file=str(users_file(tmp_path))), scenario)


def test_reads_are_open_or_closed_by_configuration(tmp_path: Path) -> None:
    path = str(users_file(tmp_path))

    async def open_reads(c: TestClient[Any, Any]) -> None:
        assert (await call(c, "GET", "/subjects"))[0] == 200
        assert (await call(c, "POST", "/subjects/s", body={"schema": SCHEMA}))[0] == 404  # lookup: a read

    async def closed_reads(c: TestClient[Any, Any]) -> None:
        for method, p, body in (("GET", "/subjects", None), ("GET", "/schemas/ids/1", None),
                                ("POST", "/subjects/s", {"schema": SCHEMA}), ("GET", "/config", None)):
            assert (await call(c, method, p, body=body))[0] == 401, p
        assert (await call(c, "GET", "/subjects", headers=basic("reader")))[0] == 200
        assert (await call(c, "GET", "/ready"))[0] == 200  # health checks stay open
        assert (await call(c, "GET", "/"))[0] == 200

    run(AccessPolicy(users_file=path), open_reads)
    run(AccessPolicy(users_file=path, reads_open=False), closed_reads)


@pytest.mark.parametrize("policy_kind", ["authenticated", "no users (loopback)"])
def test_pages_of_other_sites_cannot_write(tmp_path: Path, policy_kind: str) -> None:
    """A web page can POST text/plain to any address without a CORS preflight; the browser may even add
    credentials it remembers. Such requests, and any write carrying a foreign Origin, are refused."""
    policy = AccessPolicy(users_file=str(users_file(tmp_path))) if policy_kind == "authenticated" else AccessPolicy()
    creds = basic("admin")

    async def scenario(c: TestClient[Any, Any]) -> None:
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""):
            status, body, _ = await call(c, "POST", "/subjects/s/versions", body=json.dumps({"schema": SCHEMA})
                                         .encode(), ctype=ctype, headers=creds)
            assert (status, body["error_code"]) == (415, 415), ctype
        for headers in ({"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}):
            status, body, _ = await call(c, "POST", "/subjects/s/versions", body={"schema": SCHEMA},
                                         headers={**creds, **headers})
            assert (status, body["error_code"]) == (403, 40302), headers
            assert "Access-Control-Allow-Origin" not in _
        status, _, headers = await call(c, "OPTIONS", "/subjects/s/versions",
                                        headers={"Origin": "https://evil.example",
                                                 "Access-Control-Request-Method": "DELETE"})
        assert status == 405 and "Access-Control-Allow-Origin" not in headers
        assert await subjects(c) == []
        assert (await call(c, "POST", "/subjects/s/versions", body={"schema": SCHEMA}, ctype="application/json",
                           headers=creds))[0] == 200

    run(policy, scenario)


def test_an_allowed_origin_may_write(tmp_path: Path) -> None:
    policy = AccessPolicy(users_file=str(users_file(tmp_path)), allowed_origins=frozenset({"https://ops.example"}))

    async def scenario(c: TestClient[Any, Any]) -> None:
        assert (await call(c, "POST", "/subjects/s/versions", body={"schema": SCHEMA},
                           headers={**basic("writer"), "Origin": "https://ops.example"}))[0] == 200

    run(policy, scenario)


def test_password_guessing_is_throttled_per_source(tmp_path: Path) -> None:
    async def scenario(c: TestClient[Any, Any]) -> None:
        assert (await call(c, "GET", "/subjects", headers=basic("reader")))[0] == 200  # verified once, remembered
        statuses = [(await call(c, "GET", "/subjects", headers=basic("admin", f"guess{i}")))[0] for i in range(12)]
        assert statuses[:10] == [401] * 10 and statuses[10:] == [429, 429]
        status, body, headers = await call(c, "GET", "/subjects", headers=basic("admin", "guess"))
        assert (status, body["error_code"]) == (429, 42901) and int(headers["Retry-After"]) >= 1
        # Credentials verified before still work from the guesser's address (no hash needed); new ones wait.
        assert (await call(c, "GET", "/subjects", headers=basic("reader")))[0] == 200
        assert (await call(c, "GET", "/subjects", headers=basic("writer")))[0] == 429

    run(AccessPolicy(users_file=str(users_file(tmp_path)), reads_open=False), scenario)


def test_a_rotated_password_works_beside_the_old_one_then_alone(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("common.basic_auth.RELOAD_CHECK_S", 0.0)  # notice the file's change at the next request
    path = users_file(tmp_path)
    old = path.read_text()
    new_line = f"reader:read:{hash_password('r-new', iterations=1000)}\n"

    async def scenario(c: TestClient[Any, Any]) -> None:
        assert (await call(c, "GET", "/subjects", headers=basic("reader")))[0] == 200
        path.write_text(old + new_line)  # step 1: both passwords
        assert (await call(c, "GET", "/subjects", headers=basic("reader")))[0] == 200
        assert (await call(c, "GET", "/subjects", headers=basic("reader", "r-new")))[0] == 200
        path.write_text("".join(line + "\n" for line in old.splitlines() if not line.startswith("reader:")) + new_line)
        assert (await call(c, "GET", "/subjects", headers=basic("reader")))[0] == 401  # step 2: the old one is gone
        assert (await call(c, "GET", "/subjects", headers=basic("reader", "r-new")))[0] == 200

    run(AccessPolicy(users_file=str(path), reads_open=False), scenario)


def test_cross_site_rules() -> None:
    class Req:
        def __init__(self, headers: dict[str, str]) -> None:
            self.headers = headers

    allowed = frozenset({"https://ops.example"})
    assert cross_site(Req({}), allowed) is None  # type: ignore[arg-type]
    assert cross_site(Req({"Origin": "https://ops.example"}), allowed) is None  # type: ignore[arg-type]
    assert cross_site(Req({"Sec-Fetch-Site": "same-origin"}), allowed) is None  # type: ignore[arg-type]
    assert cross_site(Req({"Origin": "https://evil.example"}), allowed)  # type: ignore[arg-type]
    assert cross_site(Req({"Sec-Fetch-Site": "same-site"}), allowed)  # type: ignore[arg-type]
