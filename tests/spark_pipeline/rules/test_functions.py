"""Unit tests of the SQL function plugins: the shipped functions on pandas Series, and the loader's handling of
good, broken and conflicting plugins (entry points built here, pointing at modules of this test)."""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint

import headwater_sql_functions.functions as shipped
import pandas as pd  # type: ignore[import-untyped]
import pytest

from spark_pipeline.rules import functions
from spark_pipeline.rules.sql_function import ENTRY_POINT_GROUP, sql_function

pytestmark = pytest.mark.unit


def test_funnel_step() -> None:
    steps = "/, /product ,/cart,/checkout"
    got = shipped.funnel_step(pd.Series(["/", "/product", "/checkout", "/about", None]), pd.Series([steps] * 5))
    assert got.tolist() == [1, 2, 4, 0, pd.NA]
    assert str(got.dtype) == "Int32"


def test_is_bot() -> None:
    uas = pd.Series([
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "curl/8.5.0", "python-requests/2.32.3", "Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome/120.0",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
        None,
    ])
    assert shipped.is_bot(uas).tolist() == [True, True, True, True, False, False, pd.NA]


def test_to_currency_from_the_dimension_table() -> None:
    assert shipped.rates()["EUR"] == 1.0
    got = shipped.to_currency(pd.Series([108.0, 100.0, 5.0, 1.0]), pd.Series(["usd", "EUR", "XXX", "GBP"]),
                              pd.Series(["EUR", "USD", "EUR", "GBP"]))
    assert got.iloc[0] == pytest.approx(100.0)
    assert got.iloc[1] == pytest.approx(108.0)
    assert pd.isna(got.iloc[2])
    assert got.iloc[3] == pytest.approx(1.0)


def plugin_module(name: str, **members: object) -> str:
    module = types.ModuleType(name)
    for key, value in members.items():
        setattr(module, key, value)
    sys.modules[name] = module
    return name


def entry(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def test_the_installed_plugin_declares_the_three_functions() -> None:
    names = [f.name for f in functions.load_functions()]
    assert {"funnel_step", "is_bot", "to_currency"} <= set(names)
    info = next(f for f in functions.load_functions() if f.name == "to_currency")
    assert info.signature() == "to_currency(amount, currency, target) -> double" and info.vectorised


def test_loader_skips_broken_and_conflicting_plugins() -> None:
    @sql_function("double_it", "double", vectorised=False)
    def double_it(x: float) -> float:
        """Twice x."""
        return 2 * x

    @sql_function("double_it", "double")
    def again(x: pd.Series) -> pd.Series:
        return x

    @sql_function("Bad-Name", "double")
    def bad(x: pd.Series) -> pd.Series:
        return x

    @sql_function("bad_type", "not a type!")
    def bad_type(x: pd.Series) -> pd.Series:
        return x

    good = plugin_module("hw_test_plugin_good", double_it=double_it, helper=lambda x: x)
    dup = plugin_module("hw_test_plugin_dup", again=again, bad=bad, bad_type=bad_type)
    empty = plugin_module("hw_test_plugin_empty")
    loaded = functions.collect([entry("a", good), entry("b", dup), entry("c", empty),
                                entry("d", "hw_test_plugin_missing_module"), entry("e", f"{good}:double_it")])
    assert [(f.name, f.vectorised, f.doc) for f in loaded.functions] == [("double_it", False, "Twice x.")]
    text = "\n".join(loaded.errors)
    for words in ("already declared", "bad function name 'Bad-Name'", "not a Spark SQL type",
                  "holds no @sql_function", "cannot load hw_test_plugin_missing_module"):
        assert words in text
