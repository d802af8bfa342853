"""A rule's output streamed while the rule runs, on the real stack: a real Spark rule (the rule manager on the session's
shared Spark, no built-in query, to keep it lean) applied with `rules apply`, a per-event threshold alert over page
views; the subscriber (the Python SDK) gets each alert as the rule writes it, decoded with the rule's registered
output schema."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import headwater
import pytest

from spark_pipeline.config import PipelineConfig
from spark_pipeline.rules import cli, runtime
from spark_pipeline.rules.store import RuleStore
from tests.subscribe.harness import Keys, post_page_views, start_server
from tests.support.kafka import end_offsets
from tests.support.wait import wait_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(1200)]
WAIT_S = 300.0  # a rule's first micro-batch can take minutes on a loaded 2-core host


def test_a_rules_output_is_streamed_while_the_rule_runs(spark: SparkSession, stack_env: dict[str, str],
                                                        tmp_path: Path) -> None:
    bootstrap, marker = stack_env["KAFKA_BOOTSTRAP"], f"rule-{uuid.uuid4().hex[:8]}"
    name, topic = f"alerts_{uuid.uuid4().hex[:6]}", stack_env["EVENTS_TOPIC"]
    starts = end_offsets(bootstrap, topic)  # this test's era of the shared events topic
    cfg = PipelineConfig(bootstrap=bootstrap, registry_url=stack_env["REGISTRY_URL"],
                         events_topic=topic, output_dir=str(tmp_path / "pipeline"),
                         lateness="10 minutes", registry_poll_s=3)
    manager = runtime.start_manager(spark, cfg, {
        "HEADWATER_RULE_STARTING_OFFSETS": json.dumps({topic: {str(p): o for p, o in starts.items()}}),
        "HEADWATER_RULE_STATUS_S": "1"})
    store = RuleStore(bootstrap)
    srv = start_server(stack_env, tmp_path, Keys())
    sub = None
    try:
        sql = tmp_path / f"{name}.sql"
        sql.write_text(f"-- a threshold alert per slow page view of this test\n"
                       f"SELECT event_id, path, load_time_ms FROM page_view\n"
                       f"WHERE title = '{marker}' AND load_time_ms > 2000\n")
        assert cli.apply(cfg, sql, name) == 0  # creates headwater.rule.<name> and registers its schema
        wait_for(f"rule {name} running", lambda: (s := store.statuses().get(name)) is not None and s.state == "running",
                 WAIT_S, interval_s=0.5)
        got: list[Any] = []
        sub = headwater.subscribe(srv.url, srv.keys.rules, f"rule.{name}", start="earliest")

        def read() -> None:
            assert sub is not None
            for rec in sub:
                got.append(rec)
                if len(got) >= 20:
                    break

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        sent = post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 40, marker,
                               load_time_ms=lambda seq: 2500.0 if seq % 2 else 500.0)
        reader.join(WAIT_S)
        slow = {event_id for i, event_id in enumerate(sent) if i % 2}
        assert {r.value["event_id"] for r in got} == slow  # every alert, and only those
        first = got[0]
        assert first.stream == f"rule.{name}" and first.schema["subject"] == f"headwater.rule.{name}-value"
        assert first.value["load_time_ms"] == 2500.0 and first.error is None
    finally:
        if sub is not None:
            sub.close()
        srv.stop()
        store.delete(name)
        manager.stop()
