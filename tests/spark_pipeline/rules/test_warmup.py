"""The rules' warm-up: its job calls the case-mapping functions in a task, and a failure never escapes its thread."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_pipeline.rules import warmup


def test_warm_runs_the_case_mapping_functions(spark: SparkSession) -> None:
    took, row = warmup.warm(spark)
    assert took >= 0
    assert row == ("WARM-UP 0", "warm-up 0", "Warm-up 0")


def test_the_functions_run_in_the_task_not_folded_by_the_planner(spark: SparkSession) -> None:
    plan = spark.range(1).selectExpr(*warmup.WARM_EXPRESSIONS)._jdf.queryExecution().optimizedPlan().toString()
    for function in ("upper(", "lower(", "initcap("):
        assert function in plan, plan


class Failing:
    def range(self, start: int, end: int | None = None, step: int = 1, numPartitions: int | None = None
              ) -> Any:
        raise RuntimeError("the session is stopping")


class Recording:
    """A session that records the job's shape and fails it (nothing to compute)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int | None, int, int | None]] = []

    def range(self, start: int, end: int | None = None, step: int = 1, numPartitions: int | None = None
              ) -> Any:
        self.calls.append((start, end, step, numPartitions))
        raise RuntimeError("recorded")


def test_the_warm_up_job_has_one_task_so_it_never_refuses_a_real_time_query_its_slots() -> None:
    session = Recording()
    with pytest.raises(RuntimeError):
        warmup.warm(session)
    assert session.calls == [(0, 1, 1, 1)]


def test_a_failed_warm_up_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="spark_pipeline.rules"):
        thread = warmup.start(Failing())
        thread.join(10)
    assert not thread.is_alive()
    assert "rules warm-up (case mapping) did not run: the session is stopping" in caplog.text
