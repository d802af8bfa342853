"""The rule sandbox on a real local Spark session over the pipeline's streaming views (nothing read from Kafka):
every hostile rule of the hostile run is refused with its stable code and line, before Spark parses it or before
anything runs; what rules legitimately write still analyses; a refused rule never reaches `spark.sql`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from spark_pipeline.rules import model
from spark_pipeline.rules.model import RuleError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_pipeline.rules.views import Views

pytestmark = pytest.mark.spark

F, R, S, C = model.FORBIDDEN_FUNCTION, model.FORBIDDEN_RELATION, model.FORBIDDEN_SYNTAX, model.TOO_COMPLEX

# (finding, sql, code, line, words in the message): each was accepted before the sandbox.
HOSTILE = [
    ("R1 command", "INSERT OVERWRITE DIRECTORY '/tmp/x' USING text\nSELECT event_id FROM events", model.NOT_A_SELECT, 1,
     "InsertIntoDir"),
    ("R2 reflect", "SELECT event_id,\n reflect('java.lang.System', 'getProperty', 'user.home') AS h FROM events", F, 2,
     "any Java method"),
    ("R2 java_method", "SELECT event_id, java_method('java.lang.System', 'getenv', 'HOME') AS h FROM events", F, 1,
     "java_method"),
    ("R2 try_reflect", "SELECT event_id, try_reflect('java.lang.System', 'getProperty', 'user.name') AS h\nFROM events",
     F, 1, "try_reflect"),
    ("R2 text file", "SELECT e.event_id, t.value FROM events e\nJOIN text.`/etc/hostname` t ON true", R, 2,
     "text./etc/hostname"),
    ("R2 binary files", "SELECT e.event_id, b.length FROM events e JOIN binaryFile.`/etc` b ON true", R, 1,
     "binaryFile"),
    ("R2 input_file_name", "SELECT event_id, input_file_name() AS f FROM events", F, 1, "file system"),
    ("R3 native library", "SELECT event_id, reflect('java.lang.System', 'load', '/tmp/x.so') AS r FROM events", F, 1,
     "reflect"),
    ("R4 exit", "SELECT event_id, reflect('java.lang.System','exit',3) AS r FROM events", F, 1, "reflect"),
    ("R5 memory", "SELECT event_id,\n  size(sequence(1L, 400000000L + seq * 0)) AS n FROM events", C, 2,
     "sequence's bounds must be a constant"),
    ("R5 constant memory", "SELECT event_id, size(sequence(1L, 400000000L)) AS n FROM events", C, 1, "400000000"),
    ("R6 sleep", "SELECT event_id, reflect('java.lang.Thread', 'sleep', 60000L) AS r FROM events", F, 1, "reflect"),
    ("R8 batch", "SELECT 1 AS x", model.NOT_STREAMING, 1, "stream"),
    ("env substitution", "SELECT event_id,\n '${env:HOME}' AS h FROM events", S, 2, "${"),
    ("system substitution", "SELECT event_id, '${system:user.name}' AS h FROM events", S, 1, "${"),
    ("current_user call", "SELECT event_id, current_user() AS u FROM events", F, 1, "host"),
    ("current_user keyword", "SELECT event_id, current_user AS u FROM events", F, 1, "CurrentUser"),
    ("version", "SELECT event_id, version() AS v FROM events", F, 1, "version"),
    ("hint", "SELECT /*+ REPARTITION(1000) */ event_id FROM events", S, 1, "hints"),
    ("script", "SELECT TRANSFORM(event_id) USING 'cat' AS (x) FROM events", S, 1, "program"),
    ("identifier clause", "SELECT event_id, IDENTIFIER('reflect')('java.lang.System', 'getenv', 'HOME') AS x "
                          "FROM events", S, 1, "IDENTIFIER"),
    ("qualified function", "SELECT event_id, system.builtin.reflect('java.lang.System', 'getenv', 'HOME') AS x "
                           "FROM events", F, 1, "plain name"),
    ("table function", "SELECT e.event_id FROM events e JOIN range(1000000000) r ON true", R, 1, "table-valued"),
    ("read_files", "SELECT * FROM read_files('/etc/passwd')", R, 1, "table-valued"),
    ("catalog table", "SELECT * FROM spark_catalog.default.t", R, 1, "spark_catalog.default.t"),
    ("parquet path", "SELECT * FROM parquet.`/tmp`", R, 1, "parquet"),
    ("json url", "SELECT * FROM json.`http://example.com/x`", R, 1, "json"),
    ("execute immediate", "EXECUTE IMMEDIATE 'SELECT 1'", model.NOT_A_SELECT, 1, "EXECUTE"),
    ("create function", "CREATE TEMPORARY FUNCTION f AS 'x.Y' USING JAR '/tmp/x.jar'", model.NOT_A_SELECT, 1,
     "command"),
    ("set conf", "SET spark.sql.ansi.enabled=false", model.NOT_A_SELECT, 1, "SetCommand"),
    ("add jar", "ADD JAR '/tmp/x.jar'", model.NOT_A_SELECT, 1, "command"),
    ("catastrophic regex", "SELECT event_id FROM events\nWHERE event_type RLIKE '(a+)+$'", C, 2, "exponential"),
    ("regex alternation", "SELECT event_id, regexp_extract(event_type, '(a|aa)*b', 0) AS x FROM events", C, 1,
     "alternation"),
    ("regex power", "SELECT event_id FROM events WHERE regexp_like(event_type, '.*.*.*x')", C, 1, "power"),
    ("regex backreference", "SELECT event_id FROM events WHERE event_type RLIKE '(a)\\\\1'", C, 1, "backreference"),
    ("regex from a column", "SELECT event_id FROM events WHERE event_type RLIKE node_id", C, 1, "constant"),
    ("split regex", "SELECT event_id, split(event_type, '(x+)+y') AS p FROM events", C, 1, "exponential"),
    ("like wildcards", "SELECT event_id FROM events WHERE event_type LIKE '%a%a%a%a%a%b'", C, 1, "wildcards"),
    ("like from a column", "SELECT event_id FROM events WHERE event_type LIKE node_id", C, 1, "constant"),
    ("repeat", "SELECT event_id, repeat(event_type, 1000) AS r FROM events", C, 1, "over 64x"),
    ("repeat count from data", "SELECT event_id, repeat(event_type, cast(seq AS int)) AS r FROM events", C, 1,
     "constant"),
    ("array_repeat", "SELECT event_id, array_repeat(event_type, 10000) AS r FROM events", C, 1, "over 64x"),
    ("lpad", "SELECT event_id, lpad(event_type, 100000000, 'x') AS p FROM events", C, 1, "100000000"),
    ("space", "SELECT event_id, space(100000000) AS s FROM events", C, 1, "100000000"),
    ("doubling", "WITH a AS (SELECT event_id, event_time, concat(event_type, event_type) AS x FROM events),\n"
                 " b AS (SELECT event_id, event_time, concat(x, x, x, x) AS x FROM a),\n"
                 " c AS (SELECT event_id, event_time, concat(x, x, x, x) AS x FROM b)\n"
                 "SELECT event_id, concat(x, x, x) AS x FROM c", C, 4, "over 64x"),
    ("quadratic lambda", "SELECT event_id, transform(split(event_type, ''), c -> event_type) AS q FROM events", C, 1,
     "square"),
    ("two generators", "SELECT event_id, a, b FROM events\nLATERAL VIEW explode(split(event_type, '')) x AS a\n"
                       "LATERAL VIEW explode(split(node_id, '')) y AS b", C, 3, "square"),
    ("format width", "SELECT event_id, format_string('%100000000s', event_type) AS f FROM events", C, 1, "width"),
    ("huge interval", "SELECT event_id FROM events WHERE event_time > now() - INTERVAL 100000 DAYS", C, 1, "interval"),
    ("huge window", "SELECT window(event_time, '1000 days') AS w, count(*) AS n FROM events\n"
                    "GROUP BY window(event_time, '1000 days')", C, 1, "window"),
    ("sliding too fine", "SELECT window(event_time, '1 day', '1 second') AS w, count(*) AS n FROM events "
                         "GROUP BY window(event_time, '1 day', '1 second')", C, 1, "windows per event"),
    ("collect_list", "SELECT window(event_time, '1 minute') AS w, collect_list(event_id) AS ids FROM events\n"
                     "GROUP BY window(event_time, '1 minute')", F, 1, "unbounded"),
    ("aggregate accumulator", "SELECT event_id, aggregate(array(1, 2), '', (acc, x) -> concat(acc, acc)) AS a "
                              "FROM events", F, 1, "double"),
    ("xpath", "SELECT event_id, xpath_string(event_type, '/a') AS x FROM events", F, 1, "XML"),
    ("approx accuracy", "SELECT window(event_time, '1 minute') AS w, percentile_approx(seq, 0.5, 1000000000) AS p\n"
                        "FROM events GROUP BY window(event_time, '1 minute')", C, 1, "accuracy"),
    ("many unions", " UNION ALL ".join(["SELECT event_id FROM events"] * 9), C, None, "view references"),
    ("deep nesting R11", "SELECT event_id, " + "(" * 40 + "1" + ")" * 40 + " AS x FROM events", C, 1, "nested"),
    ("long chain", "SELECT event_id, " + "+".join(["seq"] * 700) + " AS x FROM events", C, 1, "deep"),
]


@pytest.fixture(scope="module")
def views(spark: SparkSession) -> Views:
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


@pytest.fixture
def no_spark_sql(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any call of `spark.sql` fails the test: the gate analyses the plan it checked, it never runs SQL text."""
    def forbidden(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("spark.sql was called")

    monkeypatch.setattr(type(spark), "sql", forbidden)


@pytest.mark.parametrize("case", HOSTILE, ids=[c[0] for c in HOSTILE])
@pytest.mark.usefixtures("views", "no_spark_sql")
def test_hostile_rules_are_refused(spark: SparkSession, case: tuple[str, str, str, int | None, str]) -> None:
    from spark_pipeline.rules.analyse import analyse

    _, sql, code, line, words = case
    with pytest.raises(RuleError) as err:
        analyse(spark, sql)
    assert (err.value.code, err.value.line) == (code, line), str(err.value)
    assert words in err.value.message, str(err.value)


# What rules legitimately write (beyond the shipped examples, which test_analyse.py covers).
LEGITIMATE = [
    "SELECT event_id, CASE WHEN seq > 1 THEN 'a' ELSE 'b' END AS c, CAST(seq AS STRING) AS s, seq % 2 AS m, "
    "coalesce(user_id, 'x') AS u, properties['x'] AS px, date_trunc('hour', event_time) AS h, "
    "event_time + INTERVAL 1 HOUR AS later, upper(region) AS r, concat_ws(',', region, country) AS rc, "
    "sha2(event_id, 256) AS digest, to_json(named_struct('a', seq, 'b', region)) AS j FROM events",
    "SELECT event_id, regexp_extract(url, '^https?://([^/]+)', 1) AS host, url LIKE '%/product/%' AS product, "
    "split(path, '/') AS parts, replace(url, 'http:', 'https:') AS secure, lpad(region, 8, ' ') AS padded "
    "FROM page_view",
    "SELECT event_id, transform(split(path, '/'), p -> upper(p)) AS up, filter(split(path, '/'), p -> p <> '') AS nz "
    "FROM page_view",
    "SELECT event_id, part FROM page_view LATERAL VIEW explode(split(path, '/')) t AS part",
    "SELECT event_id, n FROM events LATERAL VIEW explode(sequence(1, 10)) t AS n",
    "SELECT window(event_time, '10 minutes', '1 minute') AS w, region, count(*) AS n, "
    "approx_count_distinct(user_id) AS users, percentile_approx(ingest_latency_ms, 0.99) AS p99, "
    "max(seq) AS top FROM events GROUP BY window(event_time, '10 minutes', '1 minute'), region",
    "WITH big AS (SELECT * FROM purchase WHERE total > 100) SELECT event_id, total, currency FROM big",
    "SELECT event_id, event_time FROM events WHERE event_type IN ('page_view', 'purchase') "
    "UNION ALL SELECT event_id, event_time FROM page_view",
    "SELECT e.event_id, n.label FROM events e JOIN (VALUES ('eu', 'Europe'), ('us', 'America')) AS n(k, label) "
    "ON e.region = n.k",
    "SELECT event_id, funnel_step(path, '/,/product,/cart') AS step, is_bot(user_agent) AS bot FROM page_view",
]


@pytest.mark.parametrize("sql", LEGITIMATE)
@pytest.mark.usefixtures("views", "no_spark_sql")
def test_legitimate_rules_analyse(spark: SparkSession, sql: str) -> None:
    from spark_pipeline.rules.analyse import analyse

    analysis = analyse(spark, sql)
    assert analysis.streaming and analysis.frame.isStreaming


@pytest.mark.parametrize("sql", [
    "SELECT event_id, " + "(" * 30_000 + "1" + ")" * 30_000 + " AS x FROM events",  # R11: 60 KB of parentheses
    "SELECT event_id, " + "+".join(["seq"] * 16_000) + " AS x FROM events",
    "SELECT event_id, " + "CASE WHEN seq > 1 THEN " * 3_000 + "1" + " END" * 3_000 + " AS x FROM events",
])
@pytest.mark.usefixtures("views")
def test_huge_or_deep_sql_is_refused_before_spark_parses_it(spark: SparkSession, sql: str) -> None:
    from spark_pipeline.rules.analyse import analyse

    started = time.monotonic()
    with pytest.raises(RuleError) as err:
        analyse(spark, sql)
    assert err.value.code in (model.TOO_COMPLEX, model.TOO_LARGE)
    assert time.monotonic() - started < 5  # the text check, not Spark's parser (138 s and an OOM before)
