"""The schema cache: latest writer schema and id per event type, fetched from a Confluent-compatible registry."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, NamedTuple

from ._exceptions import TransportError
from ._transport import Request, Transport

SUBJECT_PREFIX = "headwater.events."  # RecordNameStrategy subject of an event type


class WriterSchema(NamedTuple):
    """A registered schema: its registry id, version and parsed (fastavro) form."""

    schema_id: int
    version: int
    parsed: Any


class SchemaCache:
    """`GET {registry}/subjects/headwater.events.<type>/versions/latest`, cached for `refresh_s` seconds.

    A missing subject is cached too (as None) for the same time, so unknown types do not hammer the
    registry. `invalidate` forgets a type (after the gateway said its schema is unknown).
    """

    def __init__(self, registry_url: str, transport: Transport, refresh_s: float, timeout_s: float) -> None:
        self._base = registry_url.rstrip("/")
        self._transport = transport
        self._refresh_s = refresh_s
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, WriterSchema | None]] = {}

    def get(self, event_type: str) -> WriterSchema | None:
        """The latest schema of `event_type`, None if the registry has no such subject.

        Raises `TransportError` if the registry cannot be reached (the batch is retried later).
        """
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(event_type)
        if hit is not None and hit[0] > now:
            return hit[1]
        schema = self._fetch(event_type)
        with self._lock:
            self._cache[event_type] = (now + self._refresh_s, schema)
        return schema

    def invalidate(self, event_type: str) -> None:
        """Forget the cached schema of `event_type`."""
        with self._lock:
            self._cache.pop(event_type, None)

    def _fetch(self, event_type: str) -> WriterSchema | None:
        url = f"{self._base}/subjects/{SUBJECT_PREFIX}{event_type}/versions/latest"
        resp = self._transport.send(Request("GET", url, {"Accept": "application/vnd.schemaregistry.v1+json"}),
                                    self._timeout_s)
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise TransportError(f"registry answered HTTP {resp.status} for {event_type}")
        try:
            import fastavro  # noqa: PLC0415 - the `avro` extra, imported only on this path

            doc = json.loads(resp.body)
            parsed = fastavro.parse_schema(json.loads(doc["schema"]), _write_hint=False)
            return WriterSchema(int(doc["id"]), int(doc.get("version", 0)), parsed)
        except (ValueError, KeyError, TypeError) as exc:
            raise TransportError(f"registry answer for {event_type} unusable: {exc}") from exc
