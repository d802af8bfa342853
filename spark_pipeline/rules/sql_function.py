"""The public decorator a plugin package marks its SQL functions with (no Spark import: plugins stay light).

    from spark_pipeline.rules.sql_function import sql_function

    @sql_function("is_bot", "boolean")
    def is_bot(user_agent: pd.Series) -> pd.Series: ...

`return_type` is a Spark SQL type string (`boolean`, `double`, `int`, `string`, `array<string>`, ...).
`vectorised=True` (the default): the function takes and returns pandas Series and is registered as a pandas
UDF (Arrow batches); `vectorised=False`: it takes and returns plain values, one row at a time. The package
declares the module holding its functions under the entry point group `headwater.sql_functions` (docs/rules.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
MARKER = "__headwater_sql_function__"
ENTRY_POINT_GROUP = "headwater.sql_functions"


@dataclass(frozen=True)
class FunctionSpec:
    """What the decorator records on a function: its SQL name, Spark return type and whether it is vectorised."""

    name: str
    return_type: str
    vectorised: bool


def sql_function(name: str, return_type: str, vectorised: bool = True) -> Callable[[F], F]:
    """Mark a function as SQL function `name` returning `return_type`."""

    def mark(func: F) -> F:
        setattr(func, MARKER, FunctionSpec(name, return_type, vectorised))
        return func

    return mark
