"""Upper bounds of a rule's values, expression by expression, on Spark's analysed plan (py4j): the size model.

A size is an upper bound `sum(k_i * |source_i|) + c`: the sources are the view columns a value is computed from
(together at most one event: |source| sums to at most the event's size, so the bound is max(k_i) events + c
bytes); `amplification` = max(k_i). `concat(a, a)` is 2 events, `repeat(a, 100)` 100, `lpad(a, 50)` 200 bytes,
`split(a, ',')` 2 (one count per element). A product of two sizes that both grow with the event
(`transform(split(a, ''), x -> a)`) grows with its square and is refused; so is any value over the bounds
(allowlist.Bounds): `too_complex`, with the line of the expression. The walk is bottom-up, so a constant is
evaluated (its count, its pattern) only once every part of it has passed.

Each expression kind costs by its model below; the default, for every other allowed function, is the sum of its
arguments (fixed-width results: a small constant). The walk also runs the pattern checks (patterns.py) and
refuses the resolved kinds in allowlist.ANALYSED_DENIED. sizes.py walks the plans around the expressions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from py4j.java_gateway import JavaObject  # type: ignore[import-untyped]

from spark_pipeline.rules import model, patterns
from spark_pipeline.rules.allowlist import ANALYSED_DENIED, Bounds
from spark_pipeline.rules.model import RuleError

SMALL = 16.0  # bytes of a fixed-width value


@dataclass(frozen=True)
class Size:
    """An upper bound: per source id its coefficient, plus a constant (bytes or rows)."""

    per: dict[int, float] = field(default_factory=dict)
    const: float = 0.0

    @property
    def amplification(self) -> float:
        return max(self.per.values(), default=0.0)


ONE_ROW = Size(const=1.0)


def plus(*sizes: Size) -> Size:
    per: dict[int, float] = {}
    for s in sizes:
        for k, v in s.per.items():
            per[k] = per.get(k, 0.0) + v
    return Size(per, sum(s.const for s in sizes))


def most(*sizes: Size) -> Size:
    per: dict[int, float] = {}
    for s in sizes:
        for k, v in s.per.items():
            per[k] = max(per.get(k, 0.0), v)
    return Size(per, max((s.const for s in sizes), default=0.0))


def scaled(s: Size, k: float) -> Size:
    return Size({i: v * k for i, v in s.per.items()}, s.const * k)


class TooBig(Exception):
    """A size grows with the square of the event (the caller adds the line)."""


def times(a: Size, b: Size) -> Size:
    """a * b; TooBig when both grow with the event."""
    if a.per and b.per:
        raise TooBig("a size that grows with the square of the event's size")
    if a.per:
        return plus(scaled(a, b.const), Size(const=0.0))
    return scaled(b, a.const) if b.per else Size(const=a.const * b.const)


def seq_of(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def kids_of(node: Any) -> list[Any]:
    return seq_of(node.children())


def kind(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def _type(expr: Any) -> str:
    """The simple class name of an expression's data type ("" when it has none, e.g. a window frame)."""
    try:
        return str(expr.dataType().getClass().getSimpleName())
    except Exception:
        return ""


_FIXED = {"ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType", "BooleanType",
          "DateType", "TimestampType", "TimestampNTZType", "DayTimeIntervalType", "YearMonthIntervalType",
          "CalendarIntervalType", "NullType", "TimeType"}
# Results that are one of their arguments (a branch, the first non-null, the largest).
_ONE_OF = {"If", "CaseWhen", "Coalesce", "Nvl", "Nvl2", "NullIf", "NaNvl", "Greatest", "Least", "Elt", "IfNull",
           "KnownNullable", "KnownNotNull", "With", "CommonExpressionRef"}
# Results at most k times their arguments (escaping, encodings, case mappings, printing a collection).
_FACTOR = {"StructsToJson": 6, "StructsToCsv": 2, "UrlEncode": 3, "Base64": 2, "Base32": 2, "Hex": 2, "Quote": 2,
           "Encode": 4, "Decode": 3, "StringTranslate": 4, "Upper": 3, "Lower": 3, "InitCap": 3, "Mask": 4,
           "MakeValidUTF8": 3, "TryValidateUTF8": 3, "ValidateUTF8": 3, "RegExpExtractAll": 2, "StringSplit": 2,
           "StringToMap": 2, "Sentences": 2, "Cast": 3, "ToPrettyString": 3}
# Where the patterns are: argument indexes checked as Java regexes / LIKE patterns.
_REGEX_ARGS = {"RLike": (1,), "RegExpExtract": (1,), "RegExpExtractAll": (1,), "RegExpInStr": (1,),
               "RegExpSubStr": (1,), "RegExpCount": (1,), "RegExpReplace": (1,), "StringSplit": (1,),
               "StringToMap": (1, 2)}
_LIKE_ARGS = {"Like": (1,), "ILike": (1,)}
_MULTI_LIKE = {"LikeAny", "LikeAll", "NotLikeAny", "NotLikeAll"}
_HIGHER_ORDER = {"ArrayTransform", "ZipWith", "MapZipWith", "TransformKeys", "TransformValues", "ArrayFilter",
                 "MapFilter", "ArraySort", "ArrayExists", "ArrayForAll"}
_SUBQUERIES = {"ScalarSubquery", "Exists", "ListQuery", "LateralSubquery"}


class ExpressionCosts:
    """The size of each expression of one rule's analysed plan (`expr`); sizes.SizeCheck walks the plan."""

    def __init__(self, sql: str, bounds: Bounds, plugins: frozenset[str], views: frozenset[str],
                 line_of: Callable[[Any], int | None]) -> None:
        self.sql, self.bounds, self.plugins, self.views, self.line_of = sql, bounds, plugins, views, line_of
        self.env: dict[int, Size] = {}
        self.ctes: dict[int, tuple[list[Size], Size]] = {}

    def plan(self, node: Any) -> Size:
        """The rows per event of a plan (a subquery's), filling `env` with its columns' sizes: sizes.SizeCheck."""
        raise NotImplementedError

    # -- errors and constants ------------------------------------------------------------------------------------
    def refuse(self, node: Any, message: str, code: str = model.TOO_COMPLEX) -> RuleError:
        return RuleError(code, self.line_of(node), message)

    def constant(self, expr: Any, what: str) -> Any:
        """The value of a constant argument (already checked: it is a part of a checked expression)."""
        if not expr.foldable():
            raise self.refuse(expr, f"{what} must be a constant")
        value = expr.eval(None)
        if isinstance(value, JavaObject):  # UTF8String, Decimal, CalendarInterval, ...
            return str(value.toString())
        return value

    def count(self, expr: Any, what: str) -> int:
        value = self.constant(expr, what)
        try:
            n = abs(int(value or 0))
        except (TypeError, ValueError):
            raise self.refuse(expr, f"{what} must be a constant number") from None
        if n > self.bounds.max_count:
            raise self.refuse(expr, f"{what} is {n}, over {self.bounds.max_count}")
        return n

    def bounded(self, node: Any, size: Size, what: str = "this value") -> Size:
        b = self.bounds
        if size.amplification > b.max_amplification or size.const > b.max_constant_bytes:
            raise self.refuse(node, f"{what} may grow to {size.amplification:g}x an event + {size.const:.0f} bytes, "
                                    f"over {b.max_amplification:g}x + {b.max_constant_bytes} bytes")
        return size

    # -- expressions ---------------------------------------------------------------------------------------------
    def expr(self, e: Any) -> Size:
        name = kind(e)
        if name in ANALYSED_DENIED or (name == "PythonUDF" and str(e.name()) not in self.plugins):
            raise self.refuse(e, f"{name} is not allowed in a rule", model.FORBIDDEN_FUNCTION)
        if name in _SUBQUERIES:
            self.plan(e.plan())
            kids = [k for k in kids_of(e)]  # outer references, if any
            return self.bounded(e, plus(*[self.expr(k) for k in kids], Size(const=SMALL)))
        try:
            if name in _HIGHER_ORDER:
                return self.bounded(e, self.higher_order(e, name))
            kids = kids_of(e)
            sizes = [self.expr(k) for k in kids]
            self.patterns(e, name, kids)
            size = self.model(e, name, kids, sizes)
        except TooBig as exc:
            raise self.refuse(e, str(exc)) from None
        if name != "Literal" and _type(e) in _FIXED:
            size = Size(const=SMALL)
        return self.bounded(e, size)

    def patterns(self, e: Any, name: str, kids: list[Any]) -> None:
        for i in _REGEX_ARGS.get(name, ()):
            if i < len(kids) and (why := patterns.check_regex(str(self.constant(kids[i], "a regex pattern")))):
                raise self.refuse(e, why)
        for i in _LIKE_ARGS.get(name, ()):
            if i < len(kids):
                escape = str(e.escapeChar())
                if why := patterns.check_like(str(self.constant(kids[i], "a LIKE pattern")), escape):
                    raise self.refuse(e, why)
        if name in _MULTI_LIKE:
            for p in seq_of(e.patterns()):
                if p is not None and (why := patterns.check_like(str(p.toString()))):
                    raise self.refuse(e, why)

    def model(self, e: Any, name: str, kids: list[Any], sizes: list[Size]) -> Size:
        if name in ("AttributeReference", "OuterReference", "NamedLambdaVariable"):
            return self.env.get(int(e.exprId().id()), Size({int(e.exprId().id()): 1.0}))
        if name == "Literal":
            return self.literal(e)
        if name in _ONE_OF:
            return most(*sizes)
        if name in _FACTOR:
            return scaled(plus(*sizes), _FACTOR[name])
        if name == "StringRepeat":
            return scaled(sizes[0], self.count(kids[1], "repeat's count"))
        if name == "ArrayRepeat":
            return scaled(plus(sizes[0], ONE_ROW), self.count(kids[1], "array_repeat's count"))
        if name == "Sequence":
            return Size(const=9.0 * self.sequence_length(e, kids))
        if name in ("StringSpace", "RandStr"):
            return Size(const=4.0 * self.count(kids[0], f"{name}'s length"))
        if name in ("StringLPad", "StringRPad", "BinaryPad", "BinaryLPad", "BinaryRPad"):
            return Size(const=4.0 * self.count(kids[1], "the pad length") + SMALL)
        if name == "ArrayInsert":
            return plus(sizes[0], sizes[2], Size(const=float(self.count(kids[1], "array_insert's position"))))
        if name in ("StringReplace", "RegExpReplace"):
            return times(sizes[0], plus(sizes[2], ONE_ROW))
        if name == "FormatString":
            return self.format_string(e, kids, sizes)
        if name == "ConcatWs":
            return plus(*sizes, times(plus(*sizes[1:], Size(const=float(len(sizes)))), sizes[0]))
        if name == "ArrayJoin":
            return plus(sizes[0], times(plus(sizes[0], ONE_ROW), plus(*sizes[1:])))
        if name in ("ApproximatePercentile", "HistogramNumeric", "HyperLogLogPlusPlus", "HllSketchAgg"):
            self.aggregate_parameters(e, name, kids)
        return plus(*sizes)

    def literal(self, e: Any) -> Size:
        dtype = _type(e)
        value = e.value()
        if dtype in ("DayTimeIntervalType", "YearMonthIntervalType", "CalendarIntervalType") and value is not None:
            seconds = self.interval_seconds(dtype, value)
            if seconds > self.bounds.max_interval_s:
                raise self.refuse(e, f"an interval of {seconds / 86400:.0f} days, over "
                                     f"{self.bounds.max_interval_s // 86400}")
        if value is None or dtype in _FIXED:
            return Size(const=SMALL)
        if dtype == "StringType":
            return Size(const=float(value.numBytes()))
        if isinstance(value, (bytes, bytearray)):
            return Size(const=float(len(value)))
        return Size(const=float(len(str(e.toString()))))

    @staticmethod
    def interval_seconds(dtype: str, value: Any) -> float:
        if dtype == "DayTimeIntervalType":
            return abs(int(value)) / 1e6
        if dtype == "YearMonthIntervalType":
            return abs(int(value)) * 31 * 86400.0
        months, days, micros = abs(int(value.months)), abs(int(value.days)), abs(int(value.microseconds))
        return months * 31 * 86400.0 + days * 86400.0 + micros / 1e6

    def sequence_length(self, e: Any, kids: list[Any]) -> int:
        start, stop = (self.constant(k, "sequence's bounds") for k in kids[:2])
        step_expr = e.stepOpt()
        step = self.constant(step_expr.get(), "sequence's step") if step_expr.isDefined() else None
        if isinstance(start, int) and isinstance(stop, int):
            n = abs(stop - start) // max(1, abs(int(step or 1))) + 1
        else:  # dates or timestamps: count by the step's length in seconds (a month counted as 28 days)
            span = abs(self.as_seconds(stop) - self.as_seconds(start))
            unit = self.step_seconds(step) if step is not None else 86400.0
            n = int(span // max(unit, 1e-6)) + 1
        if n > self.bounds.max_count:
            raise self.refuse(e, f"sequence makes {n} elements, over {self.bounds.max_count}")
        return n

    @staticmethod
    def as_seconds(value: Any) -> float:
        """A date (days) or timestamp (micros) constant as seconds."""
        number = int(value) if not isinstance(value, str) else 0
        return number * 86400.0 if abs(number) < 10**7 else number / 1e6

    def step_seconds(self, step: Any) -> float:
        if isinstance(step, int):
            return abs(step) / 1e6
        text = str(step)  # a CalendarInterval's text, e.g. "1 months 2 days"
        seconds = 0.0
        for amount, unit in zip(text.split()[::2], text.split()[1::2], strict=False):
            per = {"months": 28 * 86400.0, "month": 28 * 86400.0, "days": 86400.0, "day": 86400.0}.get(unit, 1e-6)
            seconds += abs(float(amount)) * per
        return seconds

    def format_string(self, e: Any, kids: list[Any], sizes: list[Size]) -> Size:
        fmt = str(self.constant(kids[0], "format_string's format"))
        widths = [int(w) for w in re.findall(r"%[-#+ 0,(<]*(\d+)", fmt)]
        widths += [int(p) for p in re.findall(r"\.(\d+)", fmt)]
        if any(w > self.bounds.max_count for w in widths):
            raise self.refuse(e, f"a width or precision over {self.bounds.max_count} in the format")
        uses = max(1, fmt.count("%"))
        return plus(scaled(plus(*sizes[1:]), uses), Size(const=float(len(fmt) + sum(widths)) + SMALL))

    def aggregate_parameters(self, e: Any, name: str, kids: list[Any]) -> None:
        b = self.bounds
        if name == "ApproximatePercentile" and len(kids) > 2:
            accuracy = int(self.constant(kids[2], "approx_percentile's accuracy"))
            if accuracy > b.max_accuracy:
                raise self.refuse(e, f"approx_percentile's accuracy {accuracy} is over {b.max_accuracy}")
        elif name == "HistogramNumeric":
            self.count(kids[1], "histogram_numeric's bins")
        elif name == "HyperLogLogPlusPlus" and float(e.relativeSD()) < b.min_rsd:
            raise self.refuse(e, f"approx_count_distinct's relative error {float(e.relativeSD())} is under {b.min_rsd}")
        elif name == "HllSketchAgg" and len(kids) > 1:
            lg_k = int(self.constant(kids[1], "hll_sketch_agg's lgConfigK"))
            if lg_k > b.max_hll_lg_k:
                raise self.refuse(e, f"hll_sketch_agg's lgConfigK {lg_k} is over {b.max_hll_lg_k}")

    def higher_order(self, e: Any, name: str) -> Size:
        """transform(arr, x -> f(x)) and its family: each lambda variable is at most its collection; the result
        at most f's own part times the collection's count, plus f's use of the variables."""
        kids = kids_of(e)
        functions = [k for k in kids if kind(k) == "LambdaFunction"]
        inputs = [k for k in kids if kind(k) != "LambdaFunction"]
        collection = plus(*[self.expr(k) for k in inputs])
        result = collection
        for fn in functions:
            variables = {int(v.exprId().id()) for v in seq_of(fn.arguments())}
            for v in variables:
                self.env[v] = Size({v: 1.0})
            body = self.expr(fn.function())
            own = Size({k: c for k, c in body.per.items() if k not in variables}, body.const)
            uses = max((body.per.get(v, 0.0) for v in variables), default=0.0)
            per_element = plus(scaled(collection, uses), times(plus(collection, ONE_ROW), own))
            if name in ("ArrayTransform", "ZipWith", "MapZipWith", "TransformKeys", "TransformValues"):
                result = plus(result, per_element)
        return result
