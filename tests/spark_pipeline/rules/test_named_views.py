"""`rules apply` builds only the views a rule can name (views.named_in): the names found, and every shipped example and
refusal analysed over those views exactly as over all of them (a real local Spark session; nothing is read)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spark_pipeline.rules.model import RuleError
from spark_pipeline.rules.views import named_in

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "spark_pipeline" / "rules" / "examples").glob("*.sql"))
REFUSED = [
    "SELECT * FROM nowhere",
    "SELECT nope FROM page_view",
    "SELECT frobnicate(url) FROM page_view",
    "SELECT region, count(*) AS n FROM events GROUP BY region",
    "SELECT * FROM `rule.other`",
    "SELECT * FROM rule_other",
    "SELECT 1 AS x",
    "SELECT url FROM PAGE_VIEW v JOIN `Purchase` p ON v.user_id = p.user_id",
]


def test_named_in_finds_every_name_a_view_or_function_can_be_written_as() -> None:
    names = named_in("SELECT is_bot(user_agent) FROM `Page_View` v JOIN rule_a a ON TRUE JOIN `rule.b` b ON TRUE\n"
                     "-- purchase\n WHERE x = 'server_metric'")
    assert {"page_view", "is_bot", "rule_a", "rule_b", "purchase", "server_metric"} <= names
    assert "events" not in named_in("SELECT 1 AS x FROM page_view")


def _outcome(spark: SparkSession, sql: str) -> tuple[str, object]:
    from spark_pipeline.rules.analyse import analyse

    try:
        a = analyse(spark, sql)
    except RuleError as exc:
        return "refused", exc.describe()
    return "accepted", (a.schema.simpleString(), a.key_columns, a.aggregation, a.output_mode)


def _session(spark: SparkSession, sql: str | None) -> SparkSession:
    """A new session holding the views (all of them, or only those `sql` names) and the plugin functions."""
    from spark_pipeline import enrich
    from spark_pipeline.config import PipelineConfig
    from spark_pipeline.rules.functions import load_functions, register_functions
    from spark_pipeline.rules.views import pipeline_events, register_views
    from tests.spark_pipeline.frames import catalog_snapshot

    session = spark.newSession()
    snapshot, _ = catalog_snapshot()
    cfg = PipelineConfig(bootstrap="127.0.0.1:9")
    events = pipeline_events(session, cfg, snapshot, enrich.read_inventory(session, None), streaming=True)
    names = None if sql is None else named_in(sql)
    register_functions(session, [f for f in load_functions() if names is None or f.name.lower() in names])
    register_views(session, events, snapshot, {}, bootstrap=cfg.bootstrap, only=names)
    return session


@pytest.mark.spark
def test_a_rule_analyses_over_its_named_views_as_over_all_views(spark: SparkSession) -> None:
    everything = _session(spark, None)
    for sql in [*(p.read_text(encoding="utf-8") for p in EXAMPLES), *REFUSED]:
        assert _outcome(_session(spark, sql), sql) == _outcome(everything, sql), sql


@pytest.mark.spark
def test_only_the_named_type_views_are_built(spark: SparkSession) -> None:
    session = _session(spark, "SELECT url FROM page_view")
    views = {str(t.name) for t in session.catalog.listTables()}
    assert views == {"events", "page_view"}
