"""The rule sandbox's checks on Spark's plans: what a rule may be built of, before and after Spark analyses it.

`check_parsed` walks the parsed (unresolved) plan, before any analysis: only the kinds of allowlist.PARSED_PLANS
and PARSED_EXPRESSIONS (hints, `TRANSFORM ... USING`, `IDENTIFIER(...)`, parameters, `DISTRIBUTE BY`, ...:
`forbidden_syntax`); every function a one-part name on allowlist.FUNCTIONS or an installed plugin
(`forbidden_function`; a name Spark does not know is left to the analysis: `unknown_function`); every relation
one of the session's temp views (the pipeline's views) or a CTE of the query (``text.`/path` ``, catalog
tables, table-valued functions such as `range` or `read_files`: `forbidden_relation`); windows and session
windows of bounded shape; at most Bounds.max_relations view references, max_depth deep and max_nodes nodes.

`check_analysed` walks the analysed plan (sizes.SizeCheck): only the views as relations, none of
allowlist.ANALYSED_DENIED however it was reached, bounded patterns, values, rows and intervals.

analyse.py calls both, around Spark's analysis of the very plan checked here; it is the one gate of the CLI and of
every runtime (docs/rules.md, "What a rule may call").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession

from spark_pipeline.rules import model
from spark_pipeline.rules.allowlist import DENIED, FUNCTIONS, PARSED_EXPRESSIONS, PARSED_PLANS, Bounds
from spark_pipeline.rules.model import RuleError
from spark_pipeline.rules.sizes import SizeCheck, kind

_SUBQUERIES = {"ScalarSubquery", "Exists", "ListQuery", "LateralSubquery", "InSubquery"}
_SYNTAX_REASONS = {
    "UnresolvedHint": "hints are not allowed in a rule (they change how Spark plans and partitions it)",
    "ScriptTransformation": "TRANSFORM ... USING runs a program on the host",
    "ExpressionWithUnresolvedIdentifier": "IDENTIFIER(...) names a function or table by a string",
    "PlanWithUnresolvedIdentifier": "IDENTIFIER(...) names a function or table by a string",
    "RepartitionByExpression": "DISTRIBUTE BY / CLUSTER BY repartition the stream",
    "NamedParameter": "a rule has no parameters", "PosParameter": "a rule has no parameters",
    "UnresolvedExecuteImmediate": "EXECUTE IMMEDIATE runs a statement given as a string",
}
_KNOWN: frozenset[str] | None = None
_RELATIONS = {"UnresolvedTableValuedFunction", "UnresolvedTVFAliases", "UnresolvedInlineTable"}


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _kids(node: Any) -> list[Any]:
    return _seq(node.children())


def origin_line(node: Any) -> int | None:
    """The 1-based line Spark recorded for a plan node or expression (None: unknown)."""
    try:
        line = node.origin().line()
        return int(line.get()) if line.isDefined() else None
    except Exception:
        return None


def temp_views(spark: SparkSession) -> frozenset[str]:
    """The names of the session's temp views (the pipeline's views: views.register_views), lower case."""
    names = spark._jsparkSession.sessionState().catalog().getTempViewNames()
    return frozenset(str(n).lower() for n in _seq(names))


def _cte_names(node: Any) -> set[str]:
    if kind(node) != "UnresolvedWith":
        return set()
    return {str(pair._1()).lower() for pair in _seq(node.cteRelations())}


class ParsedCheck:
    """One walk of a parsed plan (see the module doc)."""

    def __init__(self, spark: SparkSession, bounds: Bounds, views: frozenset[str], plugins: frozenset[str]) -> None:
        if spark._jvm is None:
            raise RuntimeError("rules are analysed on a classic (JVM) Spark session, not Spark Connect")
        self.jvm = spark._jvm
        self.bounds, self.views, self.plugins = bounds, views, plugins
        self.ctes: set[str] = set()
        self.relations = 0
        self.nodes = 0

    def walk(self, root: Any) -> Iterator[tuple[Any, bool, int]]:
        """(node, is a plan, depth) of every plan node and expression, subqueries and CTE bodies included."""
        stack: list[tuple[Any, bool, int]] = [(root, True, 1)]
        while stack:
            node, is_plan, depth = stack.pop()
            self.nodes += 1
            if depth > self.bounds.max_depth or self.nodes > self.bounds.max_nodes:
                what = f"nested over {self.bounds.max_depth} deep" if depth > self.bounds.max_depth else \
                    f"over {self.bounds.max_nodes} plan and expression nodes"
                raise RuleError(model.TOO_COMPLEX, origin_line(node), f"the query is {what}")
            yield node, is_plan, depth
            name = kind(node)
            if is_plan:
                self.ctes |= _cte_names(node)
                stack.extend((e, False, depth + 1) for e in _seq(node.expressions()))
                if name == "UnresolvedWith":
                    stack.extend((pair._2(), True, depth + 1) for pair in _seq(node.cteRelations()))
            elif name in _SUBQUERIES and name != "InSubquery":
                stack.append((node.plan(), True, depth + 1))
            stack.extend((k, is_plan, depth + 1) for k in _kids(node))

    def check(self, plan: Any) -> None:
        for node, is_plan, _ in self.walk(plan):
            name = kind(node)
            if is_plan:
                self.plan_node(node, name)
            else:
                self.expression(node, name)
        if self.relations > self.bounds.max_relations:
            raise RuleError(model.TOO_COMPLEX, None, f"{self.relations} view references, over "
                                                     f"{self.bounds.max_relations} (each reads its topic)")

    def plan_node(self, node: Any, name: str) -> None:
        if name == "UnresolvedRelation":
            self.relation(node)
        elif name in _RELATIONS:
            raise RuleError(model.FORBIDDEN_RELATION, origin_line(node),
                            "table-valued functions and inline tables other than VALUES are not allowed in a rule")
        elif name not in PARSED_PLANS:
            reason = _SYNTAX_REASONS.get(name, f"{name} is not allowed in a rule")
            raise RuleError(model.FORBIDDEN_SYNTAX, origin_line(node), reason)

    def relation(self, node: Any) -> None:
        parts = [str(p) for p in _seq(node.multipartIdentifier())]
        shown = ".".join(parts)
        if len(parts) != 1 or not node.options().isEmpty():
            raise RuleError(model.FORBIDDEN_RELATION, origin_line(node),
                            f"{shown}: a rule reads only the pipeline's views (events, one per event type, "
                            "rule_<name>), not files, paths, URLs or tables")
        name = parts[0].lower()
        if name in self.ctes:
            return
        self.relations += 1
        if name not in self.views and "." in name:
            raise RuleError(model.FORBIDDEN_RELATION, origin_line(node), f"{shown} is not one of the pipeline's views")

    def expression(self, node: Any, name: str) -> None:
        if name == "UnresolvedFunction":
            parts = [str(p) for p in _seq(node.nameParts())]
            self.function(node, parts)
        elif name == "UnresolvedGenerator":
            ident = node.name()
            database = ident.database()
            self.function(node, ([str(database.get())] if database.isDefined() else []) + [str(ident.funcName())])
        elif name not in PARSED_EXPRESSIONS:
            reason = _SYNTAX_REASONS.get(name, f"{name} is not allowed in a rule")
            raise RuleError(model.FORBIDDEN_SYNTAX, origin_line(node), reason)

    def function(self, node: Any, parts: list[str]) -> None:
        shown = ".".join(parts)
        if len(parts) != 1:
            raise RuleError(model.FORBIDDEN_FUNCTION, origin_line(node),
                            f"{shown}: call functions by their plain name")
        name = parts[0].lower()
        if name in self.plugins:
            return
        if name in FUNCTIONS:
            if name in ("window", "session_window"):
                self.window(node, name)
            return
        if name in DENIED or name in self.known():  # unknown names are the analysis's `unknown_function`
            reason = DENIED.get(name, "it is not on the rule allowlist")
            raise RuleError(model.FORBIDDEN_FUNCTION, origin_line(node), f"function {name} is not allowed: {reason}")

    def known(self) -> frozenset[str]:
        """The names of Spark's built-in scalar, aggregate, generator and table-valued functions (listed once)."""
        global _KNOWN  # noqa: PLW0603 - Spark's built-ins do not change within a process
        if _KNOWN is None:
            analysis = self.jvm.org.apache.spark.sql.catalyst.analysis
            names: set[str] = set()
            for registry in (analysis.FunctionRegistry.builtin(), analysis.TableFunctionRegistry.builtin()):
                listed = registry.listFunction()
                names |= {str(i.funcName()).lower() for i in _seq(listed)}
            _KNOWN = frozenset(names)
        return _KNOWN

    def window(self, node: Any, name: str) -> None:
        """window(time, length[, slide[, start]]), session_window(time, gap): bounded state and rows per event."""
        args = _seq(node.arguments())
        seconds = [self.duration(a) for a in args[1:3]]
        b = self.bounds
        line = origin_line(node)
        if name == "session_window":
            if seconds and seconds[0] is not None and seconds[0] > b.max_session_gap_s:
                raise RuleError(model.TOO_COMPLEX, line, f"a session gap over {b.max_session_gap_s} s")
            return
        length = seconds[0] if seconds else None
        if length is not None and length > b.max_window_s:
            raise RuleError(model.TOO_COMPLEX, line, f"a window over {b.max_window_s // 86400} days")
        slide = seconds[1] if len(seconds) > 1 else None
        if length and slide is not None and (slide <= 0 or length / slide > b.max_windows_per_event):
            raise RuleError(model.TOO_COMPLEX, line, f"windows of {length:g} s sliding by {slide:g} s: over "
                                                     f"{b.max_windows_per_event} windows per event")

    def duration(self, arg: Any) -> float | None:
        """A window argument's length in seconds (None: not a literal Spark reads; its analysis then says why)."""
        if kind(arg) != "Literal":
            return None
        try:
            return int(self.jvm.org.apache.spark.sql.catalyst.expressions.TimeWindow.parseExpression(arg)) / 1e6
        except Exception:
            return None


def check_parsed(spark: SparkSession, plan: Any, bounds: Bounds, plugins: frozenset[str]) -> None:
    """Refuse (RuleError) a parsed plan that is not built of the allowlist's kinds, functions and relations."""
    ParsedCheck(spark, bounds, temp_views(spark), plugins).check(plan)


def check_analysed(spark: SparkSession, plan: Any, sql: str, bounds: Bounds, plugins: frozenset[str]) -> None:
    """Refuse (RuleError) an analysed plan with another relation than the views, a denied kind, or unbounded
    patterns, sizes, rows or intervals."""
    SizeCheck(sql, bounds, plugins, temp_views(spark), origin_line).check_plan(plan)
