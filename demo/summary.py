"""The demo's closing count: what the pipeline's 1-minute windows hold for the demo's minutes, beside what the
gateway acknowledged, so that a table cut by the terminal is never read as lost events."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

MINUTE = "1m"


def counted(rows: Iterable[dict[str, Any]], since: dt.datetime) -> dict[str, int]:
    """Events per type in the 1-minute windows starting at or after `since`'s minute (latest row per window, as
    read back from the aggregates topic; pure)."""
    first = since.replace(second=0, microsecond=0)
    per_type: dict[str, int] = {}
    for r in rows:
        start = r["window_start"]
        if r["granularity"] == MINUTE and start.astimezone(dt.UTC) >= first:
            per_type[str(r["event_type"])] = per_type.get(str(r["event_type"]), 0) + int(r["events"])
    return per_type


def describe(per_type: dict[str, int], acknowledged: int, since: dt.datetime) -> list[str]:
    """The lines the demo prints at its end."""
    total = sum(per_type.values())
    types = ", ".join(f"{t} {n:,}" for t, n in sorted(per_type.items())) or "none"
    lines = [f"the pipeline's 1-minute windows since {since:%H:%M} UTC count {total:,} events ({types}); the "
             f"gateway acknowledged {acknowledged:,} of the demo's"]
    if total < acknowledged:
        lines.append(f"  {acknowledged - total:,} not counted yet: the live query had not read them when it stopped "
                     "(its lag is on the console; `python -m spark_pipeline replay` recomputes everything)")
    return lines
