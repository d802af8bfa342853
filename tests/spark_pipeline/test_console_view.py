"""What `run --console` (and `make demo`) prints: figures without float noise, no user count for a type without
users."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import pytest

from spark_pipeline.load import console_view

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_console_rows_are_rounded_and_a_type_without_users_has_no_user_count(spark: SparkSession) -> None:
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    df = spark.createDataFrame(
        [("1m", start, "server_metric", "eu", 3, 0, 80474.60000000002, 26824.866666666665, 80000.1),
         ("1m", start, "page_view", "eu", 5, 4, None, None, None)],
        "granularity string, window_start timestamp, event_type string, region string, events long, "
        "distinct_users long, value_sum double, value_avg double, value_p95 double")
    rows = {r["event_type"]: r.asDict() for r in console_view(df).collect()}
    assert rows["server_metric"]["value_sum"] == 80474.6 and rows["server_metric"]["value_avg"] == 26824.87
    assert rows["server_metric"]["distinct_users"] is None
    assert rows["page_view"]["distinct_users"] == 4 and rows["page_view"]["value_sum"] is None
    assert "80474.6 " in console_view(df).filter("event_type = 'server_metric'")._jdf.showString(5, 0, False)
