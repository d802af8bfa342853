"""Each SDK (Python, Go, TypeScript) against a real gateway serving HTTPS with a private CA's certificate, the CA
given as its `ca_bundle` (protocol.md §1): every event acknowledged and committed once per seq; without the CA
the certificate is refused and nothing is delivered."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import headwater
import pytest

from tests.certs import TestCA
from tests.sdk_events import EVENTS_TOPIC, arrived
from tests.support.events import page_view_properties
from tests.support.gateway import gateway_env, start_gateway
from tests.support.kafka import end_offsets
from tests.support.ports import free_port
from tests.support.processes import wait_serving
from tests.support.producers import producer_env

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
WRITE_KEY = "hw_tls_sdks_" + "k" * 24
COUNT = 500
GO = shutil.which("go") or "/usr/local/go/bin/go"
NODE_PRODUCER = REPO / "sdk-typescript" / "build" / "test" / "fixtures" / "produce.js"


class TlsGateway:
    """A real `python -m gateway` on HTTPS (certificate for `localhost` from a test CA)."""

    def __init__(self, url: str, ca: Path, env: dict[str, str]) -> None:
        self.url, self.ca, self.env = url, ca, env


@pytest.fixture(scope="module")
def tls_gateway(bootstrap: str, registry_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsGateway]:
    folder = tmp_path_factory.mktemp("tls-sdks")
    ca = TestCA(folder / "ca")
    server = ca.issue("gateway")
    port = free_port()
    env = gateway_env(bootstrap, registry_url, port, WRITE_KEY, HEADWATER_GATEWAY_WORKERS="1",
                      HEADWATER_GATEWAY_TLS_CERT=str(server.cert), HEADWATER_GATEWAY_TLS_KEY=str(server.key),
                      HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX=f"tls-sdks-{uuid.uuid4().hex[:8]}")
    url = f"https://localhost:{port}"
    context = ssl.create_default_context(cafile=str(ca.pem))
    log = folder / "gateway.log"
    with log.open("wb") as out:
        proc = start_gateway(env, out)
    try:
        wait_serving(url + "/readyz", proc, 180, log=log, context=context)
        yield TlsGateway(url, ca.pem, {"KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url})
    finally:
        proc.terminate()
        proc.wait(60)
    assert WRITE_KEY not in log.read_text()


def _page_view(i: int, run: str) -> dict[str, object]:
    return page_view_properties(i, run, user_agent="headwater-tls-test", load_time_ms=12.5)


def _exactly_once(gw: TlsGateway, producer_id: str, start: dict[int, int]) -> None:
    by_seq = arrived(gw.env, producer_id, COUNT, start)
    assert sorted(by_seq) == list(range(COUNT))
    assert all(len(ids) == 1 for ids in by_seq.values())


def test_python_sdk_over_tls(tls_gateway: TlsGateway) -> None:
    start = end_offsets(tls_gateway.env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    run = f"run-{uuid.uuid4()}"
    client = headwater.Client(tls_gateway.url, WRITE_KEY, ca_bundle=str(tls_gateway.ca), linger_s=0.01)
    for i in range(COUNT):
        client.track("page_view", _page_view(i, run))
    assert client.close(60) is True
    _exactly_once(tls_gateway, str(client.producer_id), start)


def test_python_sdk_refuses_the_certificate_without_the_ca(tls_gateway: TlsGateway) -> None:
    errors: list[Exception] = []
    client = headwater.Client(tls_gateway.url, WRITE_KEY, linger_s=0.001, retry_base_s=0.005, retry_max_s=0.02,
                              retry_deadline_s=0.5, on_error=errors.append)
    client.track("page_view", _page_view(0, "no-ca"))
    assert client.close(10) is False
    assert any("certificate" in str(e).lower() for e in errors), errors


def test_go_sdk_over_tls(tls_gateway: TlsGateway, tmp_path: Path) -> None:
    binary = tmp_path / "headwater-produce"
    subprocess.run([GO, "build", "-o", str(binary), "./cmd/headwater-produce"], cwd=REPO / "sdk-go", check=True,
                   timeout=600, env={**os.environ, "GOTOOLCHAIN": "local"})
    start = end_offsets(tls_gateway.env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    env = producer_env(tls_gateway.url, WRITE_KEY, tmp_path / "spool", HEADWATER_CA_BUNDLE=str(tls_gateway.ca))
    done = subprocess.run([str(binary), "-events", str(COUNT), "-goroutines", "4", "-run", f"run-{uuid.uuid4()}"],
                          env=env, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["close_error"] is None and result["acknowledged"] == COUNT, result
    _exactly_once(tls_gateway, result["producer_id"], start)


def test_typescript_sdk_over_tls(tls_gateway: TlsGateway, tmp_path: Path) -> None:
    if shutil.which("node") is None or not NODE_PRODUCER.exists():
        pytest.fail(f"{NODE_PRODUCER} is missing: run `make setup` (it builds the TypeScript SDK)")
    start = end_offsets(tls_gateway.env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    env = producer_env(tls_gateway.url, WRITE_KEY, tmp_path / "spool", HEADWATER_CA_BUNDLE=str(tls_gateway.ca))
    done = subprocess.run(["node", str(NODE_PRODUCER), tls_gateway.url, WRITE_KEY, str(tmp_path / "spool"),
                           str(COUNT), f"run-{uuid.uuid4()}", "send"], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["delivered"] and result["metrics"]["acknowledged"] == COUNT, result
    _exactly_once(tls_gateway, result["producer_id"], start)
