"""Writer schemas by id from a Confluent-compatible registry (common.avro_frame's cache), with the subject and
version each is registered under, fetched once per id and kept (ids never change)."""

from __future__ import annotations

import threading

from common.avro_frame import WriterSchemas
from common.registry_access import RegistryAccess
from common.registry_client import RegistryClient, RegistryClientError
from subscribe.decode import SchemaNotFound, WriterSchema, event_type_of


class RegistrySchemas:
    """Blocking (stdlib HTTP): called from the Kafka reader threads, never on the event loop."""

    def __init__(self, url: str, timeout_s: float = 5.0, max_ids: int = 100_000, *,
                 access: RegistryAccess | None = None) -> None:
        self._client = RegistryClient.of(url, access or RegistryAccess(), timeout_s)
        self._writers = WriterSchemas(self._client)
        self._known: dict[int, WriterSchema] = {}
        self._lock = threading.Lock()
        self._max_ids = max_ids

    def get(self, schema_id: int) -> WriterSchema:
        hit = self._known.get(schema_id)
        if hit is not None:
            return hit
        try:
            doc, parsed = self._writers.raw(schema_id), self._writers.parsed(schema_id)
            versions = self._client.call("GET", f"/schemas/ids/{schema_id}/versions")
        except RegistryClientError as exc:
            if exc.not_found:
                raise SchemaNotFound(f"schema id {schema_id} is not in the registry") from None
            raise
        where = _preferred(versions if isinstance(versions, list) else [])
        schema = WriterSchema(schema_id, parsed, where[0], where[1], event_type_of(doc))
        with self._lock:
            if len(self._known) < self._max_ids:  # ids are few; the cap only guards against a hostile registry
                self._known[schema_id] = schema
        return schema


def _preferred(versions: list[dict[str, object]]) -> tuple[str | None, int | None]:
    """The (subject, version) to show: a Headwater subject first (an id may be registered under several)."""
    ranked = sorted(versions, key=lambda v: not str(v.get("subject", "")).startswith("headwater."))
    if not ranked:
        return None, None
    version = ranked[0].get("version")
    return str(ranked[0].get("subject")), int(version) if isinstance(version, int) else None
