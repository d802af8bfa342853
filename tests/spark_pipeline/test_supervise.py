"""The job's supervisor loop (`supervisor.supervise`) with fake queries: every failure is seen, whenever it happens,
and an unknown schema id is recognised by the error's condition and parameters, not by its text."""

from __future__ import annotations

from typing import cast

import pytest

from spark_pipeline.decode import UNKNOWN_ID_MARKER
from spark_pipeline.snapshot import SchemaSnapshot
from spark_pipeline.supervisor import SLOT_SHORTAGE, SlotRetries, SlotShortage, unknown_schema_ids
from spark_pipeline.supervisor import supervise as supervise_queries

pytestmark = pytest.mark.unit


class FakeSparkError(Exception):
    """Shaped like pyspark's CapturedException: a condition, its message parameters and the converted cause."""

    def __init__(self, condition: str | None, params: dict[str, str] | None = None,
                 cause: FakeSparkError | None = None) -> None:
        super().__init__(f"[{condition}] {params}")
        self.condition, self.params, self._cause = condition, params or {}, cause

    def getCondition(self) -> str | None:
        return self.condition

    def getMessageParameters(self) -> dict[str, str]:
        return self.params


def unknown_id_error(schema_id: int) -> FakeSparkError:
    """As Spark reports a batch failed by decode's raise_error: the streaming failure, caused by the job abort,
    caused by the USER_RAISED_EXCEPTION."""
    raised = FakeSparkError("USER_RAISED_EXCEPTION", {"errorMessage": f"{UNKNOWN_ID_MARKER}{schema_id}"})
    return FakeSparkError("STREAM_FAILED", {"id": "q"}, FakeSparkError(None, None, raised))


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
    return supervise_queries(list(queries), lambda: cast(SchemaSnapshot, None), cast(SchemaSnapshot, None),
                             30.0, available_now=True)


def test_a_query_failing_between_two_looks_is_not_taken_for_finished() -> None:
    done = FakeQuery("events", active_looks=0)
    failing = FakeQuery("aggregates_final", active_looks=1,
                        error=unknown_id_error(7))
    assert supervise(done, failing) == {7}
    assert done.stopped and failing.stopped


def test_queries_that_all_finish_cleanly_end_the_run() -> None:
    assert supervise(FakeQuery("events", 0), FakeQuery("deadletter", 2)) is None


def test_a_failure_that_names_no_unknown_schema_id_is_raised() -> None:
    boom = RuntimeError("disk full")
    with pytest.raises(RuntimeError, match="disk full"):
        supervise(FakeQuery("events", 1, error=boom))


def test_the_marker_in_message_text_alone_is_not_taken_for_an_unknown_id() -> None:
    text_only = RuntimeError(f"[USER_RAISED_EXCEPTION] {UNKNOWN_ID_MARKER}7 SQLSTATE: P0001")
    assert unknown_schema_ids(text_only) == set()
    other_condition = FakeSparkError("DIVIDE_BY_ZERO", {"errorMessage": f"{UNKNOWN_ID_MARKER}7"})
    assert unknown_schema_ids(other_condition) == set()
    with pytest.raises(RuntimeError):
        supervise(FakeQuery("events", 1, error=text_only))


def test_ids_are_read_from_every_error_of_the_cause_chain() -> None:
    outer = unknown_id_error(42)
    outer._cause = FakeSparkError("USER_RAISED_EXCEPTION", {"errorMessage": f"{UNKNOWN_ID_MARKER}7"}, outer._cause)
    assert unknown_schema_ids(outer) == {42, 7}
    assert unknown_schema_ids(FakeSparkError("USER_RAISED_EXCEPTION", {"errorMessage": "boom"})) == set()


def test_a_query_short_of_task_slots_asks_for_a_restart_and_stops_the_others() -> None:
    """Two real-time queries starting together can find no free slots for one of them (seen in `make
    bench-rules`): that is Spark's CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT anywhere in the chain, not the text."""
    short = FakeSparkError("STREAM_FAILED", {"id": "q"}, FakeSparkError(SLOT_SHORTAGE, {"needed": "3"}))
    other = FakeQuery("enriched", active_looks=5)
    with pytest.raises(SlotShortage) as raised:
        supervise(other, FakeQuery("aggregates_live", 0, error=short))
    assert raised.value.query == "aggregates_live" and raised.value.error is short and other.stopped
    # As pyspark shows it: no condition, only the message of the Java exception in the chain opens with it.
    java = FakeSparkError(None, None)
    java.args = (f"org.apache.spark.SparkException: [{SLOT_SHORTAGE}] Cannot run the pipelined stage group",)
    tagged = FakeSparkError(None, None, java)
    with pytest.raises(SlotShortage):
        supervise(FakeQuery("aggregates_live", 0, error=tagged))
    worded = FakeSparkError("STREAM_FAILED", {"message": f"not {SLOT_SHORTAGE}"})  # named inside: not the cause
    with pytest.raises(FakeSparkError):
        supervise(FakeQuery("aggregates_live", 0, error=worded))


def test_a_lost_streaming_shuffle_connection_asks_for_a_restart() -> None:
    """Seen in a loaded CI rehearsal: the `enriched` real-time query failed with Spark's lost shuffle connection,
    which has no condition: recognised at the start of a message of the chain, as pyspark shows it."""
    lost = FakeSparkError(None, None)
    lost.args = ("org.apache.spark.SparkException: Connection to streaming shuffle writer 305 closed before "
                 "termination; the writer task likely failed.",)
    abort = FakeSparkError(None, None, lost)
    abort.args = ("Job aborted due to stage failure: Task 0 in stage 146.0 failed 1 times, most recent failure: Lost "
                  "task 0.0 in stage 146.0 (TID 308) (192.0.2.2 executor driver): org.apache.spark.SparkException: "
                  "Connection to streaming shuffle writer 305 closed before termination; the writer task likely "
                  "failed.",)
    other = FakeQuery("aggregates_live", active_looks=5)
    with pytest.raises(SlotShortage) as raised:
        supervise(other, FakeQuery("enriched", 0, error=FakeSparkError("STREAM_FAILED", {"id": "q"}, abort)))
    assert raised.value.query == "enriched" and "lost a streaming shuffle connection" in str(raised.value)
    assert other.stopped
    abort._cause = None  # the job abort alone (the Java cause not converted) is recognised as well
    with pytest.raises(SlotShortage):
        supervise(FakeQuery("enriched", 0, error=abort))
    worded = FakeSparkError("STREAM_FAILED", {"message": "user text: Connection to streaming shuffle writer 1 "
                                                         "closed before termination"})
    with pytest.raises(FakeSparkError):  # the words inside another message: not this failure
        supervise(FakeQuery("enriched", 0, error=worded))


def test_refused_starts_wait_longer_each_time_in_a_row_then_give_up() -> None:
    """A schema change restarts the rule packs beside the built-in queries: refusals in a row wait 5, 10, 20, 30
    and 30 s (their slots free meanwhile), then the job fails; a start that ran past the window begins a new row."""
    retries = SlotRetries(window_s=120.0)
    assert [retries.next_delay(1.0) for _ in range(6)] == [5.0, 10.0, 20.0, 30.0, 30.0, None]
    retries = SlotRetries(window_s=120.0)
    assert [retries.next_delay(1.0), retries.next_delay(1.0), retries.next_delay(500.0)] == [5.0, 10.0, 5.0]
    assert retries.count == 1
