"""The registry service: reads answered from the replayed state, writes serialised through the schema log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

from registry import ops
from registry.canonical import ParsedSchema
from registry.compat import Problem
from registry.errors import RegistryError, WriteConflict
from registry.schema_log import SchemaLog, WriterFenced
from registry.state import State

log = logging.getLogger(__name__)
T = TypeVar("T")
WRITE_ATTEMPTS = 5


class Registry:
    """One instance: its state (rebuilt from the log at start) and the log it writes to."""

    def __init__(self, schema_log: SchemaLog, default_level: str = "BACKWARD") -> None:
        self.state = State(default_level=default_level)
        self.log = schema_log
        self._write_lock = asyncio.Lock()
        self._applied = asyncio.Event()  # set and replaced after every record applied: wakes wait_registered
        self.ready = False

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        self.state.apply(key, value)
        applied, self._applied = self._applied, asyncio.Event()
        applied.set()

    async def start(self) -> None:
        await self.log.start(self._apply)
        self.ready = True
        log.info("replayed _schemas", extra={"records": self.state.applied, "subjects": len(self.state.subjects),
                                             "schemas": len(self.state.schemas)})

    async def close(self) -> None:
        self.ready = False
        await self.log.close()

    async def _write(self, decide: Callable[[State], tuple[T, list[ops.Record]]]) -> T:
        """Decide on the caught-up state and write the records; decide again if another writer intervened."""
        async with self._write_lock:
            try:
                answer, records = decide(self.state)
                if not records:  # already true (e.g. registered before): no need to become the writer
                    return answer
            except RegistryError:
                pass  # decided on a view that may lag the writer's: confirm below
            for attempt in range(WRITE_ATTEMPTS):
                await self.log.acquire_writer()
                answer, records = decide(self.state)
                if not records:
                    return answer
                try:
                    await self.log.append(records)
                except WriterFenced as exc:
                    log.info("fenced by another registry instance; retrying",
                             extra={"attempt": attempt, "error": str(exc)})
                    continue
                return answer
        raise WriteConflict(f"write lost to other registry instances {WRITE_ATTEMPTS} times; retry")

    async def register(self, subject: str, parsed: ParsedSchema, normalize: bool = False) -> int:
        schema_id = await self._write(lambda s: ops.register(s, subject, parsed, normalize))
        log.info("registered", extra={"subject": subject, "id": schema_id})
        return schema_id

    async def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        return await self._write(lambda s: ops.delete_version(s, subject, version, permanent))

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        return await self._write(lambda s: ops.delete_subject(s, subject, permanent))

    async def set_level(self, subject: str | None, body: object) -> str:
        return await self._write(lambda s: ops.set_level(s, subject, body))

    async def delete_level(self, subject: str | None) -> str:
        return await self._write(lambda s: ops.delete_level(s, subject))

    def has_version(self, subject: str, schema_id: int) -> bool:
        """Whether `subject` has a live version with id `schema_id` in this instance's replay."""
        return any(v.schema_id == schema_id for v in self.state.versions(subject))

    async def wait_registered(self, subject: str, schema_id: int, timeout_s: float) -> bool:
        """Wait until this instance's replay has `schema_id` under `subject` (a registration made elsewhere, e.g.
        by the primary, arriving through the mirrored topic); False after `timeout_s` without it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.has_version(subject, schema_id):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._applied.wait(), remaining)
            except TimeoutError:
                return self.has_version(subject, schema_id)
        return True

    def check(self, subject: str, parsed: ParsedSchema, version: str | None) -> list[Problem]:
        return ops.check_compatibility(self.state, subject, parsed, version)
