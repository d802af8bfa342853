"""Stream names: what a client may subscribe to, the Kafka topic behind each, and read-key scopes over them.

| stream | topic | records |
| --- | --- | --- |
| `event.<type>` | the events topic (or the type's own, `HEADWATER_SUBSCRIBE_TOPIC_OVERRIDES`) | that type's events |
| `rule.<name>` | `headwater.rule.<name>` | the rule's output rows |
| `deadletter` | the dead-letter topic | rejected events with their reason (JSON records) |
| `aggregates` | the pipeline's aggregates topic | window aggregates |

Several event types share the events topic: their streams share one reader, each keeping its own type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from subscribe.errors import BadRequest

EVENT_PREFIX = "event."
RULE_PREFIX = "rule."
RULE_TOPIC_PREFIX = "headwater.rule."
DEADLETTER = "deadletter"
AGGREGATES = "aggregates"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")  # event types (schemas/catalog.py) and rule names (rules/model.py)
_SCOPE = re.compile(r"\*|(event|rule)\.\*|(event|rule)\.[a-z][a-z0-9_]{0,62}|deadletter|aggregates")


@dataclass(frozen=True)
class Stream:
    """A subscribable stream: its name, its topic, and the event type it keeps (None: every record of the topic)."""

    name: str
    topic: str
    event_type: str | None = None

    @property
    def avro(self) -> bool:
        """Whether records are Confluent-framed Avro (the dead letters are JSON)."""
        return self.name != DEADLETTER


@dataclass(frozen=True)
class Topics:
    """The stack's topic names (same variables as the other components)."""

    events: str = "headwater.events"
    deadletter: str = "headwater.deadletter"
    aggregates: str = "headwater.aggregates"
    overrides: Mapping[str, str] | None = None  # event type -> its own topic


def parse_stream(name: str, topics: Topics) -> Stream:
    """The stream called `name`; BadRequest(invalid_stream) when the name is not one of the forms above."""
    if name == DEADLETTER:
        return Stream(name, topics.deadletter)
    if name == AGGREGATES:
        return Stream(name, topics.aggregates)
    for prefix in (EVENT_PREFIX, RULE_PREFIX):
        if name.startswith(prefix) and _NAME.fullmatch(name[len(prefix):]):
            rest = name[len(prefix):]
            if prefix == RULE_PREFIX:
                return Stream(name, RULE_TOPIC_PREFIX + rest)
            return Stream(name, (topics.overrides or {}).get(rest, topics.events), event_type=rest)
    shown = name[:80] + ("…" if len(name) > 80 else "")
    raise BadRequest(f"stream {shown!r} is not event.<type>, rule.<name>, deadletter or aggregates",
                     code="invalid_stream")


def valid_scope(pattern: str) -> bool:
    """A scope is a stream name, `event.*`, `rule.*` or `*`."""
    return bool(_SCOPE.fullmatch(pattern))


def in_scope(stream: str, scopes: tuple[str, ...]) -> bool:
    """Whether one of `scopes` covers `stream` (a trailing `*` matches any rest)."""
    return any(s == stream or (s.endswith("*") and stream.startswith(s[:-1])) for s in scopes)
