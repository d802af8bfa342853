"""Tests of the REST layer (routes, bodies, Confluent errors) over real HTTP on loopback, with the in-memory log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from registry.api import CONTENT_TYPE, make_app
from registry.schema_log import MemoryLog
from registry.service import Registry

pytestmark = pytest.mark.integration  # real HTTP on a loopback socket: not a unit test
Scenario = Callable[[TestClient[Any, Any]], Awaitable[None]]
V1 = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "string"}]})
V2 = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "string"},
                                                           {"name": "b", "type": "int", "default": 0}]})


def with_client(scenario: Scenario) -> None:
    async def main() -> None:
        registry = Registry(MemoryLog())
        await registry.start()
        async with TestClient(TestServer(make_app(registry))) as client:
            await scenario(client)

    asyncio.run(main())


async def call(client: TestClient[Any, Any], method: str, path: str, body: Any = None) -> tuple[int, Any]:
    resp = await client.request(method, path, json=body)
    assert resp.headers["Content-Type"].startswith(CONTENT_TYPE)
    return resp.status, await resp.json(content_type=None)


def test_register_lookup_fetch_and_list() -> None:
    async def scenario(c: TestClient[Any, Any]) -> None:
        assert await call(c, "GET", "/") == (200, {})
        assert await call(c, "POST", "/subjects/s/versions?normalize=False", {"schema": V1}) == (200, {"id": 1})
        assert await call(c, "POST", "/subjects/s/versions", {"schema": V2, "schemaType": "AVRO"}) == (200, {"id": 2})
        assert await call(c, "POST", "/subjects/t/versions", {"schema": V2}) == (200, {"id": 2})
        assert await call(c, "GET", "/subjects") == (200, ["s", "t"])
        assert await call(c, "GET", "/subjects/s/versions") == (200, [1, 2])
        status, body = await call(c, "GET", "/subjects/s/versions/latest")
        assert (status, body["version"], body["id"], body["schema"]) == (200, 2, 2, V2)
        assert await call(c, "GET", "/subjects/s/versions/1/schema") == (200, json.loads(V1))
        assert await call(c, "GET", "/schemas/ids/2?subject=s") == (200, {"schema": V2})
        assert await call(c, "GET", "/schemas/ids/2/versions") == (200, [{"subject": "s", "version": 2},
                                                                         {"subject": "t", "version": 1}])
        assert await call(c, "GET", "/schemas/ids/2/subjects") == (200, ["s", "t"])
        status, body = await call(c, "POST", "/subjects/s?normalize=False&deleted=False", {"schema": V1})
        assert (status, body["version"], body["id"]) == (200, 1, 1)
        assert await call(c, "GET", "/schemas/types") == (200, ["AVRO"])
        assert await call(c, "GET", "/mode") == (200, {"mode": "READWRITE"})

    with_client(scenario)


def test_config_compatibility_and_deletes() -> None:
    async def scenario(c: TestClient[Any, Any]) -> None:
        await call(c, "POST", "/subjects/s/versions", {"schema": V2})
        assert await call(c, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
        assert await call(c, "PUT", "/config/s", {"compatibility": "forward"}) == (200, {"compatibility": "FORWARD"})
        assert await call(c, "GET", "/config/s") == (200, {"compatibilityLevel": "FORWARD"})
        # FORWARD: the old schema (with b defaulted) reads data of V1, so dropping b is fine
        assert await call(c, "POST", "/compatibility/subjects/s/versions/latest", {"schema": V1}) == \
            (200, {"is_compatible": True})
        breaking = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]})
        status, body = await call(c, "POST", "/compatibility/subjects/s/versions?verbose=true", {"schema": breaking})
        assert status == 200 and body["is_compatible"] is False and "field a" in body["messages"][0]
        status, body = await call(c, "POST", "/subjects/s/versions", {"schema": breaking})
        assert (status, body["error_code"]) == (409, 409)
        assert await call(c, "DELETE", "/config/s") == (200, {"compatibilityLevel": "FORWARD"})
        assert await call(c, "DELETE", "/subjects/s/versions/1") == (200, 1)
        status, body = await call(c, "DELETE", "/subjects/s/versions/1")
        assert (status, body["error_code"]) == (404, 40406)
        assert await call(c, "GET", "/subjects/s/versions?deleted=true") == (200, [1])
        assert await call(c, "DELETE", "/subjects/s?permanent=true") == (200, [1])
        status, body = await call(c, "GET", "/subjects/s/versions")
        assert (status, body["error_code"]) == (404, 40401)

    with_client(scenario)


def test_unknown_routes_and_methods_get_error_bodies() -> None:
    async def scenario(c: TestClient[Any, Any]) -> None:
        status, body = await call(c, "GET", "/associations/resources/-/t?resourceType=topic")
        assert (status, body["error_code"]) == (404, 404)
        status, body = await call(c, "PATCH", "/subjects")
        assert (status, body["error_code"]) == (405, 405)
        status, body = await call(c, "GET", "/schemas/ids/7")
        assert (status, body) == (404, {"error_code": 40403, "message": "Schema 7 not found"})

    with_client(scenario)
