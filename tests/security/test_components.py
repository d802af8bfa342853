"""Real components on the secured broker, each as its own principal from its configuration: the registry stores
schemas, the gateway commits a batch, the dead-letter tool and common/kafka_read read; a component given another
component's principal is refused."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.kafka_read import read_to_end
from common.kafka_security import KafkaSecurity
from common.registry_client import RegistryClient
from schemas.catalog import load_catalog
from schemas.register import register_catalog
from tests.gateway.helpers import WRITE_KEY, batch, dumps, json_headers, page_view, zstd
from tests.security.broker import SecureKafka
from tests.support.gateway import start_gateway
from tests.support.keys import gateway_keys
from tests.support.ports import free_port
from tests.support.processes import start_service, stop, wait_serving

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def registry(secure_kafka: SecureKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("secure-registry")
    port = free_port()
    log = folder / "registry.log"
    proc = start_service("registry", {**os.environ, **secure_kafka.env("registry"), "REGISTRY_PORT": str(port),
                                      "REGISTRY_USERS_FILE": str(secure_kafka.secrets.registry_users_file())},
                         log.open("wb"))
    try:
        wait_serving(f"http://127.0.0.1:{port}/ready", proc, 240, log=log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
    assert "Traceback" not in log.read_text()


def test_registry_and_gateway_each_as_their_own_principal(secure_kafka: SecureKafka, registry: str,
                                                          tmp_path: Path) -> None:
    admin = RegistryClient(registry, 60.0, credentials=secure_kafka.secrets.admin_registry_credentials())
    register_catalog(admin, load_catalog())  # as the stack does, as the registry's administrator
    port = free_port()
    log = tmp_path / "gateway.log"
    env = {**os.environ, **secure_kafka.env("gateway"), "REGISTRY_URL": registry,
           **secure_kafka.secrets.registry_env("gateway"), **gateway_keys(WRITE_KEY),
           "HEADWATER_GATEWAY_PORT": str(port), "HEADWATER_GATEWAY_WORKERS": "1",
           "HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX": f"headwater-gateway-sec-{uuid.uuid4().hex[:6]}"}
    proc = start_gateway(env, log.open("wb"))
    marker = uuid.uuid4().hex
    try:
        wait_serving(f"http://127.0.0.1:{port}/readyz", proc, 240, log=log)
        body = zstd(dumps(batch(page_view(0, marker))))
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/batch", data=body,
                                         headers=json_headers(WRITE_KEY), method="POST")
        with urllib.request.urlopen(request, timeout=60) as resp:
            assert resp.status == 200 and json.loads(resp.read())["accepted"] == 1
    finally:
        stop(proc)
    # The load test's principal may read events (common/kafka_read with its KAFKA_* settings).
    reader = KafkaSecurity.from_env(secure_kafka.env("loadtest"))
    found = [m for m in read_to_end(secure_kafka.bootstrap, "headwater.events", security=reader, timeout_s=120)
             if marker.encode() in (m.value() or b"")]
    assert len(found) == 1


def test_a_component_with_another_principal_is_refused(secure_kafka: SecureKafka, tmp_path: Path) -> None:
    """The registry given the gateway's credentials cannot read _schemas: it never becomes ready."""
    port = free_port()
    log = tmp_path / "registry.log"
    proc = start_service("registry", {**os.environ, **secure_kafka.env("gateway"), "REGISTRY_PORT": str(port),
                                      "REGISTRY_KAFKA_TIMEOUT_S": "10"}, log.open("wb"))
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        stop(proc)
        raise
    assert proc.returncode != 0
    assert "TOPIC_AUTHORIZATION_FAILED" in log.read_text() or "not authorized" in log.read_text().lower()
