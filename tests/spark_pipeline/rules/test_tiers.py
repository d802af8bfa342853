"""Where rules run (tiers.place) and what the packed queries compute: a real local Spark session, no Kafka.

Placement: each rule of a catalogue lands in the realtime tier (packed) or the microbatch tier with the reason.
Equivalence: the packed forms (one explode for filters, one generic aggregation per function signature) run as a
batch over generated events and must give exactly the records the rules' own SQL gives over the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from spark_pipeline.rules.model import Rule

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from spark_pipeline.rules.launch import SparkLauncher

pytestmark = pytest.mark.spark

NODES = "('node-0001', 'node-0002', 'node-0007')"  # nodes of the generated events (bench.spark.generate)
REALTIME = {
    "route": "SELECT event_id, created_at, event_type FROM events WHERE node_id IN " + NODES,
    "typed": "SELECT event_id, path, load_time_ms * 2 AS doubled FROM page_view WHERE path LIKE '/p/1%'",
    "texts": "SELECT event_id, upper(region) AS region, concat(node_id, '/', event_type) AS label, "
             "metric_value / 10 AS tenth FROM events WHERE metric_value >= 100.0 AND region <> 'unknown'",
    "counts": "SELECT window(event_time, '1 minute') AS w, event_type, region, count(*) AS events FROM events "
              "GROUP BY window(event_time, '1 minute'), event_type, region",
    "nodes": "SELECT window(event_time, '10 seconds') AS w, node_id, count(*) AS events FROM events "
             "GROUP BY window(event_time, '10 seconds'), node_id",
    "top_pages": "SELECT window(event_time, '1 minute') AS window, region, path, count(*) AS views, "
                 "approx_count_distinct(session_id) AS sessions FROM page_view "
                 "GROUP BY window(event_time, '1 minute'), region, path",
    "slow": "SELECT window(event_time, '1 minute') AS window, region, count(*) AS views, "
            "avg(load_time_ms) AS avg_load_ms FROM page_view GROUP BY window(event_time, '1 minute'), region "
            "HAVING avg(load_time_ms) > 1500",
    "spend": "SELECT window(event_time, '1 minute') AS w, max(total) - min(total) AS spread, "
             "avg(total) AS mean, sum(total) AS spent, region FROM purchase WHERE total > 10.0 "
             "GROUP BY region, window(event_time, '1 minute')",
}
MICROBATCH = {
    "cast": ("SELECT event_id, CAST(event_type AS INT) AS n FROM events", "CAST(string AS int) may fail"),
    "browser": ("SELECT event_id, browser FROM events", "browser/os/device (user-agent parsing), computed in Python"),
    "star": ("SELECT * FROM purchase WHERE total > 1000", "computed in Python"),
    "plugin": ("SELECT event_id FROM page_view WHERE is_bot(user_agent)", "calls the Python function is_bot"),
    "session": ("SELECT session_window(event_time, '30 minutes') AS s, session_id, count(*) AS n FROM page_view "
                "GROUP BY session_window(event_time, '30 minutes'), session_id", "session windows"),
    "join": ("SELECT v.event_id AS view_event_id, p.event_id AS purchase_event_id FROM page_view v JOIN purchase p "
             "ON v.user_id = p.user_id AND p.event_time BETWEEN v.event_time AND v.event_time + INTERVAL 1 MINUTE",
             "a join does not run"),
    "random": ("SELECT event_id FROM events WHERE rand() < 0.5", "not deterministic"),
    "clock": ("SELECT event_id, current_timestamp() AS now FROM events", "fixed for a whole real-time batch"),
    "seqsum": ("SELECT window(event_time, '1 minute') AS w, sum(seq) AS s FROM events "
               "GROUP BY window(event_time, '1 minute')", "may overflow"),
    "distinct": ("SELECT window(event_time, '1 minute') AS w, count(DISTINCT node_id) AS n FROM events "
                 "GROUP BY window(event_time, '1 minute')", "DISTINCT"),
    "sliding": ("SELECT window(event_time, '2 minutes', '1 minute') AS w, count(*) AS n FROM events "
                "GROUP BY window(event_time, '2 minutes', '1 minute')", "sliding window"),
    "divide": ("SELECT event_id, seq / seq AS one FROM events", "division by a value that may be zero"),
    # The sandbox gate runs first, over the realtime views: what it refuses never reaches a tier (nor runs).
    "regex": ("SELECT event_id FROM events WHERE event_type RLIKE node_id", "a regex pattern must be a constant"),
    "reads": ("SELECT * FROM rule_route", "reads the output of rule route"),
}


def rule(name: str, sql: str, version: int = 1) -> Rule:
    aggregation = "GROUP BY" in sql
    return Rule(name=name, sql=sql, version=version, applied_at=0, applied_by="test", output_schema_id=7,
                key_columns=(), aggregation=aggregation, output_mode="update" if aggregation else "append")


@pytest.fixture(scope="module")
def launcher(spark: SparkSession) -> Iterator[SparkLauncher]:
    """A launcher over the streaming views of the catalog's schemas (Kafka is only planned, never read)."""
    from spark_pipeline.config import PipelineConfig
    from spark_pipeline.rules.launch import SparkLauncher

    launcher = SparkLauncher(spark, PipelineConfig(bootstrap="127.0.0.1:9", rules_realtime=True), "0 seconds",
                             "latest")
    try:
        yield launcher
    finally:
        launcher.close()


@pytest.mark.parametrize("name", sorted(REALTIME))
def test_packable_rules_go_to_the_realtime_tier(launcher: SparkLauncher, name: str) -> None:
    from tests.spark_pipeline.frames import catalog_snapshot

    placement, df = launcher.place(rule(name, REALTIME[name]), catalog_snapshot()[0])
    assert (placement.tier, df is not None) == ("realtime", True), placement.reason


@pytest.mark.parametrize("name", sorted(MICROBATCH))
def test_the_others_go_to_the_microbatch_tier_with_the_reason(launcher: SparkLauncher, name: str) -> None:
    from tests.spark_pipeline.frames import catalog_snapshot

    sql, reason = MICROBATCH[name]
    placement, df = launcher.place(rule(name, sql), catalog_snapshot()[0])
    assert (placement.tier, df) == ("microbatch", None)
    assert reason in placement.reason and "\n" not in placement.reason


def test_prepare_warms_the_realtime_tier_with_rules_it_places_there(launcher: SparkLauncher) -> None:
    """The manager prepares the realtime views before any rule (SparkLauncher.prepare): its warm-up rules must take
    the realtime tier's paths (the gate, the collapse of a filter, the compile of an aggregation), and the context
    they built is the one a rule of the same snapshot is then placed in."""
    from spark_pipeline.rules.launch import WARM_RULES
    from tests.spark_pipeline.frames import catalog_snapshot

    snapshot = catalog_snapshot()[0]
    launcher.prepare(snapshot)
    prepared = launcher.context(snapshot)
    for warm in WARM_RULES:
        placement, df = launcher.place(warm, snapshot)
        assert (placement.tier, df is not None) == ("realtime", True), placement.reason
    assert launcher.context(snapshot) is prepared


def test_a_rule_kept_on_older_schema_versions_runs_in_micro_batches(launcher: SparkLauncher) -> None:
    """The packs share one set of views, of every type's newest version: a rule kept on the versions it started
    with (the manager does that when the newest would change its output columns) cannot join them."""
    from dataclasses import replace

    from spark_pipeline.snapshot import SchemaSnapshot
    from tests.spark_pipeline.frames import catalog_snapshot

    snapshot = catalog_snapshot()[0]
    subject, reader = sorted(snapshot.readers.items())[0]
    newer = replace(reader, schema_id=max(snapshot.writers) + 1, version=reader.version + 1)
    kept = SchemaSnapshot({**snapshot.writers, newer.schema_id: newer}, snapshot.readers, snapshot.bad_ids)
    assert kept.older_readers() == [subject] and snapshot.older_readers() == []
    placement, df = launcher.place(rule("kept", REALTIME["route"]), kept)
    assert (placement.tier, df) == ("microbatch", None)
    assert f"keeps the schema versions it started with ({subject})" in placement.reason


# -- the packed forms compute what the rules compute --------------------------------------------------------------


@pytest.fixture(scope="module")
def batch_views(spark: SparkSession) -> DataFrame:
    """Generated events decoded, deduplicated and enriched as the shared stream's rows (a batch), with the views
    registered over them in a session of their own; the base frame (watermarked like the stream's)."""
    from bench.spark.generate import Encoder, generate
    from spark_pipeline import aggregate, decode, enrich, shared
    from spark_pipeline.rules.views import register_views
    from tests.spark_pipeline.frames import catalog_snapshot, framed, kafka_frame

    snapshot, ids = catalog_snapshot()
    session = spark.newSession()
    events = list(generate(600, producers=2, start_ms=1_790_000_000_000, spacing_ms=450, seed=11))
    raw = kafka_frame(session, framed(Encoder(ids), events))
    rows = shared.enriched_rows(aggregate.deduplicate(decode.events(decode.decode(decode.frame(raw), snapshot,
                                                                                  strict=False))),
                                enrich.read_inventory(session, None))
    # A batch drops withWatermark: mark event_time as the stream's watermark does (what placement looks for).
    from pyspark.sql import functions as F

    from spark_pipeline.rules.aggregates import WATERMARK_KEY

    base = rows.cache().withColumn("event_time", F.col("event_time").alias("event_time",
                                                                         metadata={WATERMARK_KEY: 30_000}))
    register_views(session, base, snapshot, {}, bootstrap="127.0.0.1:9")
    return base


def _decoded(records: DataFrame, topic: str, schema: Any) -> list[tuple[Any, ...]]:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from spark_pipeline.rules.output import avro_schema_json

    mine = records.where(F.col("topic") == topic)
    values = mine.select(F.col("key").cast("string").alias("key"),
                         from_avro(F.expr("substring(value, 6)"), avro_schema_json("rule", schema)).alias("v"))
    return sorted((json.dumps(r["v"].asDict(recursive=True), sort_keys=True, default=str), r["key"])
                  for r in values.collect())


def _expected(df: DataFrame, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
    from pyspark.sql import functions as F

    key = F.to_json(F.struct(*[F.col(k) for k in keys])) if keys else F.lit(None).cast("string")
    rows = df.select(F.struct(*df.columns).alias("v"), key.alias("key")).collect()
    return sorted((json.dumps(r["v"].asDict(recursive=True), sort_keys=True, default=str), r["key"]) for r in rows)


def test_packed_rules_give_what_their_sql_gives(batch_views: DataFrame) -> None:
    from spark_pipeline.rules.aggregates import AggregatePlan
    from spark_pipeline.rules.packed import Member, packed_records
    from spark_pipeline.rules.plans import Catalyst
    from spark_pipeline.rules.tiers import place

    session = batch_views.sparkSession
    cat = Catalyst(session)
    boundary = cat.analyzed(batch_views)
    members: dict[str, list[Member]] = {}
    expected: dict[str, tuple[Rule, DataFrame]] = {}
    for name, sql in REALTIME.items():
        df = session.sql(sql)
        keys = tuple(c for c in df.columns if c in ("w", "window", "event_type", "region", "node_id", "path",
                                                    "event_id"))
        r = Rule(name=name, sql=sql, version=3, applied_at=0, applied_by="test", output_schema_id=7,
                 key_columns=keys, aggregation="GROUP BY" in sql, output_mode="append")
        placement = place(cat, r, df, boundary)
        assert placement.tier == "realtime", placement.reason
        assert placement.plan is not None
        signature = placement.plan.signature if isinstance(placement.plan, AggregatePlan) else ""
        members.setdefault(signature, []).append(Member(r, placement.plan, df.schema, 1))
        expected[name] = (r, df)
    assert len(members[""]) == 3 and len(members) >= 3  # one filter pack; counts and nodes share a signature
    for pack in members.values():
        records = packed_records(batch_views, pack).cache()
        for m in pack:
            r, df = expected[m.rule.name]
            want = _expected(df, r.key_columns)
            assert want, f"rule {r.name} selects nothing from the generated events"
            assert _decoded(records, r.topic, df.schema) == want, r.name
