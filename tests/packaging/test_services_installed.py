"""The gateway, the registry, the console and the subscription server, each pip-installed from its own package into
a fresh virtualenv with no repository on its path: the console script answers --help, and a real start serves
requests against the test broker."""

from __future__ import annotations

import hashlib
import json
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from common.registry_client import RegistryClient
from tests.packaging.installs import Installed, install
from tests.support.events import batch, page_view
from tests.support.keys import key_entry
from tests.support.ports import free_port
from tests.support.processes import stop, wait_serving

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # includes a pip install per venv
WRITE_KEY = "hw_packaging-test-key-0123456789abcdefghijklmnop"
NOT_SHIPPED = ("stack", "bench", "tests", "loadtest", "spark_pipeline", "schemas")


@pytest.fixture(scope="module")
def gateway_venv(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install(tmp_path_factory.mktemp("gateway-pkg"), "gateway", "common")


@pytest.fixture(scope="module")
def registry_venv(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install(tmp_path_factory.mktemp("registry-pkg"), "registry", "common")


def imports_only_its_own(venv: Installed, package: str) -> None:
    code = (f"import {package}, common, importlib.util as u; print({package}.__file__); "
            f"print([n for n in {NOT_SHIPPED!r} if u.find_spec(n)])")
    where, missing = venv.run(venv.bin("python"), "-c", code).splitlines()
    assert str(venv.venv) in where and "site-packages" in where
    assert missing == "[]", f"importable from the {package} venv: {missing}"


def test_the_gateway_package_has_its_command_and_nothing_of_the_dev_tree(gateway_venv: Installed) -> None:
    assert "usage" in gateway_venv.run(gateway_venv.bin("headwater-gateway"), "--help")
    imports_only_its_own(gateway_venv, "gateway")


def test_the_installed_gateway_starts_and_commits_a_batch(gateway_venv: Installed, bootstrap: str,
                                                          registry_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = gateway_venv.env({
        "KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url, "HEADWATER_GATEWAY_PORT": str(port),
        "HEADWATER_GATEWAY_WORKERS": "1", "HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX": f"pkg-{uuid.uuid4()}",
        "HEADWATER_GATEWAY_WRITE_KEYS": key_entry(WRITE_KEY, "pkg"),
    })
    with open(tmp_path / "gateway.log", "wb") as log:
        proc = subprocess.Popen([str(gateway_venv.bin("headwater-gateway"))], cwd=gateway_venv.workdir, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_serving(f"http://127.0.0.1:{port}/readyz", proc, 90)
        body = batch(page_view(0, node_id="node-0001", context={}), sdk="packaging-test")
        import urllib.request

        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/batch", method="POST",
            data=zstandard.ZstdCompressor().compress(json.dumps(body).encode()),
            headers={"Content-Type": "application/json", "Content-Encoding": "zstd",
                     "Authorization": f"Bearer {WRITE_KEY}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 200, resp.read()
    finally:
        stop(proc, 30)
    assert proc.returncode == 0, (tmp_path / "gateway.log").read_text()[-3000:]
    assert WRITE_KEY not in (tmp_path / "gateway.log").read_text()


def test_the_registry_package_has_its_command_and_nothing_of_the_dev_tree(registry_venv: Installed) -> None:
    imports_only_its_own(registry_venv, "registry")
    failed = subprocess.run([str(registry_venv.bin("headwater-registry"))], cwd=registry_venv.workdir,
                            env=registry_venv.env({"KAFKA_BOOTSTRAP": ""}), capture_output=True, text=True,
                            timeout=60, check=False)
    assert failed.returncode == 2 and "KAFKA_BOOTSTRAP" in failed.stderr


@pytest.fixture
def schemas_topic(bootstrap: str) -> Iterator[str]:
    topic = f"_schemas_pkg_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"})
    admin.create_topics([new])[topic].result(30)
    yield topic
    admin.delete_topics([topic])[topic].result(30)


def test_the_installed_registry_starts_and_serves_a_registration(registry_venv: Installed, bootstrap: str,
                                                                 schemas_topic: str, tmp_path: Path) -> None:
    port = free_port()
    env = registry_venv.env({"KAFKA_BOOTSTRAP": bootstrap, "SCHEMAS_TOPIC": schemas_topic,
                             "REGISTRY_PORT": str(port)})
    with open(tmp_path / "registry.log", "wb") as log:
        proc = subprocess.Popen([str(registry_venv.bin("headwater-registry"))], cwd=registry_venv.workdir, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_serving(f"http://127.0.0.1:{port}/ready", proc, 90)
        client = RegistryClient(f"http://127.0.0.1:{port}", timeout_s=30)
        schema = json.dumps({"type": "record", "name": "packaged", "namespace": "test", "fields": []})
        schema_id = client.register("test.packaged", schema)
        assert client.version("test.packaged", "latest")["id"] == schema_id
        assert client.exists(schema_id) and not client.exists(schema_id + 10_000)
    finally:
        stop(proc, 30)
    assert proc.returncode == 0, (tmp_path / "registry.log").read_text()[-3000:]


@pytest.fixture(scope="module")
def console_venv(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install(tmp_path_factory.mktemp("console-pkg"), "console", "common")


def test_the_installed_console_serves_its_page(console_venv: Installed, bootstrap: str, registry_url: str,
                                               tmp_path: Path) -> None:
    imports_only_its_own(console_venv, "console")
    port = free_port()
    env = console_venv.env({"KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url,
                            "HEADWATER_CONSOLE_PORT": str(port), "HEADWATER_PIPELINE_DIR": str(tmp_path / "pipeline")})
    with open(tmp_path / "console.log", "wb") as log:
        proc = subprocess.Popen([str(console_venv.bin("headwater-console"))], cwd=console_venv.workdir, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_serving(f"http://127.0.0.1:{port}/", proc, 90)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as resp:
            assert b"<canvas" in resp.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/charts.js", timeout=10) as resp:
            assert resp.status == 200 and len(resp.read()) > 100  # the static files ship as package data
    finally:
        stop(proc, 30)


@pytest.fixture(scope="module")
def subscribe_venv(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install(tmp_path_factory.mktemp("subscribe-pkg"), "subscribe", "common")


def test_the_installed_subscription_server_serves_streams(subscribe_venv: Installed, bootstrap: str,
                                                          registry_url: str, tmp_path: Path) -> None:
    imports_only_its_own(subscribe_venv, "subscribe")
    assert "usage" in subscribe_venv.run(subscribe_venv.bin("headwater-subscribe"), "--help")
    port, key = free_port(), "hwr_packaging-test-key-0123456789abcdefghijklmn"
    env = subscribe_venv.env({"KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url,
                              "HEADWATER_SUBSCRIBE_PORT": str(port),
                              "HEADWATER_SUBSCRIBE_READ_KEYS": f"pkg:{hashlib.sha256(key.encode()).hexdigest()}:*"})
    with open(tmp_path / "subscribe.log", "wb") as log:
        proc = subprocess.Popen([str(subscribe_venv.bin("headwater-subscribe"))], cwd=subscribe_venv.workdir,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_serving(f"http://127.0.0.1:{port}/readyz", proc, 90)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/streams/event.page_view",
                                     headers={"Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            assert resp.readline().startswith(b"retry: ")
    finally:
        stop(proc, 30)
    assert key not in (tmp_path / "subscribe.log").read_text()
