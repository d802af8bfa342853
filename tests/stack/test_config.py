"""Unit tests of the stack's configuration, broker properties, topic specs and env file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from common.envfile import read_env, write_env
from stack.config import ConfigError, StackConfig
from stack.kafka import kafka_cluster_id, node_properties, render_properties
from stack.topics import DEADLETTER_TOPIC, EVENTS_TOPIC, SCHEMAS_TOPIC, topic_specs

pytestmark = pytest.mark.unit


def test_defaults_are_documented_ports(tmp_path: Path) -> None:
    cfg = StackConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path)})
    assert (cfg.kafka_port, cfg.controller_port) == (9092, 9093)
    assert cfg.bootstrap == "127.0.0.1:9092"
    assert cfg.env_file == tmp_path / "stack.env"


@pytest.mark.parametrize(("name", "value", "message"), [
    ("HEADWATER_KAFKA_PORT", "abc", "HEADWATER_KAFKA_PORT='abc' is not an integer"),
    ("HEADWATER_KAFKA_PORT", "70000", "HEADWATER_KAFKA_PORT=70000 is outside"),
    ("HEADWATER_EVENTS_PARTITIONS", "0", "HEADWATER_EVENTS_PARTITIONS=0 is outside"),
    ("HEADWATER_KAFKA_CONTROLLER_PORT", "9092", "must all differ"),
    ("HEADWATER_GATEWAY_PORT", "9092", "must all differ"),
])
def test_bad_values_name_the_variable(tmp_path: Path, name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        StackConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), name: value})


def test_server_properties_make_a_single_node_transactional_broker(tmp_path: Path) -> None:
    cfg = StackConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_KAFKA_PORT": "19092"})
    props = node_properties(cfg, 1)
    assert props["process.roles"] == "broker,controller"
    assert props["auto.create.topics.enable"] == "false"
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"
    assert props["listeners"].startswith("PLAINTEXT://127.0.0.1:19092,")
    assert "log.flush.interval.messages" not in props
    assert "auto.create.topics.enable=false\n" in render_properties(props)


def test_flush_messages_reaches_broker_and_topics(tmp_path: Path) -> None:
    cfg = StackConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_KAFKA_FLUSH_MESSAGES": "1"})
    assert node_properties(cfg, 1)["log.flush.interval.messages"] == "1"
    assert all(spec.config["flush.messages"] == "1" for spec in topic_specs(cfg))


def test_topic_specs(tmp_path: Path) -> None:
    cfg = StackConfig.from_env({"HEADWATER_STATE_DIR": str(tmp_path), "HEADWATER_EVENTS_PARTITIONS": "12"})
    specs = {s.name: s for s in topic_specs(cfg)}
    assert specs[EVENTS_TOPIC].partitions == 12
    assert specs[SCHEMAS_TOPIC].partitions == 1
    assert specs[SCHEMAS_TOPIC].config["cleanup.policy"] == "compact"
    assert specs[DEADLETTER_TOPIC].config["cleanup.policy"] == "delete"


def test_cluster_id_has_kafkas_uuid_format_and_never_looks_like_an_option() -> None:
    ids = [kafka_cluster_id() for _ in range(2000)]  # P(no id would start with '-') = (63/64)^2000 ~ 1e-14
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", i) for i in ids)


def test_env_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "x" / "stack.env"
    write_env(path, {"KAFKA_BOOTSTRAP": "127.0.0.1:1", "B": "x=y"})
    assert read_env(path) == {"KAFKA_BOOTSTRAP": "127.0.0.1:1", "B": "x=y"}
    path.write_text("# comment\n\nBROKEN\n")
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        read_env(path)
