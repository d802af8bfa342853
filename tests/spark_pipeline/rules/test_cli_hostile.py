"""`rules apply|list|show|delete` against hostile records and outputs, on the test stack's real Kafka broker and
registry (in-process `main(argv)`): forged statuses and stored text never reach the terminal raw (T1, R10); an
output the registry would reject is refused before anything is registered (R9); batch-only SQL is refused (R8);
a rule refused as over the limit stores nothing (M2)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from common.registry_client import RegistryClient, RegistryClientError
from spark_pipeline.rules import model, store
from spark_pipeline.rules.model import RULES_TOPIC, STATUS_TOPIC, Rule, RuleStatus
from tests.spark_pipeline.rules.test_cli import cli
from tests.spark_pipeline.truth import new_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
ESC = "\x1b"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, bootstrap: str, registry_url: str) -> Iterator[None]:
    monkeypatch.setenv("KAFKA_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("REGISTRY_URL", registry_url)
    monkeypatch.setenv("EVENTS_TOPIC", new_topic(bootstrap, "test.rules.hostile", partitions=1))
    yield


def put_raw(bootstrap: str, topic: str, key: str, value: bytes | None) -> None:
    """Write a record as anyone who reaches the broker can, into the rules topics as the store makes them (a
    first write must not auto-create them with the broker's defaults)."""
    store.ensure_topics(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=key.encode(), value=value)
    assert producer.flush(30) == 0


@pytest.mark.usefixtures("env")
def test_stored_text_and_forged_statuses_never_reach_the_terminal_raw(tmp_path: Path, bootstrap: str) -> None:
    name = f"forged_{uuid.uuid4().hex[:8]}"
    sql = f"SELECT event_id, '{ESC}[2J{ESC}]0;owned{chr(7)}' AS banner\nFROM events -- \u202ehidden"
    rule = Rule(name, sql, 1, 1, f"mallory{ESC}[31m", 1, ("event_id",), uid="ab12")
    put_raw(bootstrap, RULES_TOPIC, name, rule.to_json())
    forged = RuleStatus(name, 1, "failed", error=f"{ESC}[1A{ESC}[2Kall good\rreally", updated_at=5)
    put_raw(bootstrap, STATUS_TOPIC, name, forged.to_json())
    try:
        code, out, _ = cli(tmp_path, "list")
        line = next(li for li in out.splitlines() if li.startswith(name))
        assert code == 0 and ESC not in out and "\r" not in out
        assert "error: \\x1b[1A\\x1b[2Kall good\\x0dreally" in line
        code, out, _ = cli(tmp_path, "show", name)
        assert code == 0 and ESC not in out and "\u202e" not in out and chr(7) not in out
        assert "by mallory\\x1b[31m" in out and "'\\x1b[2J\\x1b]0;owned\\x07' AS banner\nFROM events" in out

        # A status that is no status of this version's model (a huge error, an unknown state) is not shown.
        put_raw(bootstrap, STATUS_TOPIC, name, b'{"name": "%s", "version": 1, "state": "owned"}' % name.encode())
        code, out, _ = cli(tmp_path, "list")
        line = next(li for li in out.splitlines() if li.startswith(name))
        assert "not reported yet" in line
    finally:
        put_raw(bootstrap, RULES_TOPIC, name, None)
        put_raw(bootstrap, STATUS_TOPIC, name, None)


@pytest.mark.spark
@pytest.mark.usefixtures("env", "spark")
def test_an_output_the_registry_would_reject_is_refused_before_registering(tmp_path: Path,
                                                                        registry_url: str) -> None:
    name = f"clash_{uuid.uuid4().hex[:8]}"
    path = tmp_path / "clash.sql"
    # Nested records are named after their column path: a.b and a_b would both be `<name>_a_b`.
    path.write_text("SELECT event_id, named_struct('b', named_struct('x', seq)) AS a,\n"
                    "       named_struct('y', seq) AS a_b\nFROM events")
    code, _, err = cli(tmp_path, "apply", str(path), "--name", name)
    assert code == 2 and err.startswith("rule: invalid_column: ") and "redefined" in err, err
    registry = RegistryClient(registry_url)
    for resource in (f"/config/{model.output_subject(name)}", f"/subjects/{model.output_subject(name)}/versions"):
        with pytest.raises(RegistryClientError) as missing:
            registry.call("GET", resource)
        assert missing.value.not_found  # nothing registered, no config entry left behind

    path.write_text("SELECT 1 AS x")
    code, _, err = cli(tmp_path, "apply", str(path), "--name", name)
    assert code == 2 and err.startswith("line 1: not_streaming: "), err


@pytest.mark.spark
@pytest.mark.usefixtures("env", "spark")
def test_a_rule_over_the_limit_stores_nothing(tmp_path: Path, bootstrap: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    rules_store = store.RuleStore(bootstrap)
    try:
        count = len(rules_store.latest_rules())
    finally:
        rules_store.close()
    monkeypatch.setattr("spark_pipeline.rules.cli.MAX_RULES", count)
    name = f"extra_{uuid.uuid4().hex[:8]}"
    path = tmp_path / "extra.sql"
    path.write_text("SELECT event_id FROM events")
    code, _, err = cli(tmp_path, "apply", str(path), "--name", name)
    assert code == 2 and "too_many_rules" in err and "nothing stored" in err
    rules_store = store.RuleStore(bootstrap)
    try:
        assert name not in rules_store.latest_rules()
    finally:
        rules_store.close()
