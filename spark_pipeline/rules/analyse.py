"""Analyses a rule's SQL against the live views: the one gate a rule passes, in the CLI and before any runtime
starts it, and the refusals of what cannot run as a safe, bounded streaming query.

In order (docs/rules.md, "What a rule may call" and "Refusals"):
1. the text, before Spark parses it (sqltext.check_text): `too_large`, `forbidden_syntax` (`${`), `too_complex`
   (nesting, tokens); one statement (`not_a_select` otherwise);
2. Spark's parse (`syntax_error`) of a query, not a command (`not_a_select`: nothing is ever executed), then the
   parsed plan (sandbox.check_parsed): `forbidden_syntax`, `forbidden_function`, `forbidden_relation`,
   `too_complex`;
3. Spark's analysis of that very plan (never `spark.sql`) against the registered views (`unknown_view`,
   `unknown_column`, `unknown_function`, `type_error`, else `analysis_error`), then the analysed plan
   (sandbox.check_analysed: relations, denied kinds, patterns, sizes, rows, intervals);
4. for a rule (`analyse`): it must read a stream (`not_streaming`); every streaming aggregation or DISTINCT
   must group by an event-time window (`window`, `session_window`) or a watermarked time column
   (`unbounded_aggregation`), every stream-stream join must bound the two sides' event times against each
   other, both ways (`BETWEEN`, or `<`/`>` comparisons, or equal windows: `unbounded_join`), and Spark's own
   streaming checks must pass in the output mode the rule will run in (`unsupported_query`).
Each refusal names the 1-based line of the SQL it concerns (Spark's position, or the plan node's origin).

For runtimes: call `analyse(session, rule.sql)` on the session holding the views and run `Analysis.frame`; a
RuleError means the rule is refused (mark it failed with `describe()`, never retry it as it is).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import AnalysisException, ParseException
from pyspark.errors.exceptions.captured import convert_exception
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_pipeline.rules import model, sandbox
from spark_pipeline.rules.allowlist import BOUNDS, Bounds
from spark_pipeline.rules.functions import load_functions
from spark_pipeline.rules.model import RuleError
from spark_pipeline.rules.sqltext import check_text, line_of, mask, one_statement

__all__ = ["Analysis", "analyse", "analysed", "line_of", "one_statement", "precheck", "refusal"]
WATERMARK_KEY = "spark.watermarkDelayMs"
NO_SUBSTITUTION = "spark.sql.variable.substitute"
# Spark error classes (their prefix before the first dot) -> our codes.
ERROR_CODES = {
    "TABLE_OR_VIEW_NOT_FOUND": model.UNKNOWN_VIEW,
    "UNRESOLVED_COLUMN": model.UNKNOWN_COLUMN, "UNRESOLVED_FIELD": model.UNKNOWN_COLUMN,
    "UNRESOLVED_MAP_KEY": model.UNKNOWN_COLUMN, "AMBIGUOUS_REFERENCE": model.UNKNOWN_COLUMN,
    "UNRESOLVED_ROUTINE": model.UNKNOWN_FUNCTION, "ROUTINE_NOT_FOUND": model.UNKNOWN_FUNCTION,
    "DATATYPE_MISMATCH": model.TYPE_ERROR, "WRONG_NUM_ARGS": model.TYPE_ERROR, "CAST_INVALID_INPUT": model.TYPE_ERROR,
    "INVALID_EXTRACT_BASE_FIELD_TYPE": model.TYPE_ERROR, "INCOMPATIBLE_COLUMN_TYPE": model.TYPE_ERROR,
    "NUM_COLUMNS_MISMATCH": model.TYPE_ERROR, "MISSING_AGGREGATION": model.TYPE_ERROR,
    "MISSING_GROUP_BY": model.TYPE_ERROR, "GROUP_BY_AGGREGATE": model.TYPE_ERROR,
}
_LINE = re.compile(r"line (\d+),? pos (\d+)")
_SPARK_LOGGERS = ("SQLQueryContextLogger", "py4j", "pyspark")
_COMPARISONS = {"LessThan": "<", "LessThanOrEqual": "<", "GreaterThan": ">", "GreaterThanOrEqual": ">"}
_QUERY_STARTS = ("select", "with", "from", "(")


@dataclass(frozen=True)
class Analysis:
    """What analysing a rule found: its output columns, the columns its records are keyed by, whether it is an
    aggregation, the output mode it runs in, and whether it reads streams (views over batches analyse too)."""

    schema: StructType
    key_columns: tuple[str, ...]
    aggregation: bool
    output_mode: str
    streaming: bool
    frame: DataFrame = field(compare=False, repr=False)  # what a runtime runs (never spark.sql(rule.sql))


def _check_query_start(sql: str) -> None:
    masked = mask(sql)
    first = masked.strip().split(None, 1)[0].lower()
    if not first.startswith(_QUERY_STARTS):
        raise RuleError(model.NOT_A_SELECT, line_of(sql, len(masked) - len(masked.lstrip())),
                        f"a rule is one SELECT query, not {first.upper()}")


def _error_line(sql: str, exc: Exception) -> int | None:
    contexts = exc.getQueryContext() if hasattr(exc, "getQueryContext") else []
    for ctx in contexts or []:
        try:
            return line_of(sql, int(ctx.startIndex()))
        except Exception:
            continue
    match = _LINE.search(str(exc))
    return int(match.group(1)) if match else None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().split("\n", 1)[0]
    text = re.sub(r"\s*SQLSTATE: \w+", "", text)
    return re.sub(r";? ?\(?line \d+,? pos \d+\)?;?", "", text).strip(" ;")


def refusal(sql: str, exc: Exception) -> RuleError:
    """A Spark parse or analysis exception as a RuleError with our code and the line."""
    condition = ""
    if hasattr(exc, "getCondition"):
        condition = exc.getCondition() or ""
    if isinstance(exc, ParseException):
        return RuleError(model.SYNTAX_ERROR, _error_line(sql, exc), _first_line(exc))
    code = ERROR_CODES.get(condition.split(".", 1)[0], model.ANALYSIS_ERROR)
    return RuleError(code, _error_line(sql, exc), _first_line(exc))


@contextmanager
def quiet_spark_errors() -> Iterator[None]:
    """PySpark logs every analysis error with its JVM stack trace; a refused rule is an answer, not an incident."""
    loggers = [logging.getLogger(n) for n in _SPARK_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _children(node: Any) -> list[Any]:
    kids = node.children()
    return [kids.apply(i) for i in range(kids.size())]


def _nodes(node: Any) -> Iterator[Any]:
    yield node
    for child in _children(node):
        yield from _nodes(child)


def _name(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def _origin_line(node: Any, sql: str, fallback: str) -> int | None:
    line = node.origin().line()
    if line.isDefined():
        return int(line.get())
    match = re.search(fallback, mask(sql), re.IGNORECASE)
    return line_of(sql, match.start()) if match else None


def parse_query(spark: SparkSession, sql: str) -> Any:
    """Spark's unresolved plan of `sql`; RuleError(syntax_error) or (not_a_select) for a command."""
    jspark = spark._jsparkSession
    try:
        plan = jspark.sessionState().sqlParser().parsePlan(sql)
    except Exception as exc:
        java = getattr(exc, "java_exception", None)
        converted = convert_exception(java) if java is not None else exc
        if isinstance(converted, ParseException):
            raise refusal(sql, converted) from None
        raise RuleError(model.SYNTAX_ERROR, None, _first_line(converted)) from None
    command = _jvm(spark).java.lang.Class.forName("org.apache.spark.sql.catalyst.plans.logical.Command")
    for node in _nodes(plan):
        name = _name(node)
        if command.isInstance(node) or "Insert" in name or name.endswith(("Statement", "Command")):
            raise RuleError(model.NOT_A_SELECT, 1, f"a rule is one SELECT query, not a command ({name})")
    return plan


def _references(expr: Any) -> list[Any]:
    refs = expr.references().toSeq()
    return [refs.apply(i) for i in range(refs.size())]


def _watermarked(expr: Any) -> bool:
    return any(a.metadata().contains(WATERMARK_KEY) for a in _references(expr))


def _check_aggregate(node: Any, sql: str) -> None:
    groups = node.groupingExpressions()
    if not any(_watermarked(groups.apply(i)) for i in range(groups.size())):
        raise RuleError(model.UNBOUNDED_AGGREGATION, _origin_line(node, sql, r"\bgroup\s+by\b"),
                        "a streaming aggregation must group by an event-time window (window(event_time, ...), "
                        "session_window(event_time, ...)) or a watermarked time column, or its state grows forever")


def _check_distinct(node: Any, sql: str) -> None:
    if not any(_watermarked(a) for a in _seq(node.output())):
        raise RuleError(model.UNBOUNDED_AGGREGATION, _origin_line(node, sql, r"\bdistinct\b"),
                        "DISTINCT over a stream needs an event-time column among its columns (its state grows "
                        "forever otherwise)")


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _side(expr: Any, left: set[int], right: set[int]) -> str | None:
    """'L' or 'R' when `expr` references watermarked columns of one join side only, else None."""
    ids = {int(a.exprId().id()) for a in _references(expr) if a.metadata().contains(WATERMARK_KEY)}
    if ids and ids <= left:
        return "L"
    if ids and ids <= right:
        return "R"
    return None


def _bounds(expr: Any, left: set[int], right: set[int]) -> set[str]:
    """The directions ('L<R', 'R<L') in which the condition `expr` bounds the sides' event times."""
    name = _name(expr)
    if name == "And":
        return _bounds(expr.left(), left, right) | _bounds(expr.right(), left, right)
    kids = _children(expr)
    if name in ("EqualTo", "EqualNullSafe") and len(kids) == 2:
        sides = {_side(kids[0], left, right), _side(kids[1], left, right)}
        return {"L<R", "R<L"} if sides == {"L", "R"} else set()
    if name in _COMPARISONS and len(kids) == 2:
        a, b = _side(kids[0], left, right), _side(kids[1], left, right)
        if {a, b} != {"L", "R"}:
            return set()
        smaller = a if _COMPARISONS[name] == "<" else b
        return {"L<R" if smaller == "L" else "R<L"}
    if name == "Between":  # a RuntimeReplaceable: its child is the replacement, its fields the operands
        x, lo, hi = expr.input(), expr.lower(), expr.upper()
        out = set()
        for bound, x_is_smaller in ((lo, False), (hi, True)):
            xs, bs = _side(x, left, right), _side(bound, left, right)
            if {xs, bs} == {"L", "R"}:
                smaller = xs if x_is_smaller else bs
                out.add("L<R" if smaller == "L" else "R<L")
        return out
    return set()


def _check_join(node: Any, sql: str) -> None:
    left_plan, right_plan = node.left(), node.right()
    if not (left_plan.isStreaming() and right_plan.isStreaming()):
        return
    left = {int(a.exprId().id()) for a in _seq(left_plan.output())}
    right = {int(a.exprId().id()) for a in _seq(right_plan.output())}
    cond = node.condition()
    bounds = _bounds(cond.get(), left, right) if cond.isDefined() else set()
    if bounds != {"L<R", "R<L"}:
        raise RuleError(model.UNBOUNDED_JOIN, _origin_line(node, sql, r"\bjoin\b"),
                        "a join of two streams must bound their event times both ways, e.g. ON ... AND "
                        "b.event_time BETWEEN a.event_time AND a.event_time + INTERVAL 30 MINUTES")


def _jvm(spark: SparkSession) -> Any:
    jvm = spark._jvm
    if jvm is None:
        raise RuntimeError("rules are analysed on a classic (JVM) Spark session, not Spark Connect")
    return jvm


def _output_mode(spark: SparkSession, plan: Any, aggregation: bool, sql: str) -> str:
    jvm = _jvm(spark)
    checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
    modes = ("update", "append") if aggregation else ("append",)
    first_error: Exception | None = None
    output_modes = jvm.org.apache.spark.sql.streaming.OutputMode
    for mode in modes:
        try:
            checker.checkForStreaming(plan, output_modes.Update() if mode == "update" else output_modes.Append())
            return mode
        except Exception as exc:
            java = getattr(exc, "java_exception", None)
            first_error = first_error or (convert_exception(java) if java is not None else exc)
    message = _first_line(first_error) if first_error else "not supported on a stream"
    raise RuleError(model.UNSUPPORTED, _error_line(sql, first_error) if first_error else None, message)


def _is_aggregate_expression(expr: Any) -> bool:
    return any(_name(e) == "AggregateExpression" for e in _nodes(expr))


def key_columns(plan: Any, schema: StructType, aggregation: bool) -> tuple[str, ...]:
    """Window and grouping columns of the top aggregation that reach the output; otherwise every `event_id` or
    `*_event_id` column (a join keyed by both sides' ids); none: records without a key."""
    names = [f.name for f in schema.fields]
    if not aggregation:
        return tuple(n for n in names if n == "event_id" or n.endswith("_event_id"))
    top = next((n for n in _nodes(plan) if _name(n) == "Aggregate"), None)
    if top is None:
        return ()
    keys = {str(e.name()) for e in _seq(top.aggregateExpressions()) if not _is_aggregate_expression(e)}
    return tuple(n for n in names if n in keys)


def _plugins() -> frozenset[str]:
    return frozenset(f.name for f in load_functions())


def _parsed(spark: SparkSession, sql: str, bounds: Bounds, plugins: frozenset[str]) -> Any:
    """Steps 1 and 2 of the module doc: Spark's parsed plan of `sql`, checked; RuleError if refused."""
    check_text(sql, bounds)
    text = one_statement(sql)
    spark.conf.set(NO_SUBSTITUTION, "false")  # no ${...} substitution in this session's parser (defence in depth)
    with quiet_spark_errors():
        plan = parse_query(spark, text)
        _check_query_start(text)
        sandbox.check_parsed(spark, plan, bounds, plugins)
    return plan


def precheck(spark: SparkSession, sql: str, bounds: Bounds = BOUNDS) -> None:
    """The checks that need no view (the text, the parsed plan): a runtime runs them before it builds a rule's
    views, so a refused rule costs a parse, not a plan of the pipeline. `analyse` runs them again."""
    _parsed(spark, sql, bounds, _plugins())


def analysed(spark: SparkSession, sql: str, bounds: Bounds = BOUNDS) -> DataFrame:
    """The DataFrame of one SELECT over the registered views, or the RuleError of the sandbox, the parse or the
    analysis (module doc). Never `spark.sql`: the plan analysed is the one the sandbox checked."""
    plugins = _plugins()
    plan = _parsed(spark, sql, bounds, plugins)
    with quiet_spark_errors():
        try:
            jdf = _jvm(spark).org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan)
        except (AnalysisException, ParseException) as exc:
            raise refusal(sql, exc) from None
        sandbox.check_analysed(spark, jdf.queryExecution().analyzed(), sql, bounds, plugins)
    return DataFrame(jdf, spark)


def analyse(spark: SparkSession, sql: str, bounds: Bounds = BOUNDS) -> Analysis:
    """Analyse rule `sql` against the views registered in `spark` (views.register_views); RuleError if refused.
    The gate of the CLI and of every runtime: run `Analysis.frame`, never `spark.sql(sql)`."""
    df = analysed(spark, sql, bounds)
    plan = df._jdf.queryExecution().analyzed()
    streaming = bool(df.isStreaming)
    if not streaming:
        raise RuleError(model.NOT_STREAMING, _origin_line(plan, sql, r"\bselect\b"),
                        "a rule must read at least one of the pipeline's streaming views (events, a type view, "
                        "rule_<name>): this query reads no stream and would run once")
    aggregation = False
    for node in _nodes(plan):
        name = _name(node)
        if name == "Aggregate":
            aggregation = True
            if node.isStreaming():
                _check_aggregate(node, sql)
        elif name in ("Distinct", "Deduplicate") and node.isStreaming():
            aggregation = name == "Distinct" or aggregation
            _check_distinct(node, sql)
        elif name == "Join":
            _check_join(node, sql)
    mode = _output_mode(spark, plan, aggregation, sql) if streaming else ("update" if aggregation else "append")
    keys = key_columns(plan, df.schema, aggregation)
    if aggregation and streaming and not any(WATERMARK_KEY in df.schema[k].metadata for k in keys):
        raise RuleError(model.INVALID_COLUMN, _origin_line(plan, sql, r"\bselect\b"),
                        "an aggregation must select its window (e.g. window(event_time, '1 minute') AS window): "
                        "its records are keyed by window and group")
    return Analysis(df.schema, keys, aggregation, mode, streaming, df)
