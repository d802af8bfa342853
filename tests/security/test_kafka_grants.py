"""Hostile Kafka clients against a secured broker: anonymous and badly authenticated clients refused everywhere, and
every principal refused outside its grant (every topic written and read by every principal, checked against the
grant table), on a real broker with StandardAuthorizer."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from stack.kafka_acls import PRINCIPALS, grants
from tests.security.broker import TOPICS, SecureKafka

pytestmark = pytest.mark.integration
REFUSED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)


def allowed(principal: str, operation: str, resource: str, name: str) -> bool:
    return any(g.resource == resource and operation in g.operations
               and (g.name == name or (g.prefixed and name.startswith(g.name))) for g in grants()[principal])


def group_for(principal: str) -> str:
    """A consumer group the principal may use (its own prefix), or a foreign one when it has none."""
    prefixes = [g.name for g in grants()[principal] if g.resource == "group"]
    return (prefixes[0] if prefixes else "foreign.") + uuid.uuid4().hex


def write_error(conf: dict[str, Any], topic: str) -> KafkaError | None:
    """The delivery error of one record written to `topic` (None: written)."""
    errors: list[KafkaError | None] = []
    producer = Producer({**conf, "acks": "all", "enable.idempotence": False, "message.timeout.ms": 20000})
    producer.produce(topic, b"hostile", b"k", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert errors, f"no delivery report for {topic}"
    return errors[0]


def read_error(conf: dict[str, Any], topic: str, group: str) -> KafkaError | None:
    """The error reading partition 0 of `topic` from its start (None: readable)."""
    consumer = Consumer({**conf, "group.id": group, "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        if meta.error is not None:  # not even allowed to see it (no describe): librdkafka would wait in silence
            return meta.error  # type: ignore[no-any-return]
        consumer.assign([TopicPartition(topic, 0, 0)])
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is None or err.code() == KafkaError._PARTITION_EOF:
                return None
            return err
        raise AssertionError(f"no record, end or error reading {topic}")
    finally:
        consumer.close()


@pytest.mark.parametrize("principal", PRINCIPALS)
def test_each_principal_writes_and_reads_exactly_its_grant(secure_kafka: SecureKafka, principal: str) -> None:
    conf = secure_kafka.config(principal)
    for topic in TOPICS:
        err = write_error(conf, topic)
        if allowed(principal, "write", "topic", topic):
            assert err is None, f"{principal} could not write {topic}: {err}"
        else:
            assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (principal, topic, err)
        err = read_error(conf, topic, group_for(principal))
        if allowed(principal, "read", "topic", topic):
            assert err is None, f"{principal} could not read {topic}: {err}"
        else:  # refused on the topic, or on the group first for a principal that has no group at all
            assert err is not None and err.code() in REFUSED, (principal, topic, err)


def test_the_gateway_writes_only_under_its_transactional_ids(secure_kafka: SecureKafka) -> None:
    conf = secure_kafka.config("gateway", **{"enable.idempotence": True, "acks": "all"})
    own = Producer({**conf, "transactional.id": f"headwater-gateway-test-{uuid.uuid4().hex[:6]}"})
    own.init_transactions(60)
    own.begin_transaction()
    own.produce("headwater.events", b"event", b"k")
    own.produce("headwater.deadletter", b"letter", b"k")
    own.commit_transaction(60)
    foreign = Producer({**conf, "transactional.id": "headwater-registry._schemas"})  # the registry's id
    with pytest.raises(KafkaException) as refused:
        foreign.init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


@pytest.mark.parametrize("principal", ["gateway", "pipeline", "rules", "console"])
def test_no_component_administers_the_cluster(secure_kafka: SecureKafka, principal: str) -> None:
    admin = AdminClient(secure_kafka.config(principal))
    acl = AclBinding(ResourceType.TOPIC, "_headwater_rules", ResourcePatternType.LITERAL, f"User:{principal}", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        for future in admin.create_acls([acl], request_timeout=30).values():
            future.result(30)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    topic = NewTopic(f"hostile.{uuid.uuid4().hex}", 1, 1)
    with pytest.raises(KafkaException) as denied:
        admin.create_topics([topic], operation_timeout=30)[topic.topic].result(30)
    assert denied.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException):
        admin.delete_topics(["headwater.events"], operation_timeout=30)["headwater.events"].result(30)


def _anonymous_clients(kafka: SecureKafka) -> dict[str, dict[str, Any]]:
    base = {"bootstrap.servers": kafka.bootstrap, "socket.timeout.ms": 5000}
    good = kafka.config("gateway")
    return {
        "plaintext": {**base, "security.protocol": "PLAINTEXT"},
        "tls without SASL": {**base, "security.protocol": "SSL", "ssl.ca.location": str(kafka.ca)},
        "SASL without TLS": {**base, **{k: v for k, v in good.items() if k.startswith("sasl.")},
                             "security.protocol": "SASL_PLAINTEXT"},
        "wrong password": {**good, **base, "sasl.password": "guessed"},
        "unknown user": {**good, **base, "sasl.username": "nobody", "sasl.password": "guessed"},
        "another mechanism": {**good, **base, "sasl.mechanism": "PLAIN"},
        "untrusted broker certificate": {**{k: v for k, v in good.items() if k != "ssl.ca.location"}, **base},
    }


ANONYMOUS = ["plaintext", "tls without SASL", "SASL without TLS", "wrong password", "unknown user", "another mechanism",
             "untrusted broker certificate"]


def _probe(conf: dict[str, Any]) -> list[str]:
    """What a refused client nevertheless managed: list topics, write a record, read one ([] when none)."""
    managed = []
    try:
        AdminClient(conf).list_topics(timeout=10)
        managed.append("listed the topics")
    except KafkaException:
        pass
    if write_error({**conf, "message.timeout.ms": 8000}, "headwater.events") is None:
        managed.append("wrote a record")
    consumer = Consumer({**conf, "group.id": f"anon-{uuid.uuid4().hex}", "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition("headwater.events", 0, 0)])
        got = [consumer.poll(0.5) for _ in range(10)]
        if [m for m in got if m is not None and m.error() is None]:
            managed.append("read a record")
    finally:
        consumer.close()
    return managed


@pytest.fixture(scope="module")
def refused_clients(secure_kafka: SecureKafka) -> dict[str, list[str]]:
    """Every anonymous or badly authenticated client probed at once: a refused client mostly waits for its
    timeouts (10 s listing, 8 s delivery, 5 s polling), so side by side they take one client's time."""
    clients = _anonymous_clients(secure_kafka)
    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        return dict(zip(clients, pool.map(_probe, clients.values()), strict=True))


@pytest.mark.parametrize("client", ANONYMOUS)
def test_an_anonymous_or_badly_authenticated_client_is_refused_everywhere(refused_clients: dict[str, list[str]],
                                                                          client: str) -> None:
    assert refused_clients[client] == [], f"{client}: {refused_clients[client]}"
