"""The gateway's own decoding, validation and encoding, reached through this one narrow surface so that a replay
validates exactly as `POST /v1/batch` does (no second validator).

Used: `decode_json_batch` and `decode_avro_batch` (a dead letter goes through them as a one-event batch),
`gateway.ingest.plan_json` / `plan_avro`, the schema cache (`SchemaCache`, `HttpRegistry`, `NotFound`, filled by
its own `refresh`, which discovers the event types from the registry's subjects), `gateway.config.Limits`,
`gateway.errors.GatewayError`, `gateway.records.RequestMeta`, and the gateway's own parsing of its topic settings
(`HEADWATER_GATEWAY_EVENTS_TOPIC`, `HEADWATER_GATEWAY_TOPIC_OVERRIDES`) into its `TopicMap`, so a replayed event
goes to the topic the gateway would have written it to.
"""

from __future__ import annotations

import asyncio
from typing import Any

from common.registry_access import RegistryAccess
from gateway import ingest
from gateway.avro_batch import BATCH_SCHEMA, decode_avro_batch
from gateway.config import ConfigError as GatewayConfigError
from gateway.config import Limits
from gateway.config import _overrides as parse_overrides  # the gateway's parser: one format, one error text
from gateway.config import _topic as parse_topic
from gateway.errors import GatewayError, RegistryUnavailable
from gateway.ingest import Plan
from gateway.json_batch import decode_json_batch
from gateway.records import RequestMeta
from gateway.schema_cache import HttpRegistry, NotFound, SchemaCache
from gateway.schemas import TopicMap

__all__ = ["BATCH_SCHEMA", "GatewayConfigError", "GatewayError", "Limits", "NotFound", "Plan", "RegistryUnavailable",
           "RequestMeta", "TopicMap", "decode_avro_batch", "decode_json_batch", "load_cache", "new_cache", "plan_avro",
           "plan_json", "topic_map"]


def topic_map(events_topic: str, overrides: str) -> TopicMap:
    """The gateway's routing from its two settings' values; GatewayConfigError naming the bad one."""
    return TopicMap(parse_topic(events_topic), dict(parse_overrides(overrides)))


def new_cache(source: Any, topics: TopicMap | None = None) -> SchemaCache:
    """A SchemaCache over `source` (anything with `async get(path)`); event types come from its subjects."""
    return SchemaCache(source, topics)


def load_cache(registry_url: str, topics: TopicMap | None = None, timeout_s: float = 10.0, *,
               access: RegistryAccess | None = None) -> SchemaCache:
    """Every registered version of every event subject, loaded by the gateway's cache; RegistryUnavailable."""
    async def fill() -> SchemaCache:
        source = HttpRegistry(registry_url, timeout_s, access)
        cache = new_cache(source, topics)
        try:
            await cache.refresh()
        finally:
            await source.close()
        return cache

    cache = asyncio.run(fill())
    if not cache.healthy:
        raise RegistryUnavailable(f"registry {registry_url} unreachable")
    return cache


def plan_json(batch: Any, events: list[Any], cache: SchemaCache, meta: RequestMeta, deadletter_topic: str) -> Plan:
    return ingest.plan_json(batch, events, cache, meta, deadletter_topic)


def plan_avro(body: bytes, cache: SchemaCache, meta: RequestMeta, deadletter_topic: str) -> Plan:
    """`body` is an Avro batch: decoded and planned as the gateway does."""
    return ingest.plan_avro(decode_avro_batch(body, Limits()), cache, meta, deadletter_topic)
