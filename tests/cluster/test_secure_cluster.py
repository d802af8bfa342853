"""The secured cluster topology end to end (3 brokers with SASL/SCRAM over TLS and ACLs, registries with users,
gateways behind HAProxy terminating TLS): a producer that trusts only the stack's private CA delivers through
HAProxy and every event reads back as the load test's principal; plain HTTP, an anonymous Kafka client and an
anonymous registry write are each refused."""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace

import headwater
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from common.kafka_read import read_to_end
from common.kafka_security import KafkaSecurity
from stack.config import CLUSTER, StackConfig
from stack.haproxy import HAProxy
from stack.launcher import Stack
from tests.gateway.helpers import batch, dumps, json_headers, page_view, zstd
from tests.support.ports import free_port

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]
EVENTS = 400
CLIENT = "127.0.0.3"  # the test client's own loopback address, distinct from HAProxy's


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, dict[str, str]]]:
    HAProxy.binary()
    topology = replace(CLUSTER, console=False, spark=False, subscribe=0, gateways=2)
    assert topology.secure
    cfg = StackConfig.on_free_ports(tmp_path_factory.mktemp("secure-cluster"), free_port, topology)
    stack = Stack(cfg)
    try:
        yield stack, stack.up().env
    finally:
        stack.down()


@pytest.fixture()
def secure_cluster(secured: tuple[Stack, dict[str, str]]) -> dict[str, str]:
    return secured[1]


def _server_metric(i: int, run: str) -> dict[str, object]:
    return {"host": run, "service": "secure-cluster-test", "metric": "m", "kind": "counter", "value": float(i),
            "unit": "1"}


def test_a_producer_trusting_the_private_ca_delivers_through_haproxy(secure_cluster: dict[str, str]) -> None:
    env = secure_cluster
    assert env["GATEWAY_URL"].startswith("https://")
    run = uuid.uuid4().hex
    client = headwater.Client(env["GATEWAY_URL"], env["HEADWATER_WRITE_KEY"], ca_bundle=env["HEADWATER_CA_BUNDLE"],
                              linger_s=0.01)
    for i in range(EVENTS):
        client.track("server_metric", _server_metric(i, run))
    assert client.close(120) is True
    reader = KafkaSecurity.from_env(env, "LOADTEST")
    found = [m for m in read_to_end(env["KAFKA_BOOTSTRAP"], "headwater.events", security=reader, timeout_s=120)
             if run.encode() in (m.value() or b"")]
    assert len(found) == EVENTS


def test_plain_http_and_an_unknown_ca_are_refused(secure_cluster: dict[str, str]) -> None:
    https_url = secure_cluster["GATEWAY_URL"]
    with pytest.raises(urllib.error.URLError):  # the system store does not know the stack's CA
        urllib.request.urlopen(https_url + "/readyz", timeout=10)
    plain = https_url.replace("https://", "http://")
    with pytest.raises((OSError, http.client.HTTPException)):  # the TLS listener answers no plain request
        urllib.request.urlopen(plain + "/readyz", timeout=10)


def test_an_anonymous_kafka_client_is_refused(secure_cluster: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": secure_cluster["KAFKA_BOOTSTRAP"], "socket.timeout.ms": 5000})
    with pytest.raises(KafkaException):  # PLAINTEXT against SASL_SSL listeners: no metadata, ever
        admin.list_topics(timeout=10)


def test_an_anonymous_registry_write_is_refused(secure_cluster: dict[str, str]) -> None:
    context = ssl.create_default_context(cafile=secure_cluster["HEADWATER_CA_BUNDLE"])
    body = json.dumps({"schema": json.dumps({"type": "record", "name": "X", "fields": []})}).encode()
    request = urllib.request.Request(secure_cluster["REGISTRY_URL"] + "/subjects/anonymous-x/versions", data=body,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30, context=context)
    assert refused.value.code == 401


def _post_from(url: str, ca: str, env: dict[str, str], marker: str) -> int:
    """One batch over HTTPS from CLIENT's address, with a forged X-Forwarded-For."""
    host, _, port = url.removeprefix("https://").partition(":")
    conn = http.client.HTTPSConnection(host, int(port), timeout=30, source_address=(CLIENT, 0),
                                       context=ssl.create_default_context(cafile=ca))
    try:
        headers = {**json_headers(env["HEADWATER_WRITE_KEY"]), "X-Forwarded-For": "6.6.6.6"}
        conn.request("POST", "/v1/batch", zstd(dumps(batch(page_view(0, marker)))), headers)
        return conn.getresponse().status
    finally:
        conn.close()


def _client_ip(env: dict[str, str], marker: str) -> str:
    reader = KafkaSecurity.from_env(env, "LOADTEST")
    records = [m for m in read_to_end(env["KAFKA_BOOTSTRAP"], "headwater.events", security=reader, timeout_s=120)
               if marker.encode() in (m.value() or b"")]
    assert len(records) == 1, records
    value = dict(records[0].headers() or [])["client_ip"]
    return value.decode() if isinstance(value, bytes) else str(value)


def test_forwarded_for_is_believed_from_haproxys_certificate_only(secured: tuple[Stack, dict[str, str]]) -> None:
    stack, env = secured
    ca = env["HEADWATER_CA_BUNDLE"]
    via_lb, direct = uuid.uuid4().hex, uuid.uuid4().hex
    assert _post_from(env["GATEWAY_URL"], ca, env, via_lb) == 200
    # HAProxy (its client certificate proves it) appended the client's address after the forged one.
    assert _client_ip(env, via_lb) == CLIENT
    assert _post_from(f"https://localhost:{stack.cfg.gateway_ports[0]}", ca, env, direct) == 200
    assert _client_ip(env, direct) == CLIENT  # not 6.6.6.6: a client without the proxy's certificate is no proxy
