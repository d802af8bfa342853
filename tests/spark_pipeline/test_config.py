"""Unit tests of the pipeline's configuration, error parsing and aggregate schema (no Spark, no network)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import fastavro
import pytest

from spark_pipeline import __main__ as command
from spark_pipeline import extract, job, packaged
from spark_pipeline.config import ConfigError, PipelineConfig, join, number, storage_root, switch
from spark_pipeline.enrich import InventoryError, inventory_rows
from spark_pipeline.load import AGGREGATE_SCHEMA
from spark_pipeline.rules import class_archive
from spark_pipeline.rules.runtime import enabled as rules_enabled
from spark_pipeline.rules.runtime import settings_from_env
from spark_pipeline.snapshot import SchemaSnapshot, WriterSchema

pytestmark = pytest.mark.unit


def test_defaults_and_stack_env_names(tmp_path: Path) -> None:
    cfg = PipelineConfig.from_env({"KAFKA_BOOTSTRAP": "h:1", "REGISTRY_URL": "http://r:2/", "EVENTS_TOPIC": "t",
                                   "HEADWATER_PIPELINE_DIR": str(tmp_path), "HEADWATER_LATENESS": "2 minutes"})
    assert (cfg.bootstrap, cfg.registry_url, cfg.events_topic) == ("h:1", "http://r:2", "t")
    assert cfg.lateness == "2 minutes"
    assert cfg.checkpoint_dir == str(tmp_path / "checkpoints")
    assert PipelineConfig.from_env({}).max_offsets_per_trigger == 200_000
    assert PipelineConfig.from_env({}).live_mode == "microbatch"
    assert PipelineConfig.from_env({"HEADWATER_LIVE_MODE": "RealTime"}).live_mode == "realtime"
    assert not PipelineConfig.from_env({}).rules_realtime
    assert PipelineConfig.from_env({"HEADWATER_RULES_REALTIME": "1"}).rules_realtime
    assert (PipelineConfig.from_env({}).realtime_batch, PipelineConfig.from_env({}).rules_realtime_batch) == \
        ("5 minutes", "10 seconds")
    assert PipelineConfig.from_env({"HEADWATER_RULES_REALTIME_BATCH": "5 seconds"}).rules_realtime_batch == "5 seconds"


@pytest.mark.parametrize(("root", "expected"), [
    ("hdfs://namenode:8020/headwater", "hdfs://namenode:8020/headwater/checkpoints"),  # pathlib: hdfs:/namenode...
    ("s3a://bucket/", "s3a://bucket/checkpoints"),
    ("file:///data/hw", "file:///data/hw/checkpoints"),
])
def test_output_roots_may_be_hadoop_uris(root: str, expected: str) -> None:
    cfg = PipelineConfig.from_env({"HEADWATER_PIPELINE_DIR": root})
    assert cfg.output_dir == root
    assert cfg.checkpoint_dir == expected


def test_local_output_roots_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert storage_root("out/") == str(tmp_path / "out")
    assert join(storage_root("out"), "events", "date=1") == str(tmp_path / "out" / "events" / "date=1")


@pytest.mark.parametrize(("name", "value"), [("HEADWATER_LATENESS", "soon"), ("HEADWATER_MAX_OFFSETS_PER_TRIGGER", "x"),
                                             ("HEADWATER_MAX_OFFSETS_PER_TRIGGER", "-3"),
                                             ("HEADWATER_NODE_INVENTORY", "/nonexistent.csv"),
                                             ("HEADWATER_LIVE_MODE", "continuous"),
                                             ("HEADWATER_RULES_REALTIME", "maybe"),
                                             ("HEADWATER_RULES", "of"), ("HEADWATER_RULES_CHECKS", "2"),
                                             ("HEADWATER_CLASS_ARCHIVE", "nope"), ("HEADWATER_CONSOLE", "y"),
                                             ("HEADWATER_REALTIME_BATCH", "2 seconds"),
                                             ("HEADWATER_RULES_REALTIME_BATCH", "4 seconds"),
                                             ("HEADWATER_RULES_REALTIME_BATCH", "often")])
def test_bad_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        PipelineConfig.from_env({name: value})


@pytest.mark.parametrize(("value", "expected"), [("", True), ("  ", True), ("1", True), ("On", True), ("YES", True),
                                                 ("true", True), ("0", False), ("off", False), (" No ", False),
                                                 ("FALSE", False)])
def test_every_on_off_setting_reads_the_same_words(value: str, expected: bool) -> None:
    assert switch({"HEADWATER_RULES_CHECKS": value}, "HEADWATER_RULES_CHECKS", True) is expected
    assert rules_enabled({"HEADWATER_RULES": value}) is expected
    assert (class_archive.archive_path("-Xmx1g", {"HEADWATER_CLASS_ARCHIVE": value, "JAVA_HOME": "/nonexistent"})
            is None) or expected


def test_mirrored_events_topics_are_read_after_the_events_topic() -> None:
    assert PipelineConfig.from_env({}).mirrored_topics == ()
    assert PipelineConfig.from_env({}).source_topics == ("headwater.events",)
    assert PipelineConfig.from_env({"MIRRORED_EVENTS_TOPICS": "  "}).source_topics == ("headwater.events",)
    cfg = PipelineConfig.from_env({"MIRRORED_EVENTS_TOPICS": " a.headwater.events , c.headwater.events_x-1"})
    assert cfg.mirrored_topics == ("a.headwater.events", "c.headwater.events_x-1")
    assert cfg.source_topics == ("headwater.events", "a.headwater.events", "c.headwater.events_x-1")
    assert extract.subscription(PipelineConfig.from_env({})) == {"subscribe": "headwater.events"}
    pattern = extract.subscription(cfg)["subscribePattern"]
    assert pattern == r"^(?:headwater\.events|a\.headwater\.events|c\.headwater\.events\_x\-1)$"
    assert "subscribe" not in extract._kafka_options(cfg)
    matches = [t for t in ["headwater.events", "a.headwater.events", "c.headwater.events_x-1", "aXheadwater.events",
                           "a.headwater.events.x", "x.headwater.events"] if re.fullmatch(pattern, t)]
    assert matches == list(cfg.source_topics)  # Python's re reads this pattern as Java's does
    own = PipelineConfig.from_env({"EVENTS_TOPIC": "b.events", "MIRRORED_EVENTS_TOPICS": "headwater.events"})
    assert own.source_topics == ("b.events", "headwater.events")


@pytest.mark.parametrize(("env", "why"), [
    ({"MIRRORED_EVENTS_TOPICS": "a.headwater.events,,b.headwater.events"}, "empty topic name"),
    ({"MIRRORED_EVENTS_TOPICS": "a.headwater.events,"}, "empty topic name"),
    ({"MIRRORED_EVENTS_TOPICS": "a headwater"}, "not a Kafka topic name"),
    ({"MIRRORED_EVENTS_TOPICS": "a/headwater"}, "not a Kafka topic name"),
    ({"MIRRORED_EVENTS_TOPICS": "a.événements"}, "not a Kafka topic name"),
    ({"MIRRORED_EVENTS_TOPICS": ".."}, "not a Kafka topic name"),
    ({"MIRRORED_EVENTS_TOPICS": "x" * 250}, "not a Kafka topic name"),
    ({"MIRRORED_EVENTS_TOPICS": "a.headwater.events,b.x,a.headwater.events"}, "listed twice"),
    ({"MIRRORED_EVENTS_TOPICS": "headwater.events"}, "is the events topic"),
    ({"EVENTS_TOPIC": "mine", "MIRRORED_EVENTS_TOPICS": "a.mine,mine"}, "is the events topic"),
])
def test_bad_mirrored_topics_are_refused_naming_the_variable(env: dict[str, str], why: str) -> None:
    with pytest.raises(ConfigError, match=f"^MIRRORED_EVENTS_TOPICS.*{why}"):
        PipelineConfig.from_env(env)
    assert PipelineConfig.from_env({"MIRRORED_EVENTS_TOPICS": "x" * 249}).mirrored_topics == ("x" * 249,)


def test_aggregate_schema_is_valid_avro_with_every_field_optional() -> None:
    parsed: dict[str, Any] = fastavro.parse_schema(AGGREGATE_SCHEMA)  # type: ignore[assignment]
    assert all(f["type"][0] == "null" for f in parsed["fields"])


def test_snapshot_fingerprint_changes_with_a_new_version() -> None:
    w1 = WriterSchema(1, "s", 1, "{}")
    one = SchemaSnapshot({1: w1}, {"s": w1})
    two = SchemaSnapshot({1: w1, 2: WriterSchema(2, "s", 2, "{}")}, {"s": w1})
    assert one.fingerprint() != two.fingerprint()
    assert one.fingerprint() == SchemaSnapshot({1: w1}, {"s": w1}).fingerprint()


def test_the_node_inventory_is_packaged_a_local_file_or_a_hadoop_uri(tmp_path: Path) -> None:
    assert PipelineConfig.from_env({}).nodes_file is None  # the packaged one
    uri = "hdfs://namenode:8020/headwater/conf/nodes.csv"
    assert PipelineConfig.from_env({"HEADWATER_NODE_INVENTORY": uri}).nodes_file == uri  # checked when Spark reads it
    local = tmp_path / "nodes.csv"
    local.write_text("node_id,region,datacenter,service\nn-1,eu,eu-1a,\n\nn-2,us,us-1b,api\n")
    cfg = PipelineConfig.from_env({"HEADWATER_NODE_INVENTORY": str(local)})
    assert cfg.nodes_file == str(local)
    assert inventory_rows(cfg.nodes_file) == [("n-1", "eu", "eu-1a", None), ("n-2", "us", "us-1b", "api")]
    assert len(inventory_rows(None)) == 200 and inventory_rows(None)[0][0] == "node-0001"


def test_an_inventory_with_another_header_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "nodes.csv"
    bad.write_text("node,region\nn-1,eu\n")
    with pytest.raises(InventoryError, match="header"):
        inventory_rows(str(bad))


def test_the_scheduler_pools_are_a_local_file_the_jvm_can_open() -> None:
    path = packaged.local_file(packaged.FAIR_SCHEDULER)
    assert path.is_file() and "<allocations>" in path.read_text()


def test_the_command_offers_the_job_s_query_groups() -> None:
    assert sorted(command.QUERY_GROUPS) == sorted(job.QUERY_GROUPS)


def test_a_number_setting_is_bounded_and_refuses_nan_and_infinity() -> None:
    assert number({}, "X", 5.0, 1.0, 10.0) == 5.0
    assert number({"X": " 2.5 "}, "X", 5.0, 1.0, 10.0) == 2.5
    for bad in ("0.5", "11", "nan", "inf", "-inf", "soon"):
        with pytest.raises(ConfigError, match=r"X=.*: rows from 1 to 10"):
            number({"X": bad}, "X", 5.0, 1.0, 10.0, what="rows")


def test_the_rule_managers_settings_are_bounded() -> None:
    cfg = PipelineConfig.from_env({})
    assert settings_from_env({"HEADWATER_RULE_MAX_BATCH_S": "150"}, cfg).max_batch_s == 150.0
    for name in ("HEADWATER_RULE_STATUS_S", "HEADWATER_RULE_BACKOFF_S", "HEADWATER_RULE_BACKOFF_MAX_S",
                 "HEADWATER_RULE_MAX_STATE_ROWS", "HEADWATER_RULE_MAX_BATCH_S"):
        for bad in ("0", "inf", "x"):
            with pytest.raises(ConfigError, match=name):
                settings_from_env({name: bad}, cfg)
