"""Walks a rule's analysed plan (py4j) for the sandbox: only the views as relations, and bounded rows per event.

The leaves must be the session's temp views (the pipeline's views, not looked into), the query's CTEs, `VALUES` or
a one-row relation; every other node kind outside allowlist.ANALYSED_PLANS is refused (`forbidden_relation` for a
leaf, `forbidden_syntax` otherwise). Each node's output columns get the size of the expression that makes them
(costs.py), so a value's bound follows it through projections, CTEs, unions, joins and aggregations. Rows per
event grow only through generators (`explode` and co: by the size of what they explode) and `Expand` (sliding
windows: by the number of windows); two generators over the event's data multiply to its square and are refused;
the total must stay within Bounds.max_amplification times the event plus Bounds.max_constant_rows.
"""

from __future__ import annotations

from typing import Any

from spark_pipeline.rules import model
from spark_pipeline.rules.allowlist import ANALYSED_PLANS
from spark_pipeline.rules.costs import (
    ONE_ROW,
    ExpressionCosts,
    Size,
    TooBig,
    kids_of,
    kind,
    most,
    plus,
    scaled,
    seq_of,
    times,
)

__all__ = ["SizeCheck", "kind"]


class SizeCheck(ExpressionCosts):
    """One walk of an analysed plan: `check_plan(plan)` raises RuleError (too_complex, forbidden_*) or returns."""

    def check_plan(self, plan: Any) -> None:
        rows = self.plan(plan)
        b = self.bounds
        if rows.amplification > b.max_amplification or rows.const > b.max_constant_rows:
            raise self.refuse(plan, f"one event may make {rows.amplification:g}x its size + {rows.const:.0f} rows, "
                                    f"over {b.max_amplification:g}x + {b.max_constant_rows}")

    def outputs(self, node: Any) -> list[Any]:
        return seq_of(node.output())

    def plan(self, node: Any) -> Size:
        name = kind(node)
        if name == "View":
            ident = node.desc().identifier()
            if str(ident.table()).lower() not in self.views:
                raise self.refuse(node, f"view {ident.table()} is not one of the pipeline's views",
                                  model.FORBIDDEN_RELATION)
            for a in self.outputs(node):
                self.env.setdefault(int(a.exprId().id()), Size({int(a.exprId().id()): 1.0}))
            return ONE_ROW
        if name not in ANALYSED_PLANS:
            leaf = node.children().size() == 0
            raise self.refuse(node, f"{'relation' if leaf else 'plan node'} {name} is not allowed in a rule",
                              model.FORBIDDEN_RELATION if leaf else model.FORBIDDEN_SYNTAX)
        if name == "WithCTE":
            for d in seq_of(node.cteDefs()):
                self.plan(d)
            return self.plan(node.plan())
        if name == "CTERelationRef":
            sizes, rows = self.ctes.get(int(node.cteId()), ([], ONE_ROW))
            for a, s in zip(self.outputs(node), sizes, strict=False):
                self.env[int(a.exprId().id())] = s
            return rows
        if name in ("LocalRelation", "OneRowRelation"):
            for a in self.outputs(node):
                self.env[int(a.exprId().id())] = Size(const=float(len(self.sql.encode())))
            return ONE_ROW
        child_rows = [self.plan(c) for c in kids_of(node)]
        base = most(*child_rows) if name not in ("Join", "LateralJoin") else plus(*child_rows)
        if name == "CTERelationDef":
            self.ctes[int(node.id())] = ([self.env.get(int(a.exprId().id()), Size()) for a in self.outputs(node)],
                                         base)
            return base
        if name in ("Project", "Aggregate", "Window"):
            named = seq_of(node.projectList() if name == "Project" else node.aggregateExpressions()
                         if name == "Aggregate" else node.windowExpressions())
            others = [] if name == "Project" else seq_of(node.groupingExpressions()) if name == "Aggregate" else [
                *seq_of(node.partitionSpec()), *seq_of(node.orderSpec())]
            for e in others:
                self.expr(e)
            for e in named:
                size = self.expr(e)
                if kind(e) in ("Alias", "AttributeReference"):
                    self.env[int(e.exprId().id())] = size
            return base
        if name == "Generate":
            generator = node.generator()
            produced = self.expr(generator)
            for a in seq_of(node.generatorOutput()):
                self.env[int(a.exprId().id())] = produced
            count = Size(const=float(self.count(kids_of(generator)[0], "stack's row count"))) \
                if kind(generator) == "Stack" else plus(produced, ONE_ROW)
            try:
                return times(base, count)
            except TooBig:
                raise self.refuse(node, "generators whose rows multiply: the rows grow with the square of the "
                                        "event (one generator over the event's data per rule)") from None
        if name == "Expand":
            projections = seq_of(node.projections())
            if len(projections) > self.bounds.max_windows_per_event:
                raise self.refuse(node, f"{len(projections)} rows per input row, over "
                                        f"{self.bounds.max_windows_per_event}")
            columns: list[list[Size]] = []
            for p in projections:
                columns.append([self.expr(x) for x in seq_of(p)])
            for i, a in enumerate(self.outputs(node)):
                self.env[int(a.exprId().id())] = most(*[c[i] for c in columns if i < len(c)])
            return scaled(base, float(len(projections)))
        for e in seq_of(node.expressions()):
            self.expr(e)
        if name in ("Union", "Intersect", "Except"):
            outs = [self.outputs(c) for c in kids_of(node)]
            for i, a in enumerate(self.outputs(node)):
                self.env[int(a.exprId().id())] = most(*[self.env.get(int(o[i].exprId().id()), Size())
                                                        for o in outs if i < len(o)])
            return plus(*child_rows) if name == "Union" else base
        return base
