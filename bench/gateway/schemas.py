"""The event schemas a gateway benchmark encodes with: the gateway's schema cache filled once, a writer schema by id."""

from __future__ import annotations

from typing import Any

from common.avro_frame import WriterSchemas
from gateway.schema_cache import HttpRegistry, SchemaCache


async def schema_cache(registry_url: str) -> SchemaCache:
    """The gateway's own cache of the registry's event schemas, refreshed once (what the bound encodes with)."""
    registry = HttpRegistry(registry_url, 10.0)
    cache = SchemaCache(registry)
    await cache.refresh()
    await registry.close()
    return cache


def schema_doc(registry_url: str, schema_id: int) -> Any:
    """The writer schema registered under `schema_id`, as JSON (RegistryClientError when the registry cannot say)."""
    return WriterSchemas(registry_url).raw(schema_id)
