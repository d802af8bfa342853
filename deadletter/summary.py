"""Summaries of dead letters (pure): counts by reason, event type, version and source, with time ranges."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from deadletter.records import Letter
from deadletter.text import cell

GroupKey = tuple[str, str, str, str]  # reason, event type, version, source


@dataclass
class Group:
    count: int = 0
    first_ms: int = 0
    last_ms: int = 0
    producers: set[str] = field(default_factory=set)

    def add(self, letter: Letter) -> None:
        at = letter.value.received_at
        self.first_ms = at if self.count == 0 else min(self.first_ms, at)
        self.last_ms = max(self.last_ms, at)
        self.count += 1
        if letter.producer_id:
            self.producers.add(letter.producer_id)


def key_of(letter: Letter) -> GroupKey:
    v = letter.value
    return (v.reason, letter.event_type or "-", letter.version_label, v.source)


def summarise(letters: Iterable[Letter]) -> dict[GroupKey, Group]:
    groups: dict[GroupKey, Group] = {}
    for letter in letters:
        groups.setdefault(key_of(letter), Group()).add(letter)
    return groups


def iso(ms: int) -> str:
    """Epoch ms as ISO-8601 UTC; a time no calendar holds (a forged received_at) as the number, marked."""
    try:
        return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, ValueError, OSError):
        return f"{ms}ms(out of range)" if len(str(ms)) <= 24 else f"{str(ms)[:20]}...ms(out of range)"


def parse_time(text: str) -> int:
    """Epoch ms from an ISO-8601 time (UTC when no offset is given) or a plain epoch-ms integer."""
    if text.isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither an ISO-8601 time nor epoch milliseconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def table(rows: list[list[str]], header: list[str]) -> str:
    """A plain aligned text table; every cell terminal-safe (text.cell)."""
    rows = [[cell(str(c)) for c in r] for r in rows]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary_table(groups: dict[GroupKey, Group]) -> str:
    rows = [[*key, str(g.count), str(len(g.producers)), iso(g.first_ms), iso(g.last_ms)]
            for key, g in sorted(groups.items(), key=lambda kv: (-kv[1].count, kv[0]))]
    return table(rows, ["reason", "event_type", "version", "source", "count", "producers", "first", "last"])


def list_row(letter: Letter) -> list[str]:
    v = letter.value
    return [letter.position, iso(v.received_at), v.reason, letter.event_type or "-", letter.version_label, v.source,
            letter.event_id or "-", v.message[:80]]


LIST_HEADER = ["at", "received_at", "reason", "event_type", "version", "source", "event_id", "message"]
