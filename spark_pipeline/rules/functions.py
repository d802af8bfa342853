"""Finds the SQL function plugins installed (entry point group `headwater.sql_functions`) and registers them in Spark.

Each entry point names a module (every function in it marked with `@sql_function`) or one marked function.
`load_functions` returns them sorted by name; a plugin that fails to import, a bad name or type, or a name
declared twice is reported in `errors` (logged) and skipped, so one broken plugin never stops the pipeline.
`register_functions` registers each as a pandas UDF (vectorised) or a row-at-a-time UDF; a rule calling a
function that is not installed is then refused by the analysis with `unknown_function`.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from pyspark.sql.functions import udf
from pyspark.sql.pandas.functions import pandas_udf

from spark_pipeline.rules.sql_function import ENTRY_POINT_GROUP, MARKER, FunctionSpec

log = logging.getLogger("spark_pipeline.rules")
FUNCTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
TYPE_STRING = re.compile(r"[a-z][a-z0-9_]*(?:\s*[<(][a-z0-9_<>(),:\s]*[>)])?", re.IGNORECASE)


@dataclass(frozen=True)
class FunctionInfo:
    """One installed SQL function: name, return type, vectorised or not, the Python function and where it comes
    from (`distribution:entry point`), and its first docstring line."""

    name: str
    return_type: str
    vectorised: bool
    func: Callable[..., Any] = field(compare=False, repr=False)
    source: str = ""
    doc: str = ""

    def signature(self) -> str:
        params = ", ".join(inspect.signature(self.func).parameters)
        return f"{self.name}({params}) -> {self.return_type}"


@dataclass
class Loaded:
    """The functions found, and one message per plugin or function skipped."""

    functions: list[FunctionInfo]
    errors: list[str]


def _marked(obj: Any) -> list[tuple[Callable[..., Any], FunctionSpec]]:
    if isinstance(obj, ModuleType):
        found = [(v, getattr(v, MARKER)) for v in vars(obj).values()
                 if callable(v) and isinstance(getattr(v, MARKER, None), FunctionSpec)]
        return sorted(found, key=lambda pair: pair[1].name)
    spec = getattr(obj, MARKER, None)
    return [(obj, spec)] if callable(obj) and isinstance(spec, FunctionSpec) else []


def _check_type(return_type: str) -> str | None:
    """A first check of the type string (Spark parses it when the function is registered)."""
    if not TYPE_STRING.fullmatch(return_type.strip()):
        return f"return type {return_type!r} is not a Spark SQL type string"
    return None


def collect(eps: Iterable[EntryPoint]) -> Loaded:
    """The functions of entry points `eps` (see load_functions)."""
    functions: dict[str, FunctionInfo] = {}
    errors: list[str] = []
    for ep in sorted(eps, key=lambda e: e.name):
        source = f"{ep.dist.name if ep.dist else '?'}:{ep.name}"
        try:
            obj = ep.load()
        except Exception as exc:
            errors.append(f"plugin {source}: cannot load {ep.value}: {type(exc).__name__}: {exc}")
            continue
        marked = _marked(obj)
        if not marked:
            errors.append(f"plugin {source}: {ep.value} holds no @sql_function")
        for func, spec in marked:
            problem = None if FUNCTION_NAME.fullmatch(spec.name) else f"bad function name {spec.name!r}"
            problem = problem or _check_type(spec.return_type)
            if spec.name in functions:
                problem = f"function {spec.name} is already declared by {functions[spec.name].source}"
            if problem:
                errors.append(f"plugin {source}: {problem}")
                continue
            doc = (inspect.getdoc(func) or "").split("\n", 1)[0]
            functions[spec.name] = FunctionInfo(spec.name, spec.return_type, spec.vectorised, func, source, doc)
    for message in errors:
        log.warning("%s (skipped)", message)
    return Loaded(sorted(functions.values(), key=lambda f: f.name), errors)


def load_functions() -> list[FunctionInfo]:
    """Every SQL function the installed plugins declare (group `headwater.sql_functions`), sorted by name."""
    return collect(entry_points(group=ENTRY_POINT_GROUP)).functions


def register_functions(spark: Any, functions: list[FunctionInfo] | None = None) -> list[FunctionInfo]:
    """Register `functions` (default: every installed one) as SQL functions of `spark`; return them."""
    chosen = load_functions() if functions is None else functions
    for f in chosen:
        wrapped = pandas_udf(f.func, f.return_type) if f.vectorised else udf(f.func, f.return_type)  # type: ignore[call-overload]
        spark.udf.register(f.name, wrapped)
    return chosen
