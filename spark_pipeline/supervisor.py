"""Watches the running streaming queries: ends the run, or asks for a schema refresh on unknown schema ids.

Two failures of real-time queries are passing ones, and raise SlotShortage, which the run answers by starting the
queries again from their checkpoints, a bounded number of times: a query that could not get its task slots at once
(CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT: seen when two real-time queries start at the same moment), and a stage
that lost a streaming shuffle connection between its tasks (Spark's "Connection to streaming shuffle writer N
closed before termination", which carries no error condition: seen on a starved host as a real-time batch ends;
local mode retries no task, so the query fails although nothing is wrong with its input).

A batch that meets a schema id the decoder's snapshot lacks fails on purpose (`decode.py`, strict mode, with
Spark's `raise_error`). The failure is recognised structurally: somewhere in the exception's cause chain is a
Spark error of condition USER_RAISED_EXCEPTION whose `errorMessage` parameter is exactly
`HEADWATER_UNKNOWN_SCHEMA_ID=<id>`; any other failure is raised as it is.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from spark_pipeline.decode import UNKNOWN_ID_MARKER
from spark_pipeline.snapshot import SchemaSnapshot

log = logging.getLogger("spark_pipeline.supervisor")
USER_RAISED = "USER_RAISED_EXCEPTION"
SLOT_SHORTAGE = "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT"
MAX_CAUSES = 32
_TAGGED = re.compile(r"(?:[\w.$]+: )?\[([A-Z][A-Z0-9_]*)\] ")
# Spark's own message, at the start of an exception of the chain (the Java exception, or the job abort naming it as
# the lost task's failure): never text of a record, which Spark does not put before these words.
_SHUFFLE_LOST = re.compile(r"(?:Job aborted due to stage failure: [^\n]*?most recent failure: Lost task [^\n]*?: )?"
                           r"(?:org\.apache\.spark\.SparkException: )?Connection to streaming shuffle writer \d+ "
                           r"closed before termination")


class SlotShortage(Exception):
    """Query `query` failed for want of task slots at its start, or lost a streaming shuffle connection (`error`:
    Spark's exception); the others stopped."""

    def __init__(self, query: str, error: BaseException, what: str = "could not get its task slots") -> None:
        super().__init__(f"query {query} {what}: {str(error).splitlines()[0][:300]}")
        self.query, self.error = query, error


class SlotRetries:
    """When the queries start again after a SlotShortage: 5, 10, 20, 30 and 30 s later (refusals in a row: a start
    that ran longer than `window_s` before it was refused begins a new row), then never (the job fails). The rule
    packs restart beside the built-in queries on every schema change; their slots free within seconds, so about
    1.5 minutes of refusals in a row means too few cores, not a collision."""

    DELAYS_S = (5.0, 10.0, 20.0, 30.0, 30.0)

    def __init__(self, window_s: float = 120.0) -> None:
        self.window_s = window_s
        self.count = 0

    def next_delay(self, ran_s: float) -> float | None:
        """The wait before the next start, after a start that ran `ran_s` seconds; None: give up."""
        self.count = 1 if ran_s > self.window_s else self.count + 1
        return self.DELAYS_S[self.count - 1] if self.count <= len(self.DELAYS_S) else None


class Query(Protocol):
    """What the supervisor uses of a pyspark StreamingQuery (a seam for unit tests)."""

    @property
    def name(self) -> str: ...
    @property
    def isActive(self) -> bool: ...
    def exception(self) -> Any: ...
    def stop(self) -> None: ...


def causes(error: object) -> Iterator[object]:
    """`error` and its cause chain (pyspark CapturedException: the converted Java cause in `_cause`), at most
    MAX_CAUSES deep."""
    for _ in range(MAX_CAUSES):
        if error is None:
            return
        yield error
        error = getattr(error, "_cause", None)


def conditions(error: object) -> set[str]:
    """The error conditions anywhere in `error`'s cause chain: `getCondition()`, or the `[CONDITION]` a message
    opens with (after the Java class name), since some of Spark's errors carry it only there (the scheduler's
    CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT reaches pyspark with `getCondition()` None)."""
    found: set[str] = set()
    for cause in causes(error):
        if condition := getattr(cause, "getCondition", lambda: None)():
            found.add(str(condition))
        if tagged := _TAGGED.match(str(cause)):
            found.add(tagged.group(1))
    return found


def shuffle_lost(error: object) -> bool:
    """Whether `error`'s cause chain holds Spark's lost streaming shuffle connection (real-time mode)."""
    return any(_SHUFFLE_LOST.match(str(cause)) for cause in causes(error))


def unknown_schema_ids(error: object) -> set[int]:
    """The schema ids of the UNKNOWN_SCHEMA_ID errors in `error`'s cause chain (pyspark CapturedException:
    `getCondition()`, `getMessageParameters()`, the converted Java cause in `_cause`)."""
    ids: set[int] = set()
    for cause in causes(error):
        if getattr(cause, "getCondition", lambda: None)() == USER_RAISED:
            params: dict[str, str] = getattr(cause, "getMessageParameters", dict)() or {}
            message = str(params.get("errorMessage", ""))
            number = message.removeprefix(UNKNOWN_ID_MARKER)
            if message.startswith(UNKNOWN_ID_MARKER) and number.isdigit():
                ids.add(int(number))
    return ids


def stop_all(queries: Sequence[Query]) -> None:
    for q in queries:
        try:
            q.stop()
        except Exception:  # stopping a failed query can raise again; the others must still stop
            log.exception("stopping %s", q.name)


def supervise(queries: Sequence[Query], take_snapshot: Callable[[], SchemaSnapshot], snapshot: SchemaSnapshot,
              poll_s: float, available_now: bool) -> set[int] | None:
    """Wait until the queries end. None: all done; a set: refresh the schemas (the unknown ids it names; empty
    when polling `take_snapshot` every `poll_s` found new versions)."""
    next_poll = time.monotonic() + poll_s
    while True:
        # One look at which queries ended, then their exceptions: Spark sets a query's exception before it marks
        # the query terminated, so an ended query's failure is always seen. (Asking isActive again for "all
        # ended?" took a query that failed in between for one that had finished: availableNow then returned
        # with the failed batch never processed.)
        ended = [q for q in queries if not q.isActive]
        for q in ended:
            exc = q.exception()
            if exc is not None:
                stop_all(queries)
                ids = unknown_schema_ids(exc)
                if not ids and SLOT_SHORTAGE in conditions(exc):
                    raise SlotShortage(str(q.name), exc)
                if not ids and shuffle_lost(exc):
                    raise SlotShortage(str(q.name), exc, "lost a streaming shuffle connection")
                if not ids:
                    raise exc
                log.warning("query %s met unknown schema ids %s: refreshing the registry snapshot", q.name, ids)
                return ids
        if len(ended) == len(queries):
            return None
        if not available_now and time.monotonic() >= next_poll:
            next_poll = time.monotonic() + poll_s
            if take_snapshot().fingerprint() != snapshot.fingerprint():
                log.warning("new schema versions in the registry: restarting the queries from their checkpoints")
                stop_all(queries)
                return set()
        time.sleep(0.5)
