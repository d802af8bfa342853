"""The plugin's SQL functions: `funnel_step`, `is_bot` and `to_currency` (vectorised: pandas Series in and out).

- `funnel_step(value, steps)`: the 1-based position of `value` in the comma-separated funnel `steps`
  (e.g. `funnel_step(path, '/,/product,/cart,/checkout')`), 0 when it is not a step, null when `value` is null.
- `is_bot(user_agent)`: whether a User-Agent string is a crawler, a monitoring probe, a command-line client or
  a headless browser (a case-insensitive pattern; null -> null).
- `to_currency(amount, currency, target)`: `amount` converted from `currency` to `target` with the reference
  rates of the dimension table `data/rates.csv` (units per EUR); null when either currency is not in it.
"""

from __future__ import annotations

import csv
import io
import re
from functools import lru_cache
from importlib.resources import files

import pandas as pd  # type: ignore[import-untyped]

from spark_pipeline.rules.sql_function import sql_function

BOT_PATTERN = re.compile(
    r"bot\b|bot/|crawl|spider|slurp|mediapartners|facebookexternalhit|embedly|preview|monitor|pingdom|uptime"
    r"|headless|phantomjs|puppeteer|playwright|selenium|curl/|wget/|python-requests|python-urllib|httpx|aiohttp"
    r"|go-http-client|okhttp|java/|libwww|scrapy|axios/|node-fetch",
    re.IGNORECASE)


@sql_function("funnel_step", "int")
def funnel_step(value: pd.Series, steps: pd.Series) -> pd.Series:
    """The 1-based step of `value` in the comma-separated funnel `steps`, 0 if none, null if `value` is null."""
    out: list[int | None] = []
    for v, s in zip(value, steps, strict=True):
        if v is None or (isinstance(v, float) and pd.isna(v)):
            out.append(None)
            continue
        ordered = _steps(s if isinstance(s, str) else "")
        out.append(ordered.get(str(v), 0))
    return pd.Series(out, dtype="Int32")


@lru_cache(maxsize=256)
def _steps(spec: str) -> dict[str, int]:
    positions: dict[str, int] = {}
    for i, step in enumerate(spec.split(","), start=1):
        positions.setdefault(step.strip(), i)
    return positions


@sql_function("is_bot", "boolean")
def is_bot(user_agent: pd.Series) -> pd.Series:
    """Whether the User-Agent is a bot, crawler, probe, command-line client or headless browser."""
    result = user_agent.astype("string").str.contains(BOT_PATTERN, na=pd.NA)
    return result.astype("boolean")


@lru_cache(maxsize=1)
def rates() -> dict[str, float]:
    """Units of each currency per EUR, from the packaged dimension table."""
    text = files("headwater_sql_functions").joinpath("data/rates.csv").read_text(encoding="utf-8")
    return {row["currency"].strip().upper(): float(row["per_eur"]) for row in csv.DictReader(io.StringIO(text))}


@sql_function("to_currency", "double")
def to_currency(amount: pd.Series, currency: pd.Series, target: pd.Series) -> pd.Series:
    """`amount` in `currency` converted to `target` (reference rates per EUR); null for an unknown currency."""
    table = rates()
    source_rate = currency.astype("string").str.upper().map(table)
    target_rate = target.astype("string").str.upper().map(table)
    return (amount.astype("float64") / source_rate.astype("float64") * target_rate.astype("float64")).round(6)
