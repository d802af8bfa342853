"""A follower registry on the secured broker as the `registry` principal granted only read and describe on its
mirrored topic (as region B's would be): it starts, serves the mirrored schemas, and never tries to write."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AclBindingFilter, AdminClient, NewTopic  # type: ignore[attr-defined]

from registry.state import Version, schema_key, schema_value
from stack.kafka_acls import ADMIN, Grant, apply_acls, bindings
from tests.security.broker import SecureKafka
from tests.support.ports import free_port, refused_port
from tests.support.processes import log_text, start_service, stop, wait_serving

pytestmark = pytest.mark.integration
SCHEMA = json.dumps({"type": "record", "name": "mirrored", "fields": [{"name": "a", "type": "long"}]})


def call(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_follower_starts_and_serves_with_only_read_on_its_mirrored_topic(secure_kafka: SecureKafka,
                                                                           tmp_path: Path) -> None:
    topic = f"a._schemas_{uuid.uuid4().hex[:8]}"
    admin = AdminClient(secure_kafka.config(ADMIN))
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(60)
    grant: dict[str, tuple[Grant, ...]] = {"registry": (Grant("topic", topic, ("read", "describe")),)}
    apply_acls(admin, grant)
    try:
        # What MirrorMaker 2 would have copied from region A: version 1 of a subject, with the primary's id 7.
        mirror = Producer(secure_kafka.config(ADMIN))
        mirror.produce(topic, key=schema_key("mirrored", 1), value=schema_value(Version("mirrored", 1, 7), SCHEMA))
        assert mirror.flush(30) == 0
        # The grant is what it says: this principal cannot write the topic.
        producer = Producer(secure_kafka.config("registry", **{"message.timeout.ms": 10000}))
        failures: list[KafkaError | None] = []
        producer.produce(topic, value=b"x", on_delivery=lambda err, _msg: failures.append(err))
        producer.flush(30)
        assert failures and failures[0] is not None, failures
        assert failures[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, failures

        port, log = free_port(), tmp_path / "follower.log"
        with refused_port() as down:
            proc = start_service("registry", {**os.environ, **secure_kafka.env("registry"), "SCHEMAS_TOPIC": topic,
                                              "REGISTRY_PORT": str(port),
                                              "REGISTRY_PRIMARY_URL": f"http://127.0.0.1:{down}"}, log.open("wb"))
            try:
                url = f"http://127.0.0.1:{port}"
                wait_serving(f"{url}/ready", proc, 120, log=log)
                assert call(f"{url}/schemas/ids/7") == (200, {"schema": SCHEMA})
                assert call(f"{url}/subjects/mirrored/versions/latest")[1]["id"] == 7
                status, body = call(f"{url}/subjects/mirrored/versions", "POST", {"schema": SCHEMA})
                assert (status, body["error_code"]) == (503, 50301)  # forwarded (nowhere), never written here
            finally:
                stop(proc, 15)
        text = log_text(log)
        assert "Traceback" not in text and "AUTHORIZATION" not in text.upper(), text[-3000:]
    finally:
        _delete(admin, grant)


def _delete(admin: AdminClient, grant: Mapping[str, Iterable[Grant]]) -> None:
    """Remove the test's grant again, leaving the principals' ACLs as stack/kafka_acls.py has them."""
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in bindings(grant)]
    for future in admin.delete_acls(filters, request_timeout=60).values():
        try:
            future.result(60)
        except KafkaException as exc:
            raise AssertionError(f"could not remove the test's ACLs: {exc}") from None
