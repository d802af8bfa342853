"""The job's supervisor loop (`job._supervise`) with fake queries: every failure is seen, whenever it happens."""

from __future__ import annotations

from typing import cast

import pytest
from pyspark.sql.streaming.query import StreamingQuery

from spark_pipeline.config import PipelineConfig
from spark_pipeline.decode import UNKNOWN_ID_MARKER
from spark_pipeline.job import _supervise
from spark_pipeline.registry import RegistryClient, SchemaSnapshot

pytestmark = pytest.mark.unit


class FakeQuery:
    """Active for its first `active_looks` looks at isActive, then ended, failed with `error` if given (Spark sets
    the exception before it marks the query terminated)."""

    def __init__(self, name: str, active_looks: int, error: Exception | None = None) -> None:
        self.name, self.active_looks, self.error = name, active_looks, error
        self.looks, self.stopped = 0, False

    @property
    def isActive(self) -> bool:  # StreamingQuery's name
        self.looks += 1
        return self.looks <= self.active_looks

    def exception(self) -> Exception | None:
        return self.error if self.looks > self.active_looks else None

    def stop(self) -> None:
        self.stopped = True


def supervise(*queries: FakeQuery) -> set[int] | None:
    # availableNow: the loop never polls the registry, so neither it nor the snapshot is used.
    return _supervise(cast(list[StreamingQuery], list(queries)), cast(RegistryClient, None), PipelineConfig(),
                      cast(SchemaSnapshot, None), available_now=True)


def test_a_query_failing_between_two_looks_is_not_taken_for_finished() -> None:
    done = FakeQuery("events", active_looks=0)
    failing = FakeQuery("aggregates_final", active_looks=1,
                        error=RuntimeError(f"[USER_RAISED_EXCEPTION] {UNKNOWN_ID_MARKER}7 SQLSTATE: P0001"))
    assert supervise(done, failing) == {7}
    assert done.stopped and failing.stopped


def test_queries_that_all_finish_cleanly_end_the_run() -> None:
    assert supervise(FakeQuery("events", 0), FakeQuery("deadletter", 2)) is None


def test_a_failure_that_names_no_unknown_schema_id_is_raised() -> None:
    boom = RuntimeError("disk full")
    with pytest.raises(RuntimeError, match="disk full"):
        supervise(FakeQuery("events", 1, error=boom))
