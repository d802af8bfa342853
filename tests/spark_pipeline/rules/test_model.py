"""Unit tests of the rule model: names, topics, JSON round trips and refusals of malformed stored values."""

from __future__ import annotations

import json

import pytest

from spark_pipeline.rules import model
from spark_pipeline.rules.model import ModelError, Rule, RuleError, RuleStatus

pytestmark = pytest.mark.unit


def rule(**changes: object) -> Rule:
    base: dict[str, object] = {"name": "top_pages", "sql": "SELECT 1", "version": 1, "applied_at": 1_700_000_000_000,
                               "applied_by": "ana@host", "output_schema_id": 7, "key_columns": ("window", "url")}
    return Rule(**{**base, **changes})  # type: ignore[arg-type]


def test_names_topics_subjects_views() -> None:
    assert model.output_topic("top_pages") == "headwater.rule.top_pages"
    assert model.output_subject("top_pages") == "headwater.rule.top_pages-value"
    assert model.output_view("top_pages") == "rule_top_pages"
    assert rule().topic == "headwater.rule.top_pages"
    for bad in ("", "Top", "1abc", "a-b", "a" * 64, "a.b", "é"):
        with pytest.raises(RuleError) as err:
            model.check_name(bad)
        assert err.value.code == model.BAD_NAME
    assert model.check_name("a" * 63) == "a" * 63


def test_rule_json_round_trip() -> None:
    r = rule(aggregation=True, output_mode="update")
    back = Rule.from_json(r.to_json())
    assert back == r
    assert isinstance(back.key_columns, tuple)
    non_emitting = rule(output_schema_id=None, key_columns=())
    assert Rule.from_json(non_emitting.to_json()) == non_emitting


def test_rule_json_refusals() -> None:
    good = json.loads(rule().to_json())
    for broken in (b"not json", b"[1]", json.dumps({**good, "version": "2"}), json.dumps({**good, "name": "Bad"}),
                   json.dumps({k: v for k, v in good.items() if k != "sql"}), json.dumps({**good, "version": True}),
                   json.dumps({**good, "key_columns": [1]}), json.dumps({**good, "version": 0}),
                   json.dumps({**good, "output_mode": "complete"})):
        with pytest.raises(ModelError):
            Rule.from_json(broken)


def test_rule_limits() -> None:
    with pytest.raises(RuleError) as err:
        rule(sql="x" * (model.MAX_SQL_BYTES + 1))
    assert err.value.code == model.TOO_LARGE
    with pytest.raises(RuleError):
        rule(key_columns=tuple(f"k{i}" for i in range(model.MAX_KEY_COLUMNS + 1)))


def test_status_round_trip_and_states() -> None:
    s = RuleStatus("top_pages", 3, "failed", error="boom", rows_per_s=12.5, last_batch_at=5, lag=10,
                   fresh_start=True, retry_at=99, updated_at=100, tier="microbatch", tier_reason="a join")
    assert RuleStatus.from_json(s.to_json()) == s
    minimal = RuleStatus.from_json(json.dumps({"name": "x", "version": 1, "state": "running"}))
    assert minimal.error is None and minimal.rows_per_s == 0.0 and not minimal.fresh_start
    assert minimal.tier is None and minimal.tier_reason is None
    with pytest.raises(ModelError):
        RuleStatus("x", 1, "running", tier="realtime", tier_reason="x" * (model.MAX_STATUS_ERROR_CHARS + 1))
    with pytest.raises(ModelError):
        RuleStatus.from_json(json.dumps({"name": "x", "version": 1, "state": "dead"}))
    with pytest.raises(ModelError):
        RuleStatus("x", 1, "exploded")  # type: ignore[arg-type]


def test_rule_error_text() -> None:
    err = RuleError(model.SYNTAX_ERROR, 3, "unexpected FROM")
    assert str(err) == "line 3: syntax_error: unexpected FROM"
    assert str(RuleError(model.TOO_MANY_RULES, None, "32 rules")) == "rule: too_many_rules: 32 rules"
    assert set(model.CODES) >= {"syntax_error", "unknown_view", "unknown_column", "unknown_function", "type_error",
                                "unbounded_aggregation", "unbounded_join", "not_a_select", "too_many_rules",
                                "incompatible_output"}


def test_rule_cycles_are_refused() -> None:
    stored = {"a": rule(name="a", sql="SELECT * FROM rule_b"), "b": rule(name="b", sql="SELECT * FROM `rule.c`"),
              "c": rule(name="c", sql="SELECT * FROM purchase")}
    assert model.referenced_rules("SELECT * FROM rule_b JOIN `rule.c` ON 1 = 1") == {"b", "c"}
    model.check_acyclic("d", "SELECT * FROM rule_a", stored)  # d -> a -> b -> c: fine
    with pytest.raises(RuleError) as err:
        model.check_acyclic("c", "SELECT * FROM rule_a", stored)
    assert err.value.code == model.RULE_CYCLE and "c -> a -> b -> c" in err.value.message
    with pytest.raises(RuleError):
        model.check_acyclic("x", "SELECT * FROM rule_x", {})


def test_applied_by_is_the_authenticated_principal_when_kafka_has_one() -> None:
    from common.kafka_security import KafkaSecurity
    from spark_pipeline.rules.cli import applied_by

    assert applied_by(KafkaSecurity(protocol="SASL_SSL", username="rules", password="x")).startswith("User:rules (")
    plain = applied_by(KafkaSecurity())
    assert not plain.startswith("User:") and "@" in plain
    assert len(applied_by(KafkaSecurity(protocol="SASL_SSL", username="u" * 1000, password="x"))) == \
        model.MAX_APPLIED_BY_CHARS
