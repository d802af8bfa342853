"""Reading real Kafka topics back in tests, through common/kafka_read.py: up to the end, from a start, marked."""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import Message

from common.kafka_read import read_to_end, topic_end_offsets
from tests.support.wait import wait_for

__all__ = ["consume_all", "end_offsets", "values"]


def consume_all(bootstrap: str, topic: str, isolation: str = "read_committed", expected_at_least: int = 0,
                timeout_s: float = 20.0, *, start: Mapping[int, int] | None = None) -> list[Message]:
    """Every record of `topic` from `start` (partition -> offset; default the beginning) to its end, read again
    until there are at least `expected_at_least` of them or `timeout_s` passes. Tests pass
    `start=end_offsets(...)` taken before they write, so they read only their own era of a shared topic."""
    committed = isolation == "read_committed"

    def read() -> list[Message]:
        return list(read_to_end(bootstrap, topic, start=start, committed=committed, timeout_s=timeout_s))

    def enough() -> list[Message] | None:
        got = read()
        return got if len(got) >= expected_at_least else None

    if expected_at_least <= 0:
        return read()
    found = wait_for(f"{expected_at_least} records in {topic}", enough, timeout_s)
    assert found is not None
    return found


def values(records: list[Message], marker: str | bytes = b"") -> list[bytes]:
    """The values of `records` that contain `marker` (a test run's unique id)."""
    needle = marker.encode() if isinstance(marker, str) else marker
    return [v for v in (r.value() for r in records) if v is not None and needle in v]


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The end offset of every partition now: unchanged offsets prove nothing was written."""
    return topic_end_offsets(bootstrap, topic)
