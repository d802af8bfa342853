"""Pays, once when the rules start, the first-call cost of the SQL functions whose first call in a JVM is slow.

Spark maps case (`upper`, `lower`, `initcap`) with ICU by default (`spark.sql.icu.caseMappings.enabled`), and the
first call in a JVM loads ICU's case data: about 1 s on an idle core, 3-4 s on a busy 2-core host. A real-time
rule calling `upper` paid that on its first record, while its new query's task held the records it had just read
(measured: a projection rule's first output 4-6 s after `rules apply`, the next one's 1 s). Warming here moves that
cost to the pipeline's start, in a thread of its own, so no rule pays it. The other functions rules commonly call
(regular expressions, dates, JSON, hashes: 0.03-0.2 s on a first call) are not worth it.

The job runs in the pipeline's JVM, which runs the rules' tasks with the default local master. On a cluster, each
executor pays the cost on its first case mapping, as before.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol

log = logging.getLogger("spark_pipeline.rules")

# Not constant-foldable (the input is a column), so the task, not the planner, calls the functions.
WARM_EXPRESSIONS = (
    "upper(concat('warm-up ', CAST(id AS STRING))) AS upper",
    "lower(concat('WARM-UP ', CAST(id AS STRING))) AS lower",
    "initcap(concat('warm-up ', CAST(id AS STRING))) AS initcap",
)


class Session(Protocol):
    """What the warm-up needs of a SparkSession."""

    def range(self, start: int, end: int | None = None, step: int = 1, numPartitions: int | None = None
              ) -> Any: ...


def warm(spark: Session) -> tuple[float, tuple[str, ...]]:
    """Run the case-mapping functions over one row in a batch job of one task; the seconds it took and the row it
    computed. One task: a job as wide as the session (`range(1)` alone spreads over the default parallelism, 32
    tasks) would refuse a real-time query starting beside it for want of slots (docs/rules-runtime.md)."""
    began = time.monotonic()
    row = spark.range(0, 1, 1, 1).selectExpr(*WARM_EXPRESSIONS).collect()[0]
    return time.monotonic() - began, tuple(str(value) for value in row)


def start(spark: Session) -> threading.Thread:
    """`warm` in a daemon thread (the built-in queries and the rule manager start meanwhile); a failure is logged,
    never raised: a rule then pays the cost itself, as it would without the warm-up."""

    def run() -> None:
        try:
            took, _ = warm(spark)
        except Exception as exc:  # a session stopping under it, a cancelled job: nothing depends on the warm-up
            log.warning("rules warm-up (case mapping) did not run: %s", str(exc).strip()[:300])
            return
        log.info("rules warm-up: case mapping (ICU) loaded in %.2f s", took)

    thread = threading.Thread(target=run, name="rules-warm-up", daemon=True)
    thread.start()
    return thread
