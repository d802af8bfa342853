"""The analysis of rules against the pipeline's streaming views: every refusal class with its code, message and
line, and the shipped examples analyse clean (a real local Spark session; nothing is read from Kafka)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spark_pipeline.rules import model
from spark_pipeline.rules.model import RuleError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_pipeline.rules.views import Views

pytestmark = pytest.mark.spark
EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "spark_pipeline" / "rules" / "examples").glob("*.sql"))


@pytest.fixture(scope="module")
def views(spark: SparkSession) -> Views:
    """The streaming views over the catalog's schemas (the Kafka source is only planned, never started)."""
    from spark_pipeline import enrich
    from spark_pipeline.config import PipelineConfig
    from spark_pipeline.rules.functions import register_functions
    from spark_pipeline.rules.views import pipeline_events, register_views
    from tests.spark_pipeline.frames import catalog_snapshot

    snapshot, _ = catalog_snapshot()
    cfg = PipelineConfig(bootstrap="127.0.0.1:9")
    events = pipeline_events(spark, cfg, snapshot, enrich.read_inventory(spark, None), streaming=True)
    register_functions(spark)
    return register_views(spark, events, snapshot, {}, bootstrap=cfg.bootstrap)


def refused(spark: SparkSession, sql: str) -> RuleError:
    from spark_pipeline.rules.analyse import analyse

    with pytest.raises(RuleError) as err:
        analyse(spark, sql)
    return err.value


def test_views_and_their_columns(spark: SparkSession, views: Views) -> None:
    assert views.names == ["events", "page_view", "purchase", "server_metric"]
    assert {t for t, _ in views.fingerprint()} == {"page_view", "purchase", "server_metric"}
    events = spark.table("events")
    assert events.isStreaming
    assert events.schema["properties"].dataType.simpleString() == "map<string,string>"
    assert {"event_time", "region", "country", "browser", "user_id"} <= set(events.columns)
    page_view = spark.table("page_view")
    assert {"url", "path", "session_id", "user_id", "load_time_ms", "viewport"} <= set(page_view.columns)
    assert page_view.schema["properties"].dataType.simpleString().startswith("struct<url:string")
    metric = spark.table("server_metric")  # `service` is the node's; the metric's own is properties.service
    props = metric.schema["properties"].dataType.simpleString()
    assert "service" in metric.columns and props.startswith("struct<host:string,service:string")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_analyse_clean(spark: SparkSession, views: Views, example: Path) -> None:
    from spark_pipeline.rules.analyse import analyse
    from spark_pipeline.rules.output import avro_schema

    analysis = analyse(spark, example.read_text())
    assert analysis.streaming and analysis.key_columns
    avro_schema(example.stem, analysis.schema)  # every output has an Avro form


def test_kinds_keys_and_modes(spark: SparkSession, views: Views) -> None:
    from spark_pipeline.rules.analyse import analyse

    top = analyse(spark, (EXAMPLES[0].parent / "top_pages.sql").read_text())
    assert (top.aggregation, top.output_mode, top.key_columns) == (True, "update", ("window", "region", "path"))
    sessions = analyse(spark, (EXAMPLES[0].parent / "sessions.sql").read_text())
    assert sessions.output_mode == "append"  # Spark runs session windows in append mode only
    routing = analyse(spark, "SELECT * FROM purchase WHERE total > 1000;")
    assert (routing.aggregation, routing.output_mode, routing.key_columns) == (False, "append", ("event_id",))
    assert analyse(spark, "SELECT url FROM page_view").key_columns == ()


@pytest.mark.parametrize("case", [
    ("SELECT url\nFRM page_view", model.SYNTAX_ERROR, 2, "Syntax error"),
    ("SELECT *\nFROM nowhere", model.UNKNOWN_VIEW, 2, "nowhere"),
    ("SELECT url,\n  nope\nFROM page_view", model.UNKNOWN_COLUMN, 2, "nope"),
    ("SELECT\n  frobnicate(url) AS x\nFROM page_view", model.UNKNOWN_FUNCTION, 2, "frobnicate"),
    ("SELECT url FROM page_view\nWHERE viewport > 3", model.TYPE_ERROR, 2, "data type mismatch"),
    ("SELECT region, count(*) AS n\nFROM events\nGROUP BY region", model.UNBOUNDED_AGGREGATION, 3, "window"),
    ("SELECT DISTINCT region FROM events", model.UNBOUNDED_AGGREGATION, 1, "DISTINCT"),
    ("SELECT v.event_id\nFROM page_view v\nJOIN purchase p ON v.user_id = p.user_id", model.UNBOUNDED_JOIN, 3,
     "bound"),
    ("SELECT v.event_id FROM page_view v JOIN purchase p\n ON v.user_id = p.user_id AND p.event_time > v.event_time",
     model.UNBOUNDED_JOIN, 1, "both ways"),
    ("SELECT 1 AS a;\nSELECT 2 AS b", model.NOT_A_SELECT, 1, "one SELECT"),
    ("DROP VIEW events", model.NOT_A_SELECT, 1, "DropView"),
    ("INSERT INTO events SELECT * FROM events", model.NOT_A_SELECT, 1, "Insert"),
    ("CREATE TABLE t AS SELECT * FROM events", model.NOT_A_SELECT, 1, "CreateTable"),
    ("  \n-- nothing\n", model.NOT_A_SELECT, 1, "no SQL"),
    ("SELECT * FROM events ORDER BY event_time", model.UNSUPPORTED, None, "Sorting"),
    ("SELECT count(*) AS n FROM events\nGROUP BY window(event_time, '1 minute')", model.INVALID_COLUMN, 2, "window"),
])
@pytest.mark.usefixtures("views")
def test_refusals(spark: SparkSession, case: tuple[str, str, int | None, str]) -> None:
    sql, code, line, words = case
    err = refused(spark, sql)
    assert (err.code, err.line) == (code, line), str(err)
    assert words in err.message
    assert str(err).startswith(f"line {line}: {code}: " if line else f"rule: {code}: ")


def test_commands_are_never_executed(spark: SparkSession, views: Views) -> None:
    refused(spark, "DROP VIEW events")
    refused(spark, "CREATE OR REPLACE TEMP VIEW events AS SELECT 1 AS x")
    assert "event_id" in spark.table("events").columns


def test_strings_and_comments_hide_semicolons(spark: SparkSession, views: Views) -> None:
    from spark_pipeline.rules.analyse import analyse

    sql = "-- a; comment\nSELECT event_id, 'a;b' AS s /* c; */ FROM events WHERE event_type <> ';'  ;\n"
    assert analyse(spark, sql).key_columns == ("event_id",)
