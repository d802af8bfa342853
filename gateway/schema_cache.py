"""Schema cache over a Confluent-compatible registry, which is the source of truth for event types: subjects
`headwater.events.<type>` are discovered by a periodic refresh and on a miss; misses are fetched asynchronously
(single-flight, negative-cached, budgeted per source); lookups on the hot path are dictionary reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from common.registry_access import RegistryAccess
from common.tls import client_context
from gateway.avro_types import SchemaCompileError
from gateway.errors import RegistryUnavailable
from gateway.lookup_limits import LookupBudget, NegativeCache
from gateway.schemas import (
    EVENT_TYPE,
    CompiledSchema,
    Route,
    TopicMap,
    compile_schema,
    event_type_of,
    event_type_of_subject,
    subject_for,
)

log = logging.getLogger("gateway.schema_cache")
NEGATIVE_TTL_S = 5.0
NEGATIVE_MAX = 10_000
LATEST = 0  # key of the latest version in lookups


class NotFound(Exception):
    """The registry answered 404 (subject, version or id unknown)."""


class SchemaSource(Protocol):
    async def get(self, path: str) -> Any: ...


class HttpRegistry:
    """The few Confluent REST calls the gateway needs; 404 -> NotFound, anything else -> RegistryUnavailable."""

    def __init__(self, base_url: str, timeout_s: float, access: RegistryAccess | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._access = access or RegistryAccess()

    async def get(self, path: str) -> Any:
        if self._session is None:  # credentials on every request; an https registry's certificate checked
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, headers=self._access.headers(),
                connector=aiohttp.TCPConnector(ssl=client_context(self._access.ca_file)))
        try:
            async with self._session.get(self.base_url + path) as resp:
                if resp.status == 404:
                    raise NotFound(path)
                if resp.status != 200:
                    raise RegistryUnavailable(f"registry answered {resp.status} for {path}")
                return await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise RegistryUnavailable(f"registry unreachable: {type(exc).__name__}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


class SchemaCache:
    """Compiled schemas by (subject, version), by latest version and by id; routes of the discovered types.

    `snapshot` (a file shared by the workers of one instance) holds every schema loaded so far, so that a
    worker starting while the registry is down serves what its siblings served.
    """

    def __init__(self, source: SchemaSource, topics: TopicMap | None = None, *, budget: LookupBudget | None = None,
                 negative: NegativeCache | None = None, snapshot: Path | None = None, codegen: bool = True) -> None:
        self.topics = topics or TopicMap()
        self.routes: dict[str, Route] = {}
        self._source = source
        self._budget = LookupBudget(0, 1, 1) if budget is None else budget
        self._missing = NegativeCache(NEGATIVE_MAX, NEGATIVE_TTL_S) if negative is None else negative
        self._snapshot = snapshot
        self._codegen = codegen  # generated Avro encoders (gateway/avro_codegen.py); False: fastavro's writer
        self._docs: dict[tuple[str, int], dict[str, Any]] = {}
        self._versions: dict[tuple[str, int], CompiledSchema] = {}
        self._latest: dict[str, CompiledSchema] = {}
        self._ids: dict[int, CompiledSchema] = {}
        self._inflight: dict[Hashable, asyncio.Future[None]] = {}
        self.loaded = False   # schemas were loaded once (from the registry or the shared snapshot)
        self.healthy = False  # the last refresh reached the registry
        self.last_refresh = 0.0

    # -- hot path: dictionary reads ------------------------------------------------------------------------
    def by_version(self, route: Route, version: int | None) -> CompiledSchema | None:
        if version is None:
            return self._latest.get(route.subject)
        return self._versions.get((route.subject, version))

    def by_id(self, schema_id: int) -> CompiledSchema | None:
        return self._ids.get(schema_id)

    def known_missing(self, key: Hashable) -> bool:
        return key in self._missing

    def needs_version(self, event_type: str, version: int | None) -> bool:
        """Whether (event type, version) is worth a registry lookup: not cached, valid, not recently missing."""
        route = self.routes.get(event_type)
        if route is not None and self.by_version(route, version) is not None:
            return False
        if route is None and not EVENT_TYPE.fullmatch(event_type):
            return False
        return not self.known_missing((subject_for(event_type), version or LATEST))

    def charge(self, source: str, lookups: int) -> None:
        """Count `lookups` registry lookups against `source`'s budget (RateLimited beyond it)."""
        self._budget.charge(source, lookups)

    # -- misses: fetched once, concurrently shared ---------------------------------------------------------
    async def fetch_version(self, event_type: str, version: int | None) -> None:
        route = self.routes.get(event_type) or self.topics.route(event_type)
        await self._single_flight((route.subject, version or LATEST), lambda: self._load_version(route, version))

    async def fetch_id(self, schema_id: int) -> None:
        await self._single_flight(schema_id, lambda: self._load_id(schema_id))

    async def _single_flight(self, key: Hashable, load: Callable[[], Awaitable[None]]) -> None:
        if self.known_missing(key):
            return
        running = self._inflight.get(key)
        if running is not None:
            await asyncio.shield(running)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            await load()
            fut.set_result(None)
        except NotFound:
            self._missing.add(key)
            fut.set_result(None)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._inflight[key]

    async def _load_version(self, route: Route, version: int | None) -> None:
        ref = "latest" if version is None else str(version)
        doc = await self._source.get(f"/subjects/{_quote(route.subject)}/versions/{ref}")
        if self._store(route, doc) is None:
            raise NotFound(f"{route.subject} version {ref} cannot be used")

    async def _load_id(self, schema_id: int) -> None:
        """Membership (protocol.md section 3): an id is usable only as a version of an event type's subject."""
        uses = await self._source.get(f"/schemas/ids/{schema_id}/versions")
        found = False
        for use in uses if isinstance(uses, list) else []:
            event_type = event_type_of_subject(str(use.get("subject", "")))
            if event_type is None:
                continue
            route = self.routes.get(event_type) or self.topics.route(event_type)
            with contextlib.suppress(NotFound):
                doc = await self._source.get(f"/subjects/{_quote(route.subject)}/versions/{int(use['version'])}")
                found |= self._store(route, doc) is not None
        if not found or schema_id not in self._ids:
            raise NotFound(f"schema id {schema_id} is not a version of any event type's subject")

    def _store(self, route: Route, doc: dict[str, Any]) -> CompiledSchema | None:
        key = (route.subject, int(doc["version"]))
        compiled = self._versions.get(key)
        if compiled is None:
            try:
                compiled = compile_schema(route, int(doc["id"]), int(doc["version"]), doc["schema"],
                                          codegen=self._codegen)
            except SchemaCompileError as exc:
                log.warning("subject %s version %s cannot be used: %s", route.subject, doc.get("version"), exc)
                return None
            self._versions[key] = compiled
            self._docs[key] = {k: doc[k] for k in ("subject", "version", "id", "schema") if k in doc}
            self.routes.setdefault(route.event_type, route)
            self._missing.discard((route.subject, compiled.version))
            self._missing.discard((route.subject, LATEST))
            self._missing.discard(compiled.schema_id)
        held = self._ids.get(compiled.schema_id)
        # An id registered under several event subjects is read as the type its record names.
        if held is None or (held.route.event_type != route.event_type
                            and event_type_of(doc["schema"]) == route.event_type):
            self._ids[compiled.schema_id] = compiled
        latest = self._latest.get(route.subject)
        if latest is None or (latest.version or 0) < (compiled.version or 0):
            self._latest[route.subject] = compiled
        return compiled

    # -- background refresh ----------------------------------------------------------------------------------
    async def refresh(self) -> None:
        """Discover the event subjects, fetch every version not cached yet; sets `healthy` (and `loaded`)."""
        before = len(self._versions)
        try:
            for subject in await self._source.get("/subjects"):
                event_type = event_type_of_subject(str(subject))
                if event_type is None:
                    continue
                route = self.routes.get(event_type) or self.topics.route(event_type)
                try:
                    versions = await self._source.get(f"/subjects/{_quote(route.subject)}/versions")
                except NotFound:
                    continue
                for v in versions:
                    if (route.subject, int(v)) not in self._versions:
                        with contextlib.suppress(NotFound):
                            self._store(route, await self._source.get(
                                f"/subjects/{_quote(route.subject)}/versions/{int(v)}"))
        except RegistryUnavailable as exc:
            self.healthy = False
            log.warning("schema refresh failed: %s", exc)
            return
        self.healthy = self.loaded = True
        self.last_refresh = time.monotonic()
        if len(self._versions) != before:
            self._write_snapshot()

    async def load(self, retry_s: float) -> None:
        """Until schemas are loaded: refresh, else take the shared snapshot, else retry every `retry_s`."""
        while True:
            await self.refresh()
            if self.loaded or self._read_snapshot():
                return
            log.warning("no schemas yet (registry unreachable, no snapshot); not serving until loaded")
            await asyncio.sleep(retry_s)

    async def run_refresher(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s if self.healthy else min(every_s, 1.0))
            await self.refresh()

    # -- snapshot shared by the workers of an instance ----------------------------------------------------
    def _write_snapshot(self) -> None:
        if self._snapshot is None:
            return
        tmp = self._snapshot.with_name(f"{self._snapshot.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(list(self._docs.values())))
            os.replace(tmp, self._snapshot)
        except OSError as exc:
            log.warning("schema snapshot not written: %s", exc)

    def _read_snapshot(self) -> bool:
        if self._snapshot is None:
            return False
        try:
            docs = json.loads(self._snapshot.read_text())
        except (OSError, ValueError):
            return False
        for doc in docs:
            event_type = event_type_of_subject(str(doc.get("subject", "")))
            if event_type is not None:
                self._store(self.routes.get(event_type) or self.topics.route(event_type), doc)
        self.loaded = bool(self._versions)
        if self.loaded:
            log.warning("registry unreachable: serving %d schemas from the workers' snapshot", len(self._versions))
        return self.loaded
