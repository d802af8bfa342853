"""The `regions` profile secure (HEADWATER_SECURE=1): events sent through region a's gateway over TLS with the Python
SDK are read in b as `a.headwater.events` by b's load-test principal (its ACLs cover the mirrored name) and decoded
with b's follower registry over HTTPS; a registration through b's registry is forwarded to a's over HTTPS;
MirrorMaker 2 runs as `mirror` with its passwords only in its 0600 properties file, translates group offsets under
its grants and cannot write a region's own events; a Kafka client without credentials, or with wrong ones, is
refused by each region.

Named to run first in tests/regions/ (files run in name order): its profile is down before the package's PLAINTEXT
profile (conftest.py) starts, so the two never share the host's two cores."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from typing import Any

import headwater
import pytest
from confluent_kafka import (
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import AdminClient

from common.avro_frame import WriterSchemas
from common.kafka_read import read_to_end, topic_end_offsets
from common.kafka_security import KafkaSecurity
from common.registry_client import RegistryClient
from stack.haproxy import HAProxy
from stack.kafka_acls import MIRROR
from stack.regions import Regions, RegionsConfig
from tests.regions.flows import translated_offsets
from tests.support.ports import free_port

# About 90 s on a quiet 2-core host; 210 s seen under another suite's load (the start alone: 53 s, then 162 s).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]
EVENTS = 40


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Regions, dict[str, str]]]:
    HAProxy.binary()
    profile = Regions(RegionsConfig.on_free_ports(tmp_path_factory.mktemp("secure-regions"), free_port, secure=True))
    try:
        t0 = time.monotonic()
        env = profile.up().env
        print(f"\nsecure regions profile up in {time.monotonic() - t0:.1f} s")
        yield profile, env
    finally:
        profile.down()


def test_events_from_a_over_tls_are_read_and_decoded_in_b(secure: tuple[Regions, dict[str, str]]) -> None:
    profile, env = secure
    a, b = profile.stack("a"), profile.stack("b")
    assert env["GATEWAY_URL_A"].startswith("https://") and env["REGISTRY_URL_B"].startswith("https://")
    ca = env["HEADWATER_CA_BUNDLE"]  # one development CA for both regions
    assert (a.cfg.tls_dir / "ca.pem").read_bytes() == (b.cfg.tls_dir / "ca.pem").read_bytes()
    reader = KafkaSecurity.from_env(b.tools_env(), "LOADTEST")  # region b's own principal, not a's
    start = topic_end_offsets(b.cfg.bootstrap, "a.headwater.events", security=reader)
    with headwater.Client(env["GATEWAY_URL_A"], env["HEADWATER_WRITE_KEY"], ca_bundle=ca, linger_s=0.01) as client:
        for i in range(EVENTS):
            client.track("server_metric", {"host": "web-1", "service": "secure-regions", "metric": "m",
                                           "kind": "counter", "value": float(i), "unit": "1"})
        assert client.flush(60), "the SDK did not deliver every event through region a"
        producer_id = client.producer_id
    schemas = WriterSchemas(RegistryClient(env["REGISTRY_URL_B"], 10.0, ca_file=ca))
    found: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + 60
    while len(found) < EVENTS and time.monotonic() < deadline:
        for msg in read_to_end(b.cfg.bootstrap, "a.headwater.events", start=start, security=reader, timeout_s=30):
            record = schemas.decode(msg.value() or b"")
            if str(record["producer_id"]) == producer_id:
                found[int(record["seq"])] = record
        time.sleep(0.5)
    assert len(found) == EVENTS, f"{len(found)} of {EVENTS} events of a read and decoded in b within 60 s"


def test_offsets_are_translated_under_the_acls(secure: tuple[Regions, dict[str, str]]) -> None:
    """MM2's checkpoints and group offset sync work with its grants: a group the load-test principal committed in
    a finds its translated offsets on `a.headwater.events` in b, read there by b's load-test principal."""
    profile, _ = secure
    a, b = profile.stack("a"), profile.stack("b")
    in_a = KafkaSecurity.from_env(a.tools_env(), "LOADTEST").librdkafka()
    in_b = KafkaSecurity.from_env(b.tools_env(), "LOADTEST").librdkafka()
    group = f"headwater-reconcile-secure-{time.time_ns()}"
    ends = topic_end_offsets(a.cfg.bootstrap, "headwater.events", security=KafkaSecurity.from_env(
        a.tools_env(), "LOADTEST"))
    assert sum(ends.values()) > 0, "nothing written in a to translate (the test above writes first)"
    got = translated_offsets(group, ends, {"bootstrap.servers": a.cfg.bootstrap, **in_a},
                             {"bootstrap.servers": b.cfg.bootstrap, **in_b})
    assert sum(got.values()) > 0


def test_a_registration_through_b_is_forwarded_to_a_over_https(secure: tuple[Regions, dict[str, str]]) -> None:
    """b's follower registry forwards a write to a's over HTTPS (REGISTRY_PRIMARY_CA verifies a's certificate) with
    the caller's credentials, which both regions' registries accept; the id a gives is served by b."""
    profile, env = secure
    a, b = profile.stack("a"), profile.stack("b")
    ca = env["HEADWATER_CA_BUNDLE"]
    pipeline_b = b.secrets.registry_credentials_file("pipeline").read_text().strip().partition(":")
    assert pipeline_b[0] == "pipeline"
    schema = json.dumps({"type": "record", "name": f"SecureRegions{time.time_ns()}",
                         "fields": [{"name": "n", "type": "long"}]})
    subject = f"secure-regions-{time.time_ns()}"
    schema_id = RegistryClient(b.cfg.registry_url, 30.0, credentials=(pipeline_b[0], pipeline_b[2]),
                               ca_file=ca).register(subject, schema)
    assert RegistryClient(a.cfg.registry_url, 10.0, ca_file=ca).exists(schema_id)
    assert RegistryClient(b.cfg.registry_url, 10.0, ca_file=ca).exists(schema_id)


def test_mirror_maker_runs_as_its_own_principal_with_its_secrets_kept(
        secure: tuple[Regions, dict[str, str]]) -> None:
    profile, _ = secure
    props = profile.mirror.s.props_file
    assert stat.S_IMODE(props.stat().st_mode) == 0o600
    text = props.read_text()
    logs = "".join(p.read_text(errors="replace") for p in profile.mirror.s.log_dir.rglob("*") if p.is_file())
    assert logs, "MirrorMaker 2 logged nothing"
    for name in ("a", "b"):
        password = profile.mirror.s.credentials[name].password()
        assert f'username="{MIRROR}" password="{password}"' in text
        assert password not in logs, f"MirrorMaker 2's password in region {name} was logged"
        assert f"{name}.security.protocol=SASL_SSL" in text


def _refused(bootstrap: str, conf: dict[str, Any]) -> list[KafkaError]:
    """The errors a client configured with `conf` meets asking for metadata (it must get none)."""
    errors: list[KafkaError] = []
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, **conf,
                                "error_cb": errors.append}
    admin = AdminClient(settings)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    admin.poll(1)  # serves the error callbacks
    return errors


def test_a_client_without_credentials_is_refused_by_each_region(secure: tuple[Regions, dict[str, str]]) -> None:
    profile, _ = secure
    for name in ("a", "b"):
        region = profile.stack(name)
        good = KafkaSecurity.from_env(region.tools_env(), "LOADTEST").librdkafka()
        assert AdminClient({"bootstrap.servers": region.cfg.bootstrap, **good}).list_topics(timeout=20).topics
        _refused(region.cfg.bootstrap, {})  # PLAINTEXT against SASL_SSL: no metadata, ever
        ca = str(region.cfg.tls_dir / "ca.pem")
        _refused(region.cfg.bootstrap, {"security.protocol": "SSL", "ssl.ca.location": ca})  # TLS, no SASL
        wrong = _refused(region.cfg.bootstrap, {**good, "sasl.password": "not-the-password"})
        assert any(e.code() == KafkaError._AUTHENTICATION for e in wrong), wrong


def test_the_mirror_principal_cannot_write_a_regions_own_topics(secure: tuple[Regions, dict[str, str]]) -> None:
    """Least privilege: MM2 writes only `<other>.*` copies (and its own topics), never the region's own events."""
    profile, _ = secure
    a = profile.stack("a").cfg
    producer = Producer({"bootstrap.servers": a.bootstrap, **profile.mirror.s.credentials["a"].librdkafka()})
    results: list[KafkaError | None] = []
    producer.produce("headwater.events", b"x", on_delivery=lambda err, _msg: results.append(err))
    producer.flush(30)
    assert results and results[0] is not None
    assert results[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, results[0]
