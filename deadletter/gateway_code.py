"""The gateway's own decoding, validation and encoding, reached through this one narrow surface so that a replay
validates exactly as `POST /v1/batch` does (no second validator).

Used: `decode_json_batch` and `decode_avro_batch` (a dead letter goes through them as a one-event batch),
`gateway.ingest.plan_json` / `plan_avro`, the schema cache (`SchemaCache`, `HttpRegistry`, `NotFound`, filled by
its own `refresh`), `gateway.config.Limits`, `gateway.errors.GatewayError`, `gateway.records.RequestMeta`.
This release moves some of them (gateway/wire.py -> json_batch.py, registry.py -> schema_cache.py, `plan_avro`
taking the decoded `AvroBatch`, routes discovered from the registry rather than the catalog): both layouts are
accepted here, so that only this file knows.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gateway import ingest
from gateway.avro_batch import BATCH_SCHEMA, decode_avro_batch
from gateway.config import Limits
from gateway.errors import GatewayError, RegistryUnavailable
from gateway.ingest import Plan
from gateway.records import RequestMeta

__all__ = ["BATCH_SCHEMA", "GatewayError", "Limits", "NotFound", "Plan", "RequestMeta", "decode_avro_batch",
           "decode_json_batch", "load_cache", "new_cache", "plan_avro", "plan_json"]


def _module(*names: str) -> ModuleType:
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    raise ModuleNotFoundError(f"none of {names}")


_json_batch = _module("gateway.json_batch", "gateway.wire")
_cache = _module("gateway.schema_cache", "gateway.registry")

decode_json_batch: Callable[[bytes, Limits], tuple[Any, list[Any]]] = _json_batch.decode_json_batch
NotFound: type[Exception] = _cache.NotFound


def new_cache(source: Any) -> Any:
    """A SchemaCache over `source` (anything with `async get(path)`), with the gateway's default routes."""
    params = inspect.signature(_cache.SchemaCache).parameters
    if "routes" in params:  # routes from the schema catalog
        from gateway.schemas import load_routes  # type: ignore[attr-defined,unused-ignore]  # noqa: PLC0415

        return _cache.SchemaCache(load_routes(), source)
    return _cache.SchemaCache(source)  # routes discovered from the registry's subjects


def load_cache(registry_url: str, timeout_s: float = 10.0) -> Any:
    """Every registered version of every event subject, loaded by the gateway's cache; RegistryUnavailable."""
    async def fill() -> Any:
        source = _cache.HttpRegistry(registry_url, timeout_s)
        cache = new_cache(source)
        try:
            await cache.refresh()
        finally:
            await source.close()
        return cache

    cache = asyncio.run(fill())
    if not cache.healthy:
        raise RegistryUnavailable(f"registry {registry_url} unreachable")
    return cache


def plan_json(batch: Any, events: list[Any], cache: Any, meta: RequestMeta, deadletter_topic: str) -> Plan:
    return ingest.plan_json(batch, events, cache, meta, deadletter_topic)


def plan_avro(body: bytes, cache: Any, meta: RequestMeta, deadletter_topic: str) -> Plan:
    """`body` is an Avro batch: decoded and planned as the gateway does."""
    batch = decode_avro_batch(body, Limits())
    first = next(iter(inspect.signature(ingest.plan_avro).parameters))
    if first == "events":  # plan_avro(events: list[bytes], ...)
        return ingest.plan_avro(batch.events, cache, meta, deadletter_topic)  # type: ignore[arg-type,unused-ignore]
    return ingest.plan_avro(batch, cache, meta, deadletter_topic)  # type: ignore[arg-type,unused-ignore]
