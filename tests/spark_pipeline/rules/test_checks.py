"""`rules apply` analysed by the running pipeline (spark_pipeline/rules/checks.py): the request and reply formats
and their bounds (unit), then the pipeline's service over the test stack's real Kafka and the tests' Spark session:
the same analysis and refusals as the command's own, requests it skips, and the command's fallback."""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]
from pyspark.sql.types import LongType, StringType, StructField, StructType

from bench.spark.generate import register_catalog
from spark_pipeline.__main__ import main
from spark_pipeline.config import ConfigError, PipelineConfig
from spark_pipeline.rules import checks, cli, model, store
from spark_pipeline.rules.checks import Checked
from spark_pipeline.rules.model import RuleError
from spark_pipeline.rules.runtime import check_analyser
from tests.spark_pipeline.truth import new_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NOW_MS = 1_800_000_000_000
SCHEMA = StructType([StructField("event_id", StringType()), StructField("n", LongType())])


def test_a_request_is_answered_only_when_well_formed_bounded_and_recent() -> None:
    raw = checks.encode_request("abc", "big", "SELECT 1", NOW_MS - 1000)
    assert checks.decode_request(raw, NOW_MS) == ("abc", "big", "SELECT 1")
    assert checks.decode_request(checks.encode_request("abc", "big", "SELECT 1", NOW_MS - 61_000), NOW_MS) is None
    huge = checks.encode_request("abc", "big", "x" * (checks.MAX_REQUEST_BYTES + 1), NOW_MS)
    assert checks.decode_request(huge, NOW_MS) is None
    for bad in (b"not json", b"[]", b'{"id": "a"}', json.dumps({"id": "a", "name": "n", "sql": "s",
                                                                "sent_at": True}).encode(),
                json.dumps({"id": "", "name": "n", "sql": "s", "sent_at": NOW_MS}).encode(), b"\xff\xfe"):
        assert checks.decode_request(bad, NOW_MS) is None


def test_a_reply_carries_the_analysis_or_the_refusal() -> None:
    checked = Checked(SCHEMA, ("event_id",), False, "append")
    assert checks.decode_reply(checks.encode_reply("a", checked)) == checked
    refused = checks.decode_reply(checks.encode_reply("a", RuleError(model.UNKNOWN_COLUMN, 2, "no column nope")))
    assert isinstance(refused, RuleError) and refused.describe() == "line 2: unknown_column: no column nope"
    for bad in (b"[]", b'{"ok": "yes"}', b'{"ok": false, "code": 3}',
                b'{"ok": true, "schema": {"type": "struct", "fields": []}, "key_columns": [1], '
                b'"aggregation": false, "output_mode": "append"}',
                b'{"ok": true, "schema": {"type": "struct", "fields": []}, "key_columns": [], '
                b'"aggregation": false, "output_mode": "sideways"}'):
        with pytest.raises(ValueError):
            checks.decode_reply(bad)


def test_the_wait_setting_is_read_with_the_other_settings_and_bounded() -> None:
    assert PipelineConfig.from_env({}).rules_check_wait_s == checks.DEFAULT_WAIT_S
    assert PipelineConfig.from_env({"HEADWATER_RULES_CHECK_WAIT_S": "2.5"}).rules_check_wait_s == 2.5
    for bad in ("0", "-1", "601", "soon", "nan", "inf"):
        with pytest.raises(ConfigError, match="HEADWATER_RULES_CHECK_WAIT_S"):
            PipelineConfig.from_env({"HEADWATER_RULES_CHECK_WAIT_S": bad})


@pytest.fixture(scope="module")
def cfg(bootstrap: str, registry_url: str) -> PipelineConfig:
    register_catalog(registry_url)  # the event types' schemas: the views the rules read
    return PipelineConfig.from_env({"KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url,
                                    "EVENTS_TOPIC": new_topic(bootstrap, "test.rules.checks")})


@pytest.fixture
def service(spark: SparkSession, cfg: PipelineConfig) -> Iterator[checks.CheckService]:
    rules = store.RuleStore(cfg.bootstrap)
    running = checks.CheckService(cfg.bootstrap, check_analyser(spark, cfg, rules))
    running.start()
    try:
        yield running
    finally:
        running.stop()
        rules.close()


def apply_cli(tmp_path: Path, cfg: PipelineConfig, sql: str, name: str, monkeypatch: pytest.MonkeyPatch
              ) -> tuple[int, str, str]:
    monkeypatch.setenv("KAFKA_BOOTSTRAP", cfg.bootstrap)
    monkeypatch.setenv("REGISTRY_URL", cfg.registry_url)
    monkeypatch.setenv("EVENTS_TOPIC", cfg.events_topic)
    path = tmp_path / f"{name}.sql"
    path.write_text(sql)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--env-file", str(tmp_path / "none.env"), "rules", "apply", str(path), "--name", name])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_pipeline_answers_as_the_command_would(service: checks.CheckService, cfg: PipelineConfig,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    sql = "SELECT event_id, order_id, total FROM purchase WHERE total > 1000"
    remote = checks.ask(cfg.bootstrap, "big_orders", sql, wait_s=60)
    assert isinstance(remote, Checked)
    here = cli.analysed_here(cfg, "big_orders", sql, {})
    assert remote == here and remote.key_columns == ("event_id",) and remote.output_mode == "append"

    refused = checks.ask(cfg.bootstrap, "bad", "SELECT event_id,\n  nope\nFROM purchase", wait_s=60)
    assert isinstance(refused, RuleError) and refused.code == model.UNKNOWN_COLUMN and refused.line == 2

    # A request older than a minute (the command gave up on it) or malformed is skipped, not answered.
    answered = service.answered
    assert not service.handle(checks.encode_request("old", "x", sql, int(time.time() * 1000) - 61_000))
    assert not service.handle(b"{not json")
    assert service.answered == answered

    # The command itself: stored as before, analysed by the pipeline; a refusal exits 2 with its line.
    name = f"checked_{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.INFO, logger="spark_pipeline.rules"):
        code, out, err = apply_cli(tmp_path, cfg, sql, name, monkeypatch)
    try:
        assert code == 0, err
        assert f"applied rule {name} version 1 (filter/routing, append mode, keyed by event_id)" in out
        assert f"rule {name} analysed by the running pipeline" in caplog.text
        code, _, err = apply_cli(tmp_path, cfg, "SELECT event_id,\n  nope\nFROM purchase", name, monkeypatch)
        assert code == 2 and err.startswith("line 2: unknown_column: ")
    finally:
        rules = store.RuleStore(cfg.bootstrap)
        try:
            rules.delete(name)
        finally:
            rules.close()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_without_a_recent_heartbeat_the_command_analyses_itself(cfg: PipelineConfig,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "ALIVE_S", -1.0)  # every heartbeat is too old: no pipeline answers
    began = time.monotonic()
    assert checks.ask(cfg.bootstrap, "x", "SELECT 1", wait_s=60) is None
    assert time.monotonic() - began < 10


class _NoTopics:
    """A cluster without the answers' topic (no pipeline ever answered there)."""

    def exists(self, topic: str) -> bool:
        return False


def test_without_the_answers_topic_the_command_analyses_itself_at_once() -> None:
    began = time.monotonic()
    assert checks.ask("127.0.0.1:1", "x", "SELECT 1", wait_s=60, topics=_NoTopics()) is None  # type: ignore[arg-type]
    assert time.monotonic() - began < 1  # no Kafka client was made: the bootstrap is unreachable


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_the_heartbeat_is_found_behind_many_answers(cfg: PipelineConfig) -> None:
    """The command looks for a heartbeat among every record of the last ALIVE_S, found by timestamp, not among
    a fixed number of the newest (20 before): a burst of answers after the heartbeat hid it."""
    checks.ensure_topics(cfg.bootstrap)
    rules = store.RuleStore(cfg.bootstrap)
    try:
        rules.producer.produce(model.CHECKED_TOPIC, key=checks.HEARTBEAT_KEY.encode(), value=b"{}")
        for _ in range(50):
            rid = uuid.uuid4().hex
            rules.producer.produce(model.CHECKED_TOPIC, key=rid.encode(),
                                   value=checks.encode_reply(rid, RuleError(model.UNKNOWN_COLUMN, 1, "x")))
        assert rules.producer.flush(10) == 0
    finally:
        rules.close()
    consumer = Consumer(store._client(cfg.bootstrap, None, **{"group.id": "test-heartbeat"}))
    try:
        age = checks._heartbeat_age_s(consumer, int(time.time() * 1000))
    finally:
        consumer.close()
    assert age is not None and age < 5


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_topics_creates_only_what_is_missing_with_its_spec(cfg: PipelineConfig) -> None:
    name = f"test.topics.{uuid.uuid4().hex[:8]}"
    spec = store.TopicSpec(2, {"cleanup.policy": "compact"})
    topics = store.Topics(cfg.bootstrap)
    assert not topics.exists(name)
    assert topics.ensure({name: spec, model.RULES_TOPIC: store.RULE_TOPICS[model.RULES_TOPIC]}) == [name]
    assert topics.exists(name)
    again = store.Topics(cfg.bootstrap)
    assert again.exists(name) and again.ensure({name: spec}) == []
    described = again.admin.describe_configs([ConfigResource("topic", name)])
    config = next(iter(described.values())).result(timeout=10)
    assert config["cleanup.policy"].value == "compact"
    assert len(again.admin.list_topics(name, timeout=10).topics[name].partitions) == 2
    again.admin.delete_topics([name], operation_timeout=10)
