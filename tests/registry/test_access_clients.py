"""confluent-kafka's SchemaRegistryClient and the project's own registry clients, unchanged but for their credentials
(`basic.auth.user.info`) and CA (`ssl.ca.location`), against the registry serving HTTPS with a users file."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from common.basic_auth import hash_password
from common.registry_client import RegistryClient, RegistryClientError
from common.tls import ServerTls
from registry.access import AccessPolicy
from registry.api import make_app
from registry.schema_log import MemoryLog
from registry.service import Registry
from tests.certs import TestCA
from tests.support.ports import free_port

pytestmark = pytest.mark.integration
SCHEMA = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": "string"}]})


@contextmanager
def serving(policy: AccessPolicy, tls: ServerTls) -> Iterator[str]:
    """The registry app (in-memory log) on a loopback port, in its own thread and loop; yields its https URL."""
    port = free_port()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    runner_box: list[web.AppRunner] = []

    async def start() -> None:
        registry = Registry(MemoryLog())
        await registry.start()
        runner = web.AppRunner(make_app(registry, policy))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls.context()).start()
        runner_box.append(runner)
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield f"https://localhost:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner_box[0].cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(URL, CA file) of a registry over HTTPS whose users are `writer` (write) and `reader` (read)."""
    folder = tmp_path_factory.mktemp("registry-tls")
    ca = TestCA(folder)
    server = ca.issue("registry")
    users = folder / "users"
    users.write_text(f"writer:write:{hash_password('w-secret', iterations=1000)}\n"
                     f"reader:read:{hash_password('r-secret', iterations=1000)}\n")
    with serving(AccessPolicy(users_file=str(users)), ServerTls(str(server.cert), str(server.key))) as url:
        yield url, str(ca.pem)


def test_confluent_client_registers_with_credentials_and_is_refused_without(registry: tuple[str, str]) -> None:
    url, ca = registry
    writer = SchemaRegistryClient({"url": url, "basic.auth.user.info": "writer:w-secret", "ssl.ca.location": ca})
    schema_id = writer.register_schema("confluent-value", Schema(SCHEMA, "AVRO"))
    assert writer.get_schema(schema_id).schema_str == SCHEMA
    anonymous = SchemaRegistryClient({"url": url, "ssl.ca.location": ca})
    assert anonymous.get_latest_version("confluent-value").schema_id == schema_id  # reads are open here
    with pytest.raises(SchemaRegistryError) as refused:
        anonymous.register_schema("other-value", Schema(SCHEMA, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (401, 401)
    reader = SchemaRegistryClient({"url": url, "basic.auth.user.info": "reader:r-secret", "ssl.ca.location": ca})
    with pytest.raises(SchemaRegistryError) as denied:
        reader.register_schema("other-value", Schema(SCHEMA, "AVRO"))
    assert (denied.value.http_status_code, denied.value.error_code) == (403, 40301)


def test_the_project_client_sends_its_credentials_and_checks_the_certificate(registry: tuple[str, str],
                                                                             tmp_path: Path) -> None:
    url, ca = registry
    client = RegistryClient(url, credentials=("writer", "w-secret"), ca_file=ca)
    assert client.register("own-value", SCHEMA) >= 1
    with pytest.raises(RegistryClientError) as refused:
        RegistryClient(url, ca_file=ca).register("own-value-2", SCHEMA)
    assert (refused.value.status, refused.value.code) == (401, 401)
    stranger = TestCA(tmp_path, "another CA")
    with pytest.raises(RegistryClientError) as untrusted:
        RegistryClient(url, credentials=("writer", "w-secret"), ca_file=str(stranger.pem)).subjects()
    assert untrusted.value.status == 0 and "CERTIFICATE_VERIFY_FAILED" in untrusted.value.message
