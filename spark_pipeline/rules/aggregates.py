"""Compiles a windowed aggregation rule into a member of a shared real-time aggregation: one state store for many rules.

A packed aggregation groups rows by (rule, window end, group key) and updates one buffer per aggregate function.
Each member rule contributes, per matching row of the shared stream, one element: its key (`rule`: name and
version), `wend` (the end of its event-time window, or its watermarked time column: what the watermark evicts
by), `gkey` (its grouping values as Avro, exact) and `a0..` (the inputs of its aggregate functions). Rules whose
aggregate functions have the same *signature* (functions, input types, literal parameters, in a canonical order)
share a query, so the state's schema never depends on which rules are in it and a rule joins or leaves by a
restart from the checkpoint. After the aggregation each group row becomes its rule's output record: the rule's
own SELECT list and HAVING, rewritten over the group key and the aggregate results.

What is compiled: the rule's plan must be projections/filters -> one Aggregate -> projections/filters over the
shared stream (`plans.py`), grouped by a tumbling `window(event_time, ...)` or a watermarked time column, with
aggregate functions in FUNCTIONS; anything else raises NotPackable (the rule then runs in micro-batches).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

from spark_pipeline import shared
from spark_pipeline.load import confluent_frame
from spark_pipeline.metrics import observe_latency
from spark_pipeline.rules import output
from spark_pipeline.rules.model import Rule
from spark_pipeline.rules.plans import Catalyst, NotPackable
from spark_pipeline.rules.safety import concern

WATERMARK_KEY = "spark.watermarkDelayMs"
SESSION_KEY = "spark.sessionWindow"  # Spark's marker on a session_window() column
# Aggregate functions a packed aggregation runs: they never fail on any input (Sum and Average only over
# floating-point inputs: an integer sum may overflow under ANSI).
FUNCTIONS = frozenset({"Count", "Min", "Max", "Sum", "Average", "HyperLogLogPlusPlus", "First", "Last",
                       "ApproximatePercentile"})
_FRACTIONAL_ONLY = frozenset({"Sum", "Average"})


@dataclass(frozen=True)
class Slot:
    """One aggregate function of a signature: a rule's AggregateExpression (the template it is rebuilt from) and
    which of its function's children are inputs (the others are literal parameters)."""

    template: Any
    inputs: tuple[bool, ...]


@dataclass(frozen=True)
class AggregatePlan:
    """A packable aggregation rule: its signature, the slots (in signature order), its element over the shared
    stream's row, and its output record over the aggregated row (null for another rule's group or a HAVING miss)."""

    signature: str
    slots: tuple[Slot, ...]
    element: Column
    record: Column
    delay_ms: int
    key: str  # the rule's groups' `rule` value (rule_key)

    @property
    def pack_id(self) -> str:
        return hashlib.sha1(f"{STATE_LAYOUT}|{self.signature}".encode()).hexdigest()[:10]


# Part of the pack id (and so of its checkpoint's folder): the packed query's stateful operators. Spark cannot
# restore a checkpoint's state into other operators, so a change here starts the packs on new checkpoints.
STATE_LAYOUT = "dedup+aggregate"


def rule_key(rule: Rule) -> str:
    """The value of column `rule` for a rule's groups: a new version starts with new (empty) groups."""
    return f"{rule.name}.v{rule.version}"


def compile_aggregate(cat: Catalyst, rule: Rule, df: DataFrame, boundary: Any) -> AggregatePlan:
    """Compile aggregation rule `rule` (its DataFrame `df` over views of `boundary`); NotPackable says why not."""
    top, agg = cat.chain(cat.analyzed(df), boundary, stop=lambda n: cat.name(n) == "Aggregate")
    if cat.name(agg) != "Aggregate":
        raise NotPackable("the rule has no aggregation")
    below = cat.collapse(agg.child(), boundary)
    child = {int(p.exprId().id()): (p.child() if cat.name(p) == "Alias" else p) for p in below.projects}
    groups = cat.items(agg.groupingExpressions())
    named = cat.items(agg.aggregateExpressions())
    time_index = _time_group(cat, groups)
    functions = _aggregates(cat, named)
    for expr in [*groups, *named, *[e for n in top for e in _expressions(cat, n)]]:
        if reason := concern(cat, expr, skip=("AggregateExpression",)):
            raise NotPackable(reason)
    ordered = sorted(range(len(functions)), key=lambda i: _part(cat, functions[i]))
    signature = ";".join(_part(cat, functions[i]) for i in ordered)
    slot_of = {i: j for j, i in enumerate(ordered)}
    base_groups = [cat.substitute(g, child) for g in groups]
    inputs = [cat.substitute(k, child) for ae in functions for k in cat.children(ae.aggregateFunction())]
    for expr in [*below.filters, *base_groups, *inputs]:  # what runs on the shared stream's rows
        if reason := concern(cat, expr):
            raise NotPackable(reason)
    parts = _Parts(cat, rule, groups, base_groups, functions, slot_of, _key_schema(cat, base_groups))
    element = _element(parts, below.filters, time_index, [functions[i] for i in ordered], child)
    record = _record(parts, df, top, named)
    slots = tuple(Slot(functions[i], tuple(not bool(k.foldable()) for k in cat.children(functions[i]
                                                                                        .aggregateFunction())))
                  for i in ordered)
    delay = _delay(cat, boundary)
    return AggregatePlan(signature, slots, element, record, delay, rule_key(rule))


def _expressions(cat: Catalyst, node: Any) -> list[Any]:
    return [node.condition()] if cat.name(node) == "Filter" else cat.items(node.projectList())


def _watermarked(cat: Catalyst, expr: Any) -> bool:
    return any(a.metadata().contains(WATERMARK_KEY) for a in cat.items(expr.references().toSeq()))


def _time_group(cat: Catalyst, groups: list[Any]) -> int:
    """The grouping expression the watermark bounds: a window (struct of start, end) or a time column."""
    for i, g in enumerate(groups):
        if any(a.metadata().contains(SESSION_KEY) for a in cat.items(g.references().toSeq())):
            raise NotPackable("session windows do not run in real-time mode")
        if _watermarked(cat, g):
            kind = g.dataType().typeName()
            if kind == "struct" and "end" in list(g.dataType().fieldNames()):
                return i
            if kind == "timestamp":
                return i
    raise NotPackable("a real-time aggregation groups by a tumbling window(event_time, ...) or a watermarked "
                      "time column")


def _aggregates(cat: Catalyst, named: list[Any]) -> list[Any]:
    """The distinct aggregate expressions of the SELECT list, checked against FUNCTIONS."""
    found: list[Any] = []
    for expr in named:
        for node in cat.walk(expr):
            if cat.name(node) != "AggregateExpression" or any(node.semanticEquals(f) for f in found):
                continue
            func = node.aggregateFunction()
            kind = cat.name(func)
            if bool(node.isDistinct()):
                raise NotPackable(f"{kind} DISTINCT does not run in real-time mode")
            if node.filter().isDefined():
                raise NotPackable(f"{kind} with FILTER is not packed into a real-time aggregation")
            if kind not in FUNCTIONS:
                raise NotPackable(f"the aggregate function {kind} is not packed into a real-time aggregation")
            inputs = [k for k in cat.children(func) if not bool(k.foldable())]
            if kind in _FRACTIONAL_ONLY and any(k.dataType().typeName() not in ("double", "float") for k in inputs):
                raise NotPackable(f"{kind} of an integer or decimal may overflow at run time (ANSI): cast it to double")
            found.append(node)
    if not found:
        raise NotPackable("an aggregation without aggregate functions is not packed")
    return found


def _part(cat: Catalyst, ae: Any) -> str:
    """One function's part of the signature: class, input types and literal parameters."""
    func = ae.aggregateFunction()
    args = [k.sql() if bool(k.foldable()) else k.dataType().simpleString() for k in cat.children(func)]
    extra = f"@{func.relativeSD()}" if cat.name(func) == "HyperLogLogPlusPlus" else ""
    return f"{cat.name(func)}({','.join(args)}){extra}"


def _key_schema(cat: Catalyst, base_groups: list[Any]) -> str:
    """The Avro schema (Spark's own mapping, exact) of the grouping values as a record g0, g1, ..."""
    jvm = cat.jvm
    struct = jvm.org.apache.spark.sql.types.StructType()
    for i, g in enumerate(base_groups):
        struct = struct.add(f"g{i}", g.dataType(), True)
    return str(jvm.org.apache.spark.sql.avro.SchemaConverters.toAvroType(struct, False, "gkey", "headwater.rules")
               .toString())


@dataclass(frozen=True)
class _Parts:
    """What compiling one aggregation rule found: its groups (over the aggregation's input, and over the shared
    stream), its aggregate expressions, the slot of each, and the Avro schema of its group key."""

    cat: Catalyst
    rule: Rule
    groups: list[Any]
    base_groups: list[Any]
    functions: list[Any]
    slot_of: dict[int, int]
    key_schema: str


def _element(parts: _Parts, filters: list[Any], time_index: int, functions: list[Any],
             child: dict[int, Any]) -> Column:
    """The rule's element over a row of the shared stream (null when the row does not meet its WHERE)."""
    cat, rule, base_groups = parts.cat, parts.rule, parts.base_groups
    time = cat.column(base_groups[time_index])
    wend = time["end"] if base_groups[time_index].dataType().typeName() == "struct" else time
    gkey = to_avro(F.struct(*[cat.column(g).alias(f"g{i}") for i, g in enumerate(base_groups)]), parts.key_schema)
    inputs = [cat.substitute(k, child) for ae in functions for k in cat.children(ae.aggregateFunction())
              if not bool(k.foldable())]
    element = F.struct(F.lit(rule_key(rule)).alias("rule"), wend.alias("wend"), gkey.alias("gkey"),
                       *[cat.column(x).alias(f"a{i}") for i, x in enumerate(inputs)])
    condition: Column | None = None
    for f in filters:
        c = cat.column(f)
        condition = c if condition is None else condition & c
    return element if condition is None else F.when(condition, element)


def _record(parts: _Parts, df: DataFrame, top: list[Any], named: list[Any]) -> Column:
    """The rule's output record over the aggregated row (rule, wend, gkey, r0, ...)."""
    cat, rule, groups, functions, slot_of = parts.cat, parts.rule, parts.groups, parts.functions, parts.slot_of
    key_fields = from_avro(F.col("gkey"), parts.key_schema)
    group_values = [cat.expression(key_fields[f"g{i}"]) for i in range(len(groups))]
    results = [cat.expression(F.col(f"r{slot_of[i]}")) for i in range(len(functions))]

    def swap(node: Any) -> Any | None:
        if cat.name(node) == "AggregateExpression":
            return next(r for f, r in zip(functions, results, strict=True) if node.semanticEquals(f))
        return next((v for g, v in zip(groups, group_values, strict=True) if node.semanticEquals(g)), None)

    def value(named_expr: Any) -> Any:
        return named_expr.child() if cat.name(named_expr) == "Alias" else named_expr

    by_id = {int(n.exprId().id()): cat.rewrite(value(n), swap) for n in named}
    outputs = named
    having: list[Any] = []
    for node in reversed(top):
        if cat.name(node) == "Filter":
            having.append(cat.substitute(node.condition(), by_id))
            continue
        outputs = cat.items(node.projectList())
        by_id = {int(n.exprId().id()): cat.substitute(value(n), by_id) for n in outputs}
    columns = [cat.column(by_id[int(n.exprId().id())]).alias(str(n.name())) for n in outputs]
    if rule.output_schema_id is None:
        raise ValueError(f"rule {rule.name} has no output schema: apply it again")
    names = [str(n.name()) for n in outputs]
    value_col = confluent_frame(to_avro(F.struct(*columns), output.avro_schema_json("rule", df.schema)),
                                rule.output_schema_id)
    key = F.to_json(F.struct(*[columns[names.index(k)] for k in rule.key_columns])).cast("binary")
    condition = F.col("rule") == F.lit(rule_key(rule))
    for h in having:
        condition = condition & cat.column(h)
    return F.when(condition, F.struct(F.lit(rule.topic).alias("topic"), key.alias("key"), value_col.alias("value")))


def _delay(cat: Catalyst, boundary: Any) -> int:
    for attr in cat.items(boundary.output()):
        if attr.metadata().contains(WATERMARK_KEY):
            return int(attr.metadata().getLong(WATERMARK_KEY))
    raise NotPackable("the shared stream has no watermark")


def aggregated_records(base: DataFrame, plans: list[AggregatePlan]) -> DataFrame:
    """Kafka rows (topic, key, value) of the packed aggregation of `plans` (one signature) over `base`."""
    cat = Catalyst(base.sparkSession)
    elements = F.filter(F.array(*[p.element for p in plans]), lambda e: e.isNotNull())
    slots = plans[0].slots
    inputs = sum(sum(s.inputs) for s in slots)
    watermark = {WATERMARK_KEY: plans[0].delay_ms}
    # The shared stream may repeat an event (its sink is at least once): counted once.
    exploded = shared.without_repeats(base).select(F.explode(elements).alias("e"),
                                                   F.unix_millis("created_at").alias("created_ms"))
    # Observed where the rows enter the aggregation: the latency up to here, and the rows each rule counts.
    counts = {key: F.col("e.rule") == F.lit(key) for key in (p.key for p in plans)}
    rows = observe_latency(exploded, F.col("created_ms"), counts).select(
        F.col("e.rule").alias("rule"), F.col("e.wend").alias("wend", metadata=watermark), F.col("e.gkey").alias("gkey"),
        *[F.col(f"e.a{i}").alias(f"a{i}") for i in range(inputs)])
    columns, next_input = [], 0
    for j, slot in enumerate(slots):
        func = slot.template.aggregateFunction()
        kids = []
        for kid, is_input in zip(cat.children(func), slot.inputs, strict=True):
            kids.append(cat.expression(F.col(f"a{next_input}")) if is_input else kid)
            next_input += int(is_input)
        rebuilt = slot.template.withNewChildren(cat.seq([func.withNewChildren(cat.seq(kids))]))
        columns.append(cat.column(rebuilt).alias(f"r{j}"))
    grouped = rows.groupBy("rule", "wend", "gkey").agg(*columns)
    out = F.coalesce(*[p.record for p in plans])
    return grouped.select(out.alias("o")).where(F.col("o").isNotNull()).select("o.topic", "o.key", "o.value")
