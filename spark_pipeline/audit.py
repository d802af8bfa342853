"""Reports gaps in each producer's seq as a streaming output, so loss is observed rather than assumed: the Spark
glue around the pure state machine of `gaps.py` (which documents the state and the reporting rules).

In Spark (`loss_audit_stream`): `applyInPandasWithState` grouped by producer_id, with a processing-time
timeout set to the moment the oldest open gap's grace ends, so a producer that goes quiet still has its
last gap reported (timeouts are checked at each trigger, so after at most grace + one file trigger; with
`--available-now` or a 0 s file trigger only in batches with data, see `idle_batch_settings`).
It reads every decoded event, not the deduplicated ones: an event later than the watermark is still an
event that arrived. A producer's state (a few longs once its gaps are closed) is kept for as long as the
checkpoint lives; a job started after a producer's first events (`startingOffsets=latest`, or after Kafka
retention deleted them) reports the seqs it never saw as missing, like the batch audit does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, Protocol

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from spark_pipeline.config import duration_ms
from spark_pipeline.gaps import ARRIVED_LATE, ProducerState, merge
from spark_pipeline.session import NO_DATA_BATCHES

# The ranges as little-endian int64s (first, last, since_ms / first, last): pyspark 4.3.0's Python worker
# fails on any array in applyInPandasWithState's state schema (KeyError 'elementType' parsing it).
STATE_SCHEMA = "next_expected long, seen binary, reported binary"
# What the pandas function returns; `loss_audit_stream` turns detected_at_ms into the timestamp and the date.
_UDF_OUTPUT_SCHEMA = ("producer_id string, first_seq long, last_seq long, missing long, status string, "
                      "detected_at_ms long")


class GroupStateLike(Protocol):
    """The part of pyspark's GroupState that `apply_group` uses (a fake in unit tests)."""

    @property
    def getOption(self) -> tuple[Any, ...] | None: ...

    def getCurrentProcessingTimeMs(self) -> int: ...

    def update(self, newValue: tuple[Any, ...]) -> None: ...

    def setTimeoutDuration(self, durationMs: int) -> None: ...


def apply_group(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupStateLike,
                grace_ms: int) -> Iterator[pd.DataFrame]:
    """`applyInPandasWithState`'s function: one producer's new seqs (none on a timeout) -> report rows."""
    producer_id = str(key[0])
    seqs: list[int] = []
    for frame in frames:
        seqs.extend(int(s) for s in frame["seq"].dropna())
    now = state.getCurrentProcessingTimeMs()
    new_state, rows = merge(ProducerState.from_row(state.getOption), seqs, now, grace_ms)
    state.update(new_state.to_row())
    timeout = new_state.timeout_ms(now, grace_ms)
    if timeout is not None:  # reset at every call: without this, no timeout
        state.setTimeoutDuration(timeout)
    if rows:
        yield pd.DataFrame({
            "producer_id": [producer_id] * len(rows),
            "first_seq": pd.Series([r.first_seq for r in rows], dtype="int64"),
            "last_seq": pd.Series([r.last_seq for r in rows], dtype="int64"),
            "missing": pd.Series([r.missing for r in rows], dtype="int64"),
            "status": [r.status for r in rows],
            "detected_at_ms": pd.Series([r.detected_at_ms for r in rows], dtype="int64"),
        })


def loss_audit_stream(events: DataFrame, grace_ms: int) -> DataFrame:
    """The streaming loss audit over decoded events (streaming or not): one row per reported gap or late part.

    Columns: producer_id, first_seq, last_seq, missing, status ('missing' | 'arrived_late'), detected_at
    (the processing time of the batch that reported it) and date (of detected_at). Append mode.
    """
    seqs = events.select("producer_id", "seq").where(F.col("producer_id").isNotNull() & F.col("seq").isNotNull())
    reports = seqs.groupBy("producer_id").applyInPandasWithState(
        functools.partial(apply_group, grace_ms=grace_ms), _UDF_OUTPUT_SCHEMA, STATE_SCHEMA, "append",
        GroupStateTimeout.ProcessingTimeTimeout)
    detected = F.timestamp_millis(F.col("detected_at_ms"))
    return reports.select("producer_id", "first_seq", "last_seq", "missing", "status",
                          detected.alias("detected_at"), F.to_date(detected).alias("date"))


def idle_batch_settings(trigger: str | None) -> dict[str, str]:
    """The loss audit query's session settings (`session.query_conf`): no-data batches only on a positive
    trigger (None: availableNow).

    A processing-time timeout makes Spark run a batch at every trigger even without new data; that is what
    reports a quiet producer's gap. Under availableNow it never ends (Spark 4.3 keeps running no-data
    batches: the query never stops), and on a 0 s trigger it is a busy loop; there, timeouts fire in the
    next batch with data.
    """
    enabled = trigger is not None and duration_ms(trigger) > 0
    return {NO_DATA_BATCHES: str(enabled).lower()}


def net_loss(reports: DataFrame) -> DataFrame:
    """Per producer from the audit's rows: seqs reported missing, of those arrived late, and still missing."""
    late = F.col("status") == ARRIVED_LATE
    return (reports.groupBy("producer_id")
            .agg(F.sum(F.when(~late, F.col("missing")).otherwise(0)).alias("reported_missing"),
                 F.sum(F.when(late, F.col("missing")).otherwise(0)).alias("arrived_late"),
                 F.max("detected_at").alias("last_detected_at"))
            .withColumn("still_missing", F.col("reported_missing") - F.col("arrived_late"))
            .select("producer_id", "reported_missing", "arrived_late", "still_missing", "last_detected_at"))
