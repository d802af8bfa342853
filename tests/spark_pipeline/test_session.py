"""Per-query session settings (`session.query_conf`, `job.query_settings`) and the session's checkpoint manager."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spark_pipeline.job import FILE_QUERIES, LIVE_QUERIES, query_settings
from spark_pipeline.session import FILESYSTEM_CHECKPOINT_MANAGER, NO_DATA_BATCHES, TASK_FAILURE_LOGGERS, query_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.unit
@pytest.mark.parametrize("name", LIVE_QUERIES)
@pytest.mark.parametrize("available_now", [False, True])
def test_live_queries_run_no_batches_without_data(name: str, available_now: bool) -> None:
    assert query_settings(name, "0 seconds", available_now) == {NO_DATA_BATCHES: "false"}


@pytest.mark.unit
@pytest.mark.parametrize(("trigger", "available_now", "enabled"), [
    ("30 seconds", False, "true"),  # timeouts report a quiet producer's gap at every trigger
    ("0 seconds", False, "false"),  # a 0 s trigger with no-data batches would be a busy loop
    ("30 seconds", True, "false"),  # availableNow would never end
])
def test_loss_audit_runs_idle_batches_only_on_a_positive_trigger(trigger: str, available_now: bool,
                                                                 enabled: str) -> None:
    assert query_settings("loss_audit", trigger, available_now) == {NO_DATA_BATCHES: enabled}


@pytest.mark.unit
@pytest.mark.parametrize("name", [q for q in FILE_QUERIES if q != "loss_audit"])
def test_other_file_queries_keep_the_session_settings(name: str) -> None:
    assert query_settings(name, "30 seconds", False) == {}


@pytest.mark.spark
def test_query_conf_gives_only_the_query_started_inside_it_the_settings(spark: SparkSession, tmp_path: Path) -> None:
    key = "spark.sql.streaming.pollingDelay"  # any SQL conf: one unset in this session, one set
    spark.conf.set(NO_DATA_BATCHES, "true")
    spark.conf.unset(key)
    with query_conf(spark, {NO_DATA_BATCHES: "false", key: "7ms"}):
        query = (spark.readStream.format("rate").option("rowsPerSecond", 1).load().writeStream.format("noop")
                 .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        # The clone of the session the query runs on (StreamExecution.sparkSessionForStream).
        started_with = query._jsq.streamingQuery().sparkSessionForStream().conf()
        assert started_with.get(NO_DATA_BATCHES) == "false"
        assert started_with.get(key) == "7ms"
    finally:
        query.stop()
    assert spark.conf.get(NO_DATA_BATCHES) == "true"
    assert spark.conf.get(key) == "10ms"  # back to Spark's default: unset again


@pytest.mark.spark
def test_checkpoints_are_written_without_filecontext(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass") == FILESYSTEM_CHECKPOINT_MANAGER


@pytest.mark.spark
def test_the_loggers_that_repeat_task_failures_log_only_fatal(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for name in TASK_FAILURE_LOGGERS:  # real-time mode's ErrorNotifier among them (session.py)
        assert str(jvm.org.apache.logging.log4j.LogManager.getLogger(name).getLevel()) == "FATAL", name
