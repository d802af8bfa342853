"""`python -m spark_pipeline rules apply|list|show|delete|test` against the test session's real Kafka broker and
registry, in-process (`main(argv)`, sharing the tests' Spark session): what is stored, refused, listed, shown,
computed and deleted."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastavro
import pytest
from confluent_kafka.admin import AdminClient

from bench.spark.generate import Event, generate
from common.avro_frame import body_of, read_body, schema_id_of
from common.registry_client import RegistryClient
from spark_pipeline.__main__ import main
from spark_pipeline.rules import model, store
from spark_pipeline.rules.model import RuleStatus
from tests.spark_pipeline.truth import new_topic, produce_events

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]
EVENTS = 60


@pytest.fixture(scope="module")
def events(bootstrap: str, registry_url: str) -> tuple[str, list[Event]]:
    topic = new_topic(bootstrap, "test.rules", partitions=2)
    sent = list(generate(EVENTS, start_ms=1_790_000_000_000, seed=23))
    produce_events(bootstrap, registry_url, topic, sent)
    return topic, sent


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, bootstrap: str, registry_url: str,
        events: tuple[str, list[Event]]) -> Iterator[None]:
    monkeypatch.setenv("KAFKA_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("REGISTRY_URL", registry_url)
    monkeypatch.setenv("EVENTS_TOPIC", events[0])
    yield


def cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--env-file", str(tmp_path / "none.env"), "rules", *args])
    return code, out.getvalue(), err.getvalue()


def sql_file(tmp_path: Path, sql: str) -> str:
    path = tmp_path / f"r{uuid.uuid4().hex[:8]}.sql"
    path.write_text(sql)
    return str(path)


def stored(bootstrap: str) -> dict[str, model.Rule]:
    s = store.RuleStore(bootstrap)
    try:
        return s.latest_rules()
    finally:
        s.close()


@pytest.mark.usefixtures("env", "spark")
def test_apply_list_show_test_delete(tmp_path: Path, bootstrap: str, registry_url: str,
                                     events: tuple[str, list[Event]], monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"big_{uuid.uuid4().hex[:8]}"
    routing = sql_file(tmp_path, "SELECT * FROM purchase\nWHERE total > 1000\n")
    code, out, err = cli(tmp_path, "apply", routing, "--name", name)
    assert code == 0, err
    assert f"applied rule {name} version 1 (filter/routing, append mode, keyed by event_id)" in out
    rule = stored(bootstrap)[name]
    assert (rule.version, rule.key_columns, rule.aggregation) == (1, ("event_id",), False)
    subject = model.output_subject(name)
    latest = RegistryClient(registry_url).version(subject, "latest")
    assert int(latest["id"]) == rule.output_schema_id
    assert model.output_topic(name) in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics

    assert cli(tmp_path, "apply", routing, "--name", name)[1].startswith(f"rule {name} unchanged: version 1")

    # Refusals store nothing: a bad column (with its line), an incompatible output, the rule limit.
    code, out, err = cli(tmp_path, "apply", sql_file(tmp_path, "SELECT event_id,\n  nope\nFROM purchase"),
                         "--name", name)
    assert code == 2 and err.startswith("line 2: unknown_column: ") and "nope" in err
    code, _, err = cli(tmp_path, "apply", sql_file(tmp_path, "SELECT event_id, cast(total AS string) AS total "
                                                             "FROM purchase"), "--name", name)
    assert code == 2 and err.startswith("rule: incompatible_output: "), err
    monkeypatch.setattr("spark_pipeline.rules.cli.MAX_RULES", len(stored(bootstrap)))
    code, _, err = cli(tmp_path, "apply", routing, "--name", f"other_{uuid.uuid4().hex[:6]}")
    assert code == 2 and "too_many_rules" in err
    monkeypatch.undo()
    monkeypatch.setenv("KAFKA_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("REGISTRY_URL", registry_url)
    monkeypatch.setenv("EVENTS_TOPIC", events[0])
    assert stored(bootstrap)[name].version == 1

    # A compatible change (fewer columns, all nullable) is version 2.
    narrow = "SELECT event_id, order_id, total FROM purchase WHERE total > 1000"
    code, out, err = cli(tmp_path, "apply", sql_file(tmp_path, narrow), "--name", name)
    assert code == 0 and "version 2" in out, err

    s = store.RuleStore(bootstrap)
    s.put_status(RuleStatus(name, 2, "failed", error="boom at batch 3", rows_per_s=1.5, last_batch_at=1, lag=7,
                            retry_at=2, updated_at=3, tier="microbatch", tier_reason="calls Python function f"))
    s.close()
    code, out, _ = cli(tmp_path, "list")
    line = next(li for li in out.splitlines() if li.startswith(name))
    assert "state: failed" in line and "error: boom at batch 3" in line and "lag: 7" in line
    assert "tier: microbatch (calls Python function f)" in line
    assert "funnel_step(value, steps) -> int" in out and "to_currency(amount, currency, target) -> double" in out

    code, out, _ = cli(tmp_path, "show", name)
    assert code == 0 and narrow in out and f"subject {subject}" in out and '"name": "order_id"' in out.replace(
        '"name":"order_id"', '"name": "order_id"')
    assert cli(tmp_path, "show", "no_such_rule")[0] == 1

    assert cli(tmp_path, "delete", name)[0] == 0
    assert name not in stored(bootstrap)
    assert cli(tmp_path, "delete", name)[0] == 1


@pytest.mark.usefixtures("env")
def test_rules_test_prints_the_rows_of_a_batch_run(spark: SparkSession, tmp_path: Path,
                                                   events: tuple[str, list[Event]]) -> None:
    sql = ("SELECT event_id, order_id, total, to_currency(total, currency, 'USD') AS usd,\n"
           "       is_bot(user_agent) AS bot\nFROM purchase\nWHERE total > 1000")
    code, out, err = cli(tmp_path, "test", sql_file(tmp_path, sql), "--minutes", "30", "--rows", "1000")
    assert code == 0, err
    rows = [json.loads(li) for li in out.splitlines() if li.startswith("{")]
    expected = {str(e.record["event_id"]): e for e in events[1]
                if e.event_type == "purchase" and float(e.record["properties"]["total"]) > 1000}
    assert expected and {r["event_id"] for r in rows} == set(expected)
    for r in rows:
        props = expected[r["event_id"]].record["properties"]
        assert r["order_id"] == props["order_id"] and r["bot"] is False
        assert r["usd"] == pytest.approx(float(props["total"]) * 1.08 if props["currency"] == "EUR" else r["usd"])

    code, _, err = cli(tmp_path, "test", sql_file(tmp_path, "SELECT region, count(*) AS n FROM events GROUP BY region"))
    assert code == 2 and "unbounded_aggregation" in err


def test_encode_columns_is_confluent_framed_avro(spark: SparkSession) -> None:
    from spark_pipeline.rules.output import avro_schema, encode_columns

    df = spark.sql("SELECT named_struct('start', timestamp'2026-01-01 00:00:00', 'end', timestamp'2026-01-01 "
                   "00:01:00') AS window, 'eu' AS region, 3L AS views")
    row = encode_columns(df, 77, ("window", "region")).collect()[0]
    assert json.loads(row.key) == {"window": {"start": "2026-01-01T00:00:00.000Z", "end": "2026-01-01T00:01:00.000Z"},
                                   "region": "eu"}
    assert schema_id_of(row.value) == 77
    parsed = fastavro.parse_schema(avro_schema("r", df.schema))
    record: Any = read_body(body_of(row.value), parsed)
    assert record["region"] == "eu" and record["views"] == 3
    assert record["window"]["end"].minute == 1


@pytest.mark.usefixtures("env")
def test_rules_read_other_rules_outputs(spark: SparkSession, tmp_path: Path, bootstrap: str, registry_url: str,
                                        events: tuple[str, list[Event]]) -> None:
    """A routing rule's records (encoded as the runtime encodes them) read back through `rule_<name>` and
    `` `rule.<name>` `` by a rule built on it."""
    from spark_pipeline.config import PipelineConfig
    from spark_pipeline.rules.cli import live_views
    from spark_pipeline.rules.output import encode_columns

    name = f"large_{uuid.uuid4().hex[:8]}"
    routing = "SELECT event_id, order_id, currency, total, event_time FROM purchase WHERE total > 1000"
    assert cli(tmp_path, "apply", sql_file(tmp_path, routing), "--name", name)[0] == 0
    rule = stored(bootstrap)[name]
    assert rule.output_schema_id is not None
    cfg = PipelineConfig.from_env()
    live_views(spark, cfg, {}, streaming=False)
    records = encode_columns(spark.sql(routing), rule.output_schema_id, rule.key_columns)
    records.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", rule.topic).save()

    live_views(spark, cfg, {name: rule}, streaming=False)
    expected = {str(e.record["event_id"]): float(e.record["properties"]["total"]) for e in events[1]
                if e.event_type == "purchase" and float(e.record["properties"]["total"]) > 2000}
    for view in (f"rule_{name}", f"`rule.{name}`"):
        got = spark.sql(f"SELECT event_id, total, event_time FROM {view} WHERE total > 2000").collect()
        assert {r.event_id: r.total for r in got} == expected
        assert all(r.event_time is not None for r in got)
    assert cli(tmp_path, "delete", name)[0] == 0
