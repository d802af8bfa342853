"""A checkpoint whose first batch was interrupted mid-write: Spark refuses it; `checkpoint` clears it, and only it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pyspark.errors import StreamingQueryException

from spark_pipeline.checkpoint import clear_interrupted_first_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

pytestmark = pytest.mark.spark


def stateful_query(spark: SparkSession, checkpoint: Path) -> StreamingQuery:
    rows = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
    deduped = rows.withWatermark("timestamp", "10 seconds").dropDuplicates(["value", "timestamp"])
    return deduped.writeStream.format("noop").option("checkpointLocation", str(checkpoint)).start()


def interrupted_first_write(checkpoint: Path) -> str:
    """What a query stopped while creating its first offset log entry leaves: an empty temp file, no entry."""
    (checkpoint / "offsets").mkdir(parents=True)
    name = f".0.{uuid.uuid4()}.tmp"
    (checkpoint / "offsets" / name).touch()
    return name


def test_spark_refuses_a_checkpoint_left_by_an_interrupted_first_batch(spark: SparkSession, tmp_path: Path) -> None:
    interrupted_first_write(tmp_path / "ck")
    query = stateful_query(spark, tmp_path / "ck")
    try:
        with pytest.raises(StreamingQueryException, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
            query.processAllAvailable()
    finally:
        query.stop()


def test_the_interrupted_first_batch_is_cleared_and_the_query_starts(spark: SparkSession, tmp_path: Path) -> None:
    name = interrupted_first_write(tmp_path / "ck")
    assert clear_interrupted_first_batch(spark, str(tmp_path / "ck")) == [f"offsets/{name}"]
    assert not (tmp_path / "ck" / "offsets" / name).exists()
    query = stateful_query(spark, tmp_path / "ck")
    try:
        query.processAllAvailable()
        assert (tmp_path / "ck" / "offsets" / "0").is_file()
    finally:
        query.stop()


def test_a_checkpoint_with_log_entries_is_left_alone(spark: SparkSession, tmp_path: Path) -> None:
    query = stateful_query(spark, tmp_path / "ck")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    temp = tmp_path / "ck" / "offsets" / f".7.{uuid.uuid4()}.tmp"  # Spark skips it when it resumes from the log
    temp.touch()
    assert clear_interrupted_first_batch(spark, str(tmp_path / "ck")) == []
    assert temp.exists()
    assert clear_interrupted_first_batch(spark, str(tmp_path / "new")) == []  # nothing there yet
