"""A schema registry fake for unit tests: schemas served as the Confluent REST API would, async (`get`) or sync."""

from __future__ import annotations

from typing import Any

from common.registry_client import RegistryClient, RegistryClientError
from gateway.errors import RegistryUnavailable
from gateway.schema_cache import NotFound
from schemas.catalog import load_catalog


class FakeRegistry:
    """Every catalog version under ids 1.. (none with `catalog=False`); `register` adds a version as a client of the
    real registry could, `add` one under a chosen id; `calls` lists the paths asked for; `down` makes every call
    fail."""

    def __init__(self, *, catalog: bool = True) -> None:
        self.calls: list[str] = []
        self.down = False
        self.docs: dict[str, Any] = {"/subjects": []}
        self.by_id: dict[int, dict[str, Any]] = {}
        self.uses: dict[int, list[dict[str, Any]]] = {}
        for et in load_catalog().event_types.values() if catalog else ():
            for v in range(1, et.latest_version + 1):
                self.register(et.subject, et.schema_text(v))

    def register(self, subject: str, schema_text: str) -> int:
        """Add `schema_text` as the next version of `subject` (same text, same id); return its id."""
        schema_id = next((i for i, d in self.by_id.items() if d["schema"] == schema_text), len(self.by_id) + 1)
        self.add(subject, len(self.docs.get(f"/subjects/{subject}/versions", [])) + 1, schema_id, schema_text)
        return schema_id

    def add(self, subject: str, version: int, schema_id: int, schema_text: str) -> None:
        """`schema_text` as version `version` of `subject` under id `schema_id`."""
        versions = self.docs.setdefault(f"/subjects/{subject}/versions", [])
        if not versions:
            self.docs["/subjects"].append(subject)
        doc = {"subject": subject, "version": version, "id": schema_id, "schema": schema_text}
        versions.append(version)
        self.docs[f"/subjects/{subject}/versions/{version}"] = doc
        self.docs[f"/subjects/{subject}/versions/latest"] = doc
        self.by_id.setdefault(schema_id, doc)
        self.uses.setdefault(schema_id, []).append({"subject": subject, "version": version})

    async def get(self, path: str) -> Any:
        """The gateway's registry source: the answer to GET `path`; NotFound, or RegistryUnavailable when down."""
        return self.answer(path)

    def answer(self, path: str) -> Any:
        self.calls.append(path)
        if self.down:
            raise RegistryUnavailable("registry down (fake)")
        if path.startswith("/schemas/ids/") and path.endswith("/versions"):
            uses = self.uses.get(int(path.split("/")[3]))
            if uses is None:
                raise NotFound(path)
            return list(uses)
        if path.startswith("/schemas/ids/"):
            doc = self.by_id.get(int(path.rsplit("/", 1)[1]))
            if doc is None:
                raise NotFound(path)
            return {"schema": doc["schema"]}
        if path not in self.docs:
            raise NotFound(path)
        return self.docs[path]

    def id_of(self, event_type: str, version: int) -> int:
        return int(self.docs[f"/subjects/headwater.events.{event_type}/versions/{version}"]["id"])


class FakeRegistryClient(RegistryClient):
    """`registry` behind common/registry_client.py's synchronous client (what common/ and the tools call): GETs
    answered by the fake, a 404 (40403) for what it lacks, a 503 when it is down; nothing else is sent."""

    def __init__(self, registry: FakeRegistry) -> None:
        super().__init__("http://fake")
        self.registry = registry

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        if method != "GET":
            raise NotImplementedError(f"{method} {path}: the fake answers GETs only")
        try:
            return self.registry.answer(path)
        except NotFound as exc:
            raise RegistryClientError(404, 40403, "Schema not found") from exc
        except RegistryUnavailable as exc:
            raise RegistryClientError(503, 50301, str(exc)) from exc
