"""Decides where a rule runs: packed into the shared real-time query, or in a micro-batch query of its own, and why.

A rule joins the **realtime** tier when its plan is a chain of projections and filters over the shared stream
(`plans.collapse`) whose every expression runs in the JVM and cannot fail at run time: then many rules share one
real-time query (`packed.py`), and no rule can stop the others. Everything else runs in the **microbatch** tier, one
query per rule, so that a failure stops only that rule:

- what Spark's real-time mode cannot run: joins, session windows, sorting, rules reading other rules' outputs;
- Python: the plugin SQL functions, and the columns the pipeline computes in Python (`browser`, `os`, `device`,
  `country`);
- what could fail the shared query on some event: a cast that may not parse (ANSI), integer or decimal arithmetic
  that may overflow, a division by a value that may be zero, an array index that may be out of bounds, any
  function not known to be safe (`SAFE`);
- what behaves differently in a real-time batch: non-deterministic functions, the current time.

`place` returns the tier with a one-line reason, which `rules list` shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame

from spark_pipeline.rules.aggregates import AggregatePlan, compile_aggregate
from spark_pipeline.rules.model import Rule, referenced_rules
from spark_pipeline.rules.plans import Catalyst, NotPackable
from spark_pipeline.rules.safety import concern

REALTIME = "realtime"
MICROBATCH = "microbatch"
TIERS = (REALTIME, MICROBATCH)

@dataclass(frozen=True)
class StatelessPlan:
    """A packable rule over the shared stream's row: the condition a row must meet and the output columns."""

    condition: Column | None
    columns: list[Column]


@dataclass(frozen=True)
class Placement:
    """Where a rule runs and why; `plan` is set for the realtime tier (stateless or aggregation)."""

    tier: str
    reason: str
    plan: StatelessPlan | AggregatePlan | None = field(default=None, compare=False)


def place(cat: Catalyst, rule: Rule, df: DataFrame, boundary: Any) -> Placement:
    """The tier of `rule`, whose DataFrame `df` was analysed over views of the shared stream (plan `boundary`)."""
    if reads := sorted(referenced_rules(rule.sql)):
        return Placement(MICROBATCH, f"reads the output of rule {reads[0]} (another topic)")
    if rule.aggregation:
        try:
            plan = compile_aggregate(cat, rule, df, boundary)
        except NotPackable as exc:
            return Placement(MICROBATCH, str(exc))
        return Placement(REALTIME, "windowed aggregation: shares the real-time aggregation of its functions", plan)
    try:
        collapsed = cat.collapse(cat.analyzed(df), boundary)
    except NotPackable as exc:
        return Placement(MICROBATCH, str(exc))
    for expr in [*collapsed.projects, *collapsed.filters]:
        if reason := concern(cat, expr):
            return Placement(MICROBATCH, reason)
    condition: Column | None = None
    for f in collapsed.filters:
        c = cat.column(f)
        condition = c if condition is None else condition & c
    return Placement(REALTIME, "filter/projection: shares the real-time query",
                     StatelessPlan(condition, [cat.column(p) for p in collapsed.projects]))


