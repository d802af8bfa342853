"""The seam between the registry and its storage: an ordered log of key/value records, and an in-memory fake."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

Record = tuple[bytes, bytes | None]
Apply = Callable[[bytes | None, bytes | None], None]


class WriterFenced(Exception):
    """Another instance became the writer; re-acquire, catch up and decide again."""


class ReadOnlyLog(Exception):
    """A write was attempted on a follower's log, which only replays the primary's mirrored topic."""


class SchemaLog(Protocol):
    """An ordered, replayable log (the `_schemas` topic). Every record read is passed to `apply`, in order."""

    # Seconds between the newest record's timestamp and its arrival here (on a follower: the mirror's lag, clock
    # skew between the regions included); None before the first record or where records carry no time.
    last_lag_s: float | None

    async def start(self, apply: Apply) -> None:
        """Replay the whole log through `apply`, return when caught up, then keep following it."""

    async def acquire_writer(self) -> None:
        """Become the single writer (fencing others) and return once every earlier write has been applied."""

    async def append(self, records: Sequence[Record]) -> None:
        """Write `records` atomically; return once they have been read back and applied. May raise WriterFenced."""

    async def close(self) -> None:
        """Stop following; release clients."""


class MemoryLog:
    """A SchemaLog in a list: for unit tests. Several instances may share one `records` list."""

    def __init__(self, records: list[Record] | None = None) -> None:
        self.records: list[Record] = [] if records is None else records
        self._apply: Apply | None = None
        self.last_lag_s: float | None = None
        self._read = 0
        self.fence_next = 0  # make the next N appends raise WriterFenced (tests the retry path)

    async def start(self, apply: Apply) -> None:
        self._apply = apply
        self._catch_up()

    def _catch_up(self) -> None:
        assert self._apply is not None, "start() first"
        while self._read < len(self.records):
            key, value = self.records[self._read]
            self._apply(key, value)
            self._read += 1

    async def acquire_writer(self) -> None:
        self._catch_up()

    async def append(self, records: Sequence[Record]) -> None:
        if self.fence_next:
            self.fence_next -= 1
            raise WriterFenced("fenced by the test")
        self.records.extend(records)
        self._catch_up()

    async def close(self) -> None:
        self._apply = None
