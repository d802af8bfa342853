"""The grant table: each principal's writes are exactly the ones the issue names (a check on the table; the
brokers enforcing it are tested against a secured stack in tests/security/)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType  # type: ignore[attr-defined]

from stack.kafka_acls import PRINCIPALS, Names, bindings, grants

pytestmark = pytest.mark.unit
N = Names()


def writers(topic: str) -> set[str]:
    """Principals allowed to write `topic` (exactly, or through a prefix)."""
    return {p for p, gs in grants().items() for g in gs if g.resource == "topic" and "write" in g.operations
            and (g.name == topic or (g.prefixed and topic.startswith(g.name)))}


def test_one_principal_per_component() -> None:
    assert set(PRINCIPALS) == {"gateway", "registry", "pipeline", "rules", "deadletter", "console", "loadtest",
                               "subscribe", "tail"}


def test_who_writes_what() -> None:
    assert writers(N.rules_topic) == {"rules"}
    assert writers(N.status_topic) == {"pipeline"}
    assert writers(N.rule_output_prefix + "top_pages") == {"pipeline"}
    assert writers(N.aggregates_topic) == {"pipeline"}
    assert writers(N.schemas_topic) == {"registry"}
    assert writers(N.events_topic) == {"gateway", "deadletter"}
    assert writers(N.deadletter_topic) == {"gateway"}
    assert writers("anything.else") == set()


def test_console_loadtest_subscribe_and_tail_only_read() -> None:
    for principal in ("console", "loadtest", "subscribe", "tail"):
        assert all(op in ("read", "describe") for g in grants()[principal] for op in g.operations)


def test_bindings_are_allow_rules_of_named_users() -> None:
    found = bindings(grants())
    assert {b.principal for b in found} == {f"User:{p}" for p in PRINCIPALS}
    gateway_txn = [b for b in found if b.principal == "User:gateway" and b.restype == ResourceType.TRANSACTIONAL_ID]
    assert {b.operation for b in gateway_txn} == {AclOperation.WRITE, AclOperation.DESCRIBE}
    assert all(b.resource_pattern_type == ResourcePatternType.PREFIXED for b in gateway_txn)
