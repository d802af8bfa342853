"""Reads a running rule query's health: rows/s, last batch time, state size, Kafka lag and a trimmed error chain.

Pure functions over what pyspark hands out (a progress dict, an exception with its `_cause` chain) plus one
small protocol for the topic's high watermarks, so the manager's status logic is unit-testable without Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from spark_pipeline.supervisor import MAX_CAUSES

ERROR_CHARS = 600  # the trimmed cause chain kept in a rule's status
_LINE_CHARS = 200  # of each exception in the chain
_JAVA_CLASS = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+\.[A-Z]\w*(: |$)")


class HighWatermarks(Protocol):
    """The newest offset + 1 of each partition of a topic (a confluent-kafka consumer behind it)."""

    def high(self, topic: str, partition: int) -> int | None: ...


@dataclass(frozen=True)
class Health:
    """What one progress report says about a rule query."""

    batch_id: int | None  # None: no progress report yet
    input_rows: int
    rows_per_s: float
    last_batch_at: int | None  # ms
    lag: int | None  # Kafka offsets behind the high watermarks
    state_rows: int  # rows held by the query's state stores


def as_dict(progress: Any) -> dict[str, Any]:
    """A progress report as plain JSON values (pyspark 4 returns a StreamingQueryProgress: a dict whose
    `observedMetrics` hold Rows, and whose `json` is the report as Spark wrote it; older ones a plain dict)."""
    if progress is None:
        return {}
    raw = getattr(progress, "json", None)
    if isinstance(raw, str):
        return dict(json.loads(raw))
    return dict(progress) if isinstance(progress, Mapping) else {}


def _ms(timestamp: object) -> int | None:
    """Spark's progress timestamp ('2026-11-23T23:59:01.123Z') in epoch ms."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _offsets(raw: object) -> dict[str, dict[str, int]]:
    """A Kafka source's end offsets ({topic: {partition: offset}}; a JSON string in pyspark's objects)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    out: dict[str, dict[str, int]] = {}
    for topic, parts in raw.items():
        if isinstance(parts, dict):
            out[str(topic)] = {str(p): int(o) for p, o in parts.items() if isinstance(o, int)}
    return out


def lag(progress: Mapping[str, Any], watermarks: HighWatermarks) -> int | None:
    """Offsets between each Kafka source's end offsets and its topic's high watermarks (None: unknown).

    The events topic is written in transactions: each commit marker takes one offset no record occupies, so a
    caught-up rule can show up to one offset per partition.
    """
    total, known = 0, False
    for source in progress.get("sources") or []:
        for topic, parts in _offsets(source.get("endOffset")).items():
            for partition, end in parts.items():
                high = watermarks.high(topic, int(partition))
                if high is not None:
                    total += max(0, high - end)
                    known = True
    return total if known else None


def health(progress: Any, watermarks: HighWatermarks) -> Health:
    """The rule's health from its last progress report."""
    p = as_dict(progress)
    rate = p.get("processedRowsPerSecond")
    rows = sum(int(op.get("numRowsTotal") or 0) for op in p.get("stateOperators") or [])
    batch = p.get("batchId")
    return Health(batch if isinstance(batch, int) else None, int(p.get("numInputRows") or 0),
                  float(rate) if isinstance(rate, (int, float)) else 0.0, _ms(p.get("timestamp")),
                  lag(p, watermarks) if p else None, rows)


def _line(error: object) -> str:
    """The first line of one exception's message, with its type unless the message names a (Java) class."""
    desc = getattr(error, "desc", None)
    text = desc if isinstance(desc, str) and desc else str(error)
    first = (text.strip().splitlines() or [""])[0].strip()
    name = type(error).__name__
    if name == "UnknownException" or first.startswith(name) or _JAVA_CLASS.match(first):
        return first
    return f"{name}: {first}" if first else name


def error_chain(error: BaseException | object) -> str:
    """A failed query's error for people: the first line of each exception of the cause chain (pyspark's `_cause`,
    Python's `__cause__`), the root cause first, ` <- `-joined; a message that repeats an inner one is dropped;
    each line at most 200 characters, the whole at most ERROR_CHARS. Never a stack trace."""
    lines: list[str] = []
    seen = 0
    current: object = error
    while current is not None and seen < MAX_CAUSES:
        seen += 1
        lines.append(_line(current))
        current = getattr(current, "_cause", None) or getattr(current, "__cause__", None)
    kept: list[str] = []
    cores: list[str] = []
    for line in reversed(lines):  # innermost first
        if any(core in line for core in cores):
            continue  # a wrapper repeating an inner message
        kept.append(line[:_LINE_CHARS])
        if len(core := line.split(": ", 1)[-1]) >= 8:
            cores.append(core)
    text = " <- ".join(kept)
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."
