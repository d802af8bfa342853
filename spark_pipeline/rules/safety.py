"""Says whether an expression can run in a query shared by many rules: in the JVM, deterministic, never failing.

A shared query fails as a whole: one rule's CAST of a malformed string under ANSI, an integer overflow or a
division by zero would stop every rule in it. `concern` walks an expression (Spark's analysed Catalyst tree) and
returns why it cannot be shared, or None: every node must be in SAFE, or a conditional case of `_risk` (a widening
cast, floating-point arithmetic, a division by a non-zero literal, a literal pattern that compiles, ...). Python
(plugin functions, the pipeline's Python lookups), the current time (fixed for a real-time batch) and
non-deterministic functions are refused too. An unknown function is refused: the rule then runs on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from spark_pipeline.rules.plans import Catalyst

# Expressions that never throw on any input (Spark's simple class names). Conditional ones are in `_risk`.
SAFE = frozenset({
    "AttributeReference", "Literal", "Alias", "BoundReference", "CreateNamedStruct", "GetStructField",
    "GetArrayStructFields", "CreateArray", "CreateMap", "GetMapValue", "MapKeys", "MapValues", "Size",
    "ArrayContains", "ArraysOverlap", "ArrayDistinct", "ArrayJoin", "ArrayMax", "ArrayMin", "ArrayPosition",
    "SortArray", "ArrayFilter", "ArrayTransform", "ArrayExists", "ArrayForAll", "LambdaFunction",
    "NamedLambdaVariable", "MapFilter", "MapFromEntries", "IsNull", "IsNotNull", "Coalesce", "NaNvl", "IsNaN",
    "AtLeastNNonNulls", "KnownNotNull", "KnownNullable", "KnownFloatingPointNormalized", "NormalizeNaNAndZero",
    "And", "Or", "Not",
    "EqualTo", "EqualNullSafe", "LessThan", "LessThanOrEqual", "GreaterThan", "GreaterThanOrEqual", "In", "InSet",
    "If", "CaseWhen", "Greatest", "Least", "Upper", "Lower", "Length", "OctetLength", "BitLength", "StartsWith",
    "EndsWith", "Contains", "Concat", "ConcatWs", "Substring", "SubstringIndex", "StringTrim", "StringTrimLeft",
    "StringTrimRight", "StringTrimBoth", "StringReplace", "StringTranslate", "StringLPad", "StringRPad",
    "StringInstr", "StringLocate", "InitCap", "Reverse", "Md5", "Sha1", "Sha2", "Crc32", "Base64", "Hex", "Ascii",
    "Chr", "Levenshtein", "SoundEx", "Empty2Null", "Murmur3Hash", "XxHash64", "Sqrt", "Cbrt", "Exp", "Expm1",
    "Log", "Log10", "Log2", "Log1p", "Logarithm", "Pow", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Atan2",
    "Sinh", "Cosh", "Tanh", "ToDegrees", "ToRadians", "Signum", "Rint", "Hypot", "Floor", "Ceil", "UnaryPositive",
    "UnixMillis", "UnixMicros", "UnixSeconds", "UnixDate", "Hour", "Minute", "Second", "DayOfMonth", "DayOfWeek",
    "WeekDay", "DayOfYear", "Month", "Quarter", "Year", "WeekOfYear", "TruncTimestamp", "TruncDate", "DateDiff",
    "TimeAdd", "DatetimeSub", "PreciseTimestampConversion", "StructsToJson", "GetJsonObject", "ParseToDate",
})
_NUMBERS = frozenset({"byte", "short", "integer", "long", "float", "double", "decimal"})
_ARITHMETIC = frozenset({"Add", "Subtract", "Multiply", "UnaryMinus", "Abs"})
_DIVISION = frozenset({"Divide", "Remainder", "IntegralDivide", "Pmod"})
_REGEX = frozenset({"RLike", "RegExpExtract", "RegExpExtractAll", "RegExpReplace", "RegExpCount", "RegExpSubStr",
                    "RegExpInStr", "StringSplit"})
_CURRENT_TIME = frozenset({"CurrentTimestamp", "Now", "CurrentDate", "LocalTimestamp", "CurrentTimeZone"})
# The pipeline's Python UDFs behind view columns (enrich.py), named for people.
_PYTHON_COLUMNS = {"_user_agents": "browser/os/device (user-agent parsing)", "_countries": "country (IP lookup)"}


# Spark's own window() bounds: microsecond arithmetic on the event time inside these conversions, which cannot
# overflow for any timestamp Spark represents.
_WINDOW_BOUNDS = "PreciseTimestampConversion"
_BOUNDS_ARITHMETIC = frozenset({"Add", "Subtract", "Multiply", "Remainder", "Pmod", "Divide", "IntegralDivide"})


def _nodes(cat: Catalyst, expr: Any, skip: tuple[str, ...], bounds: bool = False
           ) -> Iterator[tuple[Any, str, bool]]:
    """Each node with its kind and whether it is inside window() bounds (`_WINDOW_BOUNDS`)."""
    kind = cat.name(expr)
    if kind in skip:
        return
    yield expr, kind, bounds
    for child in cat.children(expr):
        yield from _nodes(cat, child, skip, bounds or kind == _WINDOW_BOUNDS)


def concern(cat: Catalyst, expr: Any, skip: tuple[str, ...] = ()) -> str | None:
    """Why `expr` cannot run in a shared real-time query (None: it can); subtrees of the kinds `skip` are not
    looked at (the caller checks them)."""
    replaceable = cat.jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.expressions.RuntimeReplaceable")
    for node, kind, in_bounds in _nodes(cat, expr, skip):
        if kind == "PythonUDF":
            name = str(node.name())
            what = _PYTHON_COLUMNS.get(name)
            return f"reads {what}, computed in Python" if what else f"calls the Python function {name}"
        if kind in ("SessionWindow", "MergingSessions"):
            return "session windows do not run in real-time mode"
        if kind in _CURRENT_TIME:
            return f"{kind} is fixed for a whole real-time batch: runs in micro-batches"
        if not bool(node.deterministic()):
            return f"{kind} is not deterministic"
        if kind in SAFE or replaceable.isInstance(node) or (in_bounds and kind in _BOUNDS_ARITHMETIC):
            continue
        if reason := _risk(cat, node, kind):
            return reason
    return None


def _eval_mode(node: Any) -> str:
    try:
        return str(node.evalMode().toString())
    except Exception:  # no evalMode on this node
        return ""


def _literal(node: Any) -> Any:
    """The value of a constant child (a literal, or a cast of one: Spark folds them when it plans); None when it is
    not constant or is null."""
    if not bool(node.foldable()):
        return None
    try:
        return node.eval(None)
    except Exception:  # a constant that fails to evaluate is no safe constant
        return None


def _risk(cat: Catalyst, node: Any, kind: str) -> str | None:
    """Why a node not in SAFE may fail at run time (None: this use of it cannot)."""
    kids = cat.children(node)
    mode = _eval_mode(node)
    if kind == "Cast":
        source, target = kids[0].dataType(), node.dataType()
        casts = cat.jvm.org.apache.spark.sql.catalyst.expressions.Cast
        to_floating = target.typeName() in ("double", "float") and source.typeName() in _NUMBERS
        if (mode in ("TRY", "LEGACY") or target.typeName() == "string" or to_floating
                or casts.canUpCast(source, target) or _literal(kids[0]) is not None):
            return None
        return f"CAST({source.simpleString()} AS {target.simpleString()}) may fail at run time (ANSI)"
    if kind in _ARITHMETIC:
        if mode in ("TRY", "LEGACY") or node.dataType().typeName() in ("double", "float"):
            return None
        return f"{node.dataType().simpleString()} arithmetic may overflow at run time (ANSI)"
    if kind in _DIVISION:
        divisor = _literal(kids[1]) if len(kids) > 1 else None
        if mode in ("TRY", "LEGACY") or (divisor is not None and float(str(divisor)) != 0.0):
            return None
        return "a division by a value that may be zero fails at run time (ANSI): use try_divide"
    if kind in _REGEX or kind in ("Like", "ILike", "LikeAll", "NotLikeAll", "LikeAny", "NotLikeAny"):
        return _pattern_risk(cat, node, kind, kids)
    if kind in ("GetArrayItem", "ElementAt"):
        if kids[0].dataType().typeName() == "map" or (mode != "ANSI" and not _fails(node)):
            return None
        return "an array index may be out of bounds at run time (ANSI): use try_element_at"
    if kind == "JsonToStructs":
        mode_option = node.options().get("mode")
        if not mode_option.isDefined() or str(mode_option.get()).upper() != "FAILFAST":
            return None
        return "from_json in FAILFAST mode fails on a malformed value"
    if kind == "DateFormatClass":
        return None if _literal(kids[1]) is not None else "date_format with a computed pattern may fail at run time"
    return f"{kind} is not known to be safe in the shared real-time query"


def _fails(node: Any) -> bool:
    try:
        return bool(node.failOnError())
    except Exception:
        return True


def _pattern_risk(cat: Catalyst, node: Any, kind: str, kids: list[Any]) -> str | None:
    """A regex or LIKE pattern must be a literal that compiles (a bad one fails when the query starts or runs)."""
    if kind in ("LikeAll", "NotLikeAll", "LikeAny", "NotLikeAny"):
        return None  # their patterns are literals checked by the analyser
    pattern = _literal(kids[1]) if len(kids) > 1 else None
    if pattern is None:
        return f"{kind} with a computed pattern may fail at run time"
    text = str(pattern)
    try:
        if kind in ("Like", "ILike"):
            cat.jvm.org.apache.spark.sql.catalyst.util.StringUtils.escapeLikeRegex(text, node.escapeChar())
        else:
            cat.jvm.java.util.regex.Pattern.compile(text)
    except Exception:
        return f"the pattern {text[:60]!r} does not compile"
    return None
