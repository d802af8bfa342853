"""Schema cache over a Confluent-compatible registry: filled and refreshed in the background, misses fetched
asynchronously (single-flight, negative-cached); lookups on the hot path are dictionary reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.parse
from typing import Any, Protocol

import aiohttp

from gateway.avro_types import SchemaCompileError
from gateway.errors import RegistryUnavailable
from gateway.schemas import CompiledSchema, Route, compile_schema, event_type_of

log = logging.getLogger("gateway.registry")
NEGATIVE_TTL_S = 5.0
LATEST = 0  # key of the latest version in lookups


class NotFound(Exception):
    """The registry answered 404 (subject, version or id unknown)."""


class SchemaSource(Protocol):
    async def get(self, path: str) -> Any: ...


class HttpRegistry:
    """The few Confluent REST calls the gateway needs; 404 -> NotFound, anything else -> RegistryUnavailable."""

    def __init__(self, base_url: str, timeout_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def get(self, path: str) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.get(self.base_url + path) as resp:
                if resp.status == 404:
                    raise NotFound(path)
                if resp.status != 200:
                    raise RegistryUnavailable(f"registry answered {resp.status} for {path}")
                return await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise RegistryUnavailable(f"registry unreachable: {exc!r}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


class SchemaCache:
    """Compiled schemas by (subject, version), by latest version and by id."""

    def __init__(self, routes: dict[str, Route], source: SchemaSource) -> None:
        self.routes = routes
        self._source = source
        self._versions: dict[tuple[str, int], CompiledSchema] = {}
        self._latest: dict[str, CompiledSchema] = {}
        self._ids: dict[int, CompiledSchema] = {}
        self._missing: dict[tuple[str, int] | int, float] = {}
        self._inflight: dict[tuple[str, int] | int, asyncio.Future[None]] = {}
        self.healthy = False
        self.last_refresh = 0.0

    # -- hot path: dictionary reads ------------------------------------------------------------------------
    def by_version(self, route: Route, version: int | None) -> CompiledSchema | None:
        if version is None:
            return self._latest.get(route.subject)
        return self._versions.get((route.subject, version))

    def by_id(self, schema_id: int) -> CompiledSchema | None:
        return self._ids.get(schema_id)

    def known_missing(self, key: tuple[str, int] | int) -> bool:
        expiry = self._missing.get(key)
        return expiry is not None and expiry > time.monotonic()

    # -- misses: fetched once, concurrently shared ---------------------------------------------------------
    async def fetch_version(self, route: Route, version: int | None) -> None:
        await self._single_flight((route.subject, version or LATEST), lambda: self._load_version(route, version))

    async def fetch_id(self, schema_id: int) -> None:
        await self._single_flight(schema_id, lambda: self._load_id(schema_id))

    async def _single_flight(self, key: tuple[str, int] | int, load: Any) -> None:
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
            self._missing[key] = time.monotonic() + NEGATIVE_TTL_S
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
        self._store(route, doc)

    async def _load_id(self, schema_id: int) -> None:
        doc = await self._source.get(f"/schemas/ids/{schema_id}")
        text = doc.get("schema", "")
        event_type = event_type_of(text)
        route = self.routes.get(event_type or "")
        if route is None:
            raise NotFound(f"schema id {schema_id} is not an event schema of the catalog")
        known = next((c.version for c in self._versions.values() if c.schema_id == schema_id), None)
        try:
            self._ids[schema_id] = compile_schema(route, schema_id, known, text)
        except SchemaCompileError as exc:
            log.warning("schema id %s cannot be used: %s", schema_id, exc)
            raise NotFound(str(exc)) from None

    def _store(self, route: Route, doc: dict[str, Any]) -> CompiledSchema | None:
        key = (route.subject, int(doc["version"]))
        compiled = self._versions.get(key)
        if compiled is None:
            try:
                compiled = compile_schema(route, int(doc["id"]), int(doc["version"]), doc["schema"])
            except SchemaCompileError as exc:
                log.warning("subject %s version %s cannot be used: %s", route.subject, doc.get("version"), exc)
                return None
            self._versions[key] = compiled
            self._ids.setdefault(compiled.schema_id, compiled)
        latest = self._latest.get(route.subject)
        if latest is None or (latest.version or 0) < (compiled.version or 0):
            self._latest[route.subject] = compiled
        return compiled

    # -- background refresh ----------------------------------------------------------------------------------
    async def refresh(self) -> None:
        """Fetch every version of every catalog subject not cached yet; sets `healthy`."""
        try:
            for route in self.routes.values():
                try:
                    versions = await self._source.get(f"/subjects/{_quote(route.subject)}/versions")
                except NotFound:
                    continue
                for v in versions:
                    if (route.subject, int(v)) not in self._versions:
                        with contextlib.suppress(NotFound):
                            self._store(route, await self._source.get(
                                f"/subjects/{_quote(route.subject)}/versions/{int(v)}"))
            self.healthy = True
            self.last_refresh = time.monotonic()
        except RegistryUnavailable as exc:
            self.healthy = False
            log.warning("schema refresh failed: %s", exc)

    async def run_refresher(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s if self.healthy else min(every_s, 1.0))
            await self.refresh()
