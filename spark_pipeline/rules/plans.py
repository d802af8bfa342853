"""Reads and rebuilds Spark's analysed plans of rules through Py4J: the Catalyst side of packing rules into one query.

A rule's SQL is analysed by Spark over views of the shared stream; its plan is then a chain of projections and
filters (and, for an aggregation, one `Aggregate`) above the shared stream's own plan, the *boundary*. `collapse`
folds such a chain into expressions over the boundary's columns (Spark's own alias substitution, the one its
planner uses), so many rules can be evaluated on one row of one query. Everything here is pure plan walking: no
query runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

# Nodes a rule's chain may pass through: they only rename, select or filter.
_PASS = ("SubqueryAlias", "View")


class NotPackable(Exception):
    """The plan is not a chain of projections and filters over the boundary; the message says what it holds."""


@dataclass(frozen=True)
class Collapsed:
    """A chain folded onto the boundary: the named output expressions, the filter conditions (all must hold) and
    the alias map of the top projection (its output attribute -> expression over the boundary)."""

    projects: list[Any]
    filters: list[Any]
    aliases: Any


class Catalyst:
    """Py4J handles to the Catalyst helpers of one session's JVM."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark._jvm
        if jvm is None:
            raise RuntimeError("rules are planned on a classic (JVM) Spark session, not Spark Connect")
        self.jvm = jvm
        self._ops = getattr(getattr(jvm.org.apache.spark.sql.catalyst.planning, "PhysicalOperation$"), "MODULE$")
        self._columns = jvm.org.apache.spark.sql.classic.ExpressionUtils

    # -- Scala collections and tree nodes --------------------------------------------------------------------
    def seq(self, items: list[Any]) -> Any:
        """A Scala immutable Seq of Java objects."""
        return self.jvm.scala.jdk.javaapi.CollectionConverters.asScala(list(items)).toSeq()

    @staticmethod
    def items(seq: Any) -> list[Any]:
        return [seq.apply(i) for i in range(seq.size())]

    @staticmethod
    def name(node: Any) -> str:
        return str(node.getClass().getSimpleName())

    def children(self, node: Any) -> list[Any]:
        return self.items(node.children())

    def walk(self, node: Any) -> Iterator[Any]:
        """`node` and every node below it, parents first."""
        yield node
        for child in self.children(node):
            yield from self.walk(child)

    def output_ids(self, plan: Any) -> tuple[int, ...]:
        return tuple(int(a.exprId().id()) for a in self.items(plan.output()))

    @staticmethod
    def analyzed(df: DataFrame) -> Any:
        return df._jdf.queryExecution().analyzed()

    # -- expressions <-> columns -----------------------------------------------------------------------------
    def column(self, expr: Any) -> Column:
        """A pyspark Column holding a (resolved) Catalyst expression."""
        return Column(self._columns.column(expr))

    def expression(self, column: Column) -> Any:
        return self._columns.expression(column._jc)

    def rewrite(self, expr: Any, replace: Callable[[Any], Any | None]) -> Any:
        """`expr` with every subtree for which `replace` gives a value swapped for it (parents first)."""
        swapped = replace(expr)
        if swapped is not None:
            return swapped
        kids = self.children(expr)
        new = [self.rewrite(k, replace) for k in kids]
        if all(a is b or a.equals(b) for a, b in zip(new, kids, strict=True)):
            return expr
        return expr.withNewChildren(self.seq(new))

    def substitute(self, expr: Any, by_id: dict[int, Any]) -> Any:
        """`expr` with each attribute whose expression id `by_id` names replaced by the expression it maps to."""
        def swap(node: Any) -> Any | None:
            if self.name(node) == "AttributeReference":
                return by_id.get(int(node.exprId().id()))
            return None
        return self.rewrite(expr, swap)

    def replace_aliases(self, expr: Any, aliases: Any) -> Any:
        """`expr` with the attributes `aliases` defines replaced by their expressions."""
        return self._ops.replaceAlias(expr, aliases)

    def alias_map(self, named: list[Any]) -> Any:
        return self._ops.getAliasMap(self.seq(named))

    # -- collapsing a chain onto the boundary -----------------------------------------------------------------
    def chain(self, plan: Any, boundary: Any, stop: Callable[[Any], bool] = lambda _: False) -> tuple[list[Any], Any]:
        """The Project/Filter nodes from `plan` down to `boundary` (top first) and the node the walk ended on: the
        boundary, or the first node `stop` accepts. NotPackable for any other node on the way."""
        want = self.output_ids(boundary)
        nodes: list[Any] = []
        node = plan
        while True:
            kind = self.name(node)
            if kind not in _PASS and ((self.output_ids(node) == want and bool(node.equals(boundary))) or stop(node)):
                return nodes, node
            if kind in ("Project", "Filter"):
                nodes.append(node)
            elif kind not in _PASS:
                raise NotPackable(f"{describe(kind)} does not run in a shared real-time query")
            kids = self.children(node)
            if len(kids) != 1:
                raise NotPackable(f"{describe(kind)} does not run in a shared real-time query")
            node = kids[0]

    def fold(self, nodes: list[Any], bottom_output: list[Any]) -> Collapsed:
        """Fold Project/Filter `nodes` (top first) into expressions over the columns below them."""
        aliases = self.alias_map([])
        filters: list[Any] = []
        projects = bottom_output
        for node in reversed(nodes):
            if self.name(node) == "Filter":
                filters.append(self.replace_aliases(node.condition(), aliases))
                continue
            fields = self.items(node.projectList())
            if not all(bool(f.deterministic()) for f in fields):
                raise NotPackable("a non-deterministic expression (rand(), uuid(), ...) does not run in a shared "
                                  "real-time query")
            projects = [self._ops.replaceAliasButKeepName(f, aliases) for f in fields]
            aliases = self.alias_map(projects)
        return Collapsed(projects, filters, aliases)

    def collapse(self, plan: Any, boundary: Any) -> Collapsed:
        """The chain from `plan` down to `boundary` as expressions over the boundary's columns."""
        nodes, bottom = self.chain(plan, boundary)
        return self.fold(nodes, self.items(bottom.output()))


_DESCRIPTIONS = {
    "Aggregate": "an aggregation", "Join": "a join", "Union": "a union", "Window": "a window function (OVER)",
    "Generate": "a generator (explode, inline, ...)", "Expand": "a sliding window or grouping sets",
    "Deduplicate": "DISTINCT or dropDuplicates", "Distinct": "DISTINCT", "Sort": "ORDER BY", "GlobalLimit": "LIMIT",
    "LocalLimit": "LIMIT", "StreamingRelationV2": "another source", "StreamingRelation": "another source",
    "EventTimeWatermark": "another watermark", "Sample": "TABLESAMPLE",
}


def describe(node_kind: str) -> str:
    """What a plan node is, in the words of SQL."""
    return _DESCRIPTIONS.get(node_kind, f"a {node_kind} operation")
