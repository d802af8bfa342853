"""A registry fake for the unit tests: the catalog's schemas served as the Confluent REST API would (`get(path)`)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from deadletter.gateway_code import NotFound
from schemas.catalog import load_catalog


class FakeRegistry:
    """Every catalog version under ids 1..; `add` registers more."""

    def __init__(self) -> None:
        self.docs: dict[str, Any] = {"/subjects": []}
        self.by_id: dict[int, dict[str, Any]] = {}
        next_id = 1
        for et in load_catalog().event_types.values():
            self.docs["/subjects"].append(et.subject)
            self.docs[f"/subjects/{et.subject}/versions"] = []
            for v in range(1, et.latest_version + 1):
                self.add(et.subject, v, next_id, et.schema_text(v))
                next_id += 1

    def add(self, subject: str, version: int, schema_id: int, text: str) -> None:
        doc = {"subject": subject, "version": version, "id": schema_id, "schema": text}
        self.docs[f"/subjects/{subject}/versions/{version}"] = doc
        self.docs[f"/subjects/{subject}/versions/latest"] = doc
        self.docs[f"/subjects/{subject}/versions"].append(version)
        self.by_id[schema_id] = doc

    async def get(self, path: str) -> Any:
        if path.startswith("/schemas/ids/"):
            doc = self.by_id.get(int(path.rsplit("/", 1)[1]))
            if doc is None:
                raise NotFound(path)
            return {"schema": doc["schema"]}
        if path not in self.docs:
            raise NotFound(path)
        return self.docs[path]


def page_view_v3(text_of_v2: str) -> str:
    """page_view's latest schema with one more optional property field."""
    schema = json.loads(text_of_v2)
    props = next(f for f in schema["fields"] if f["name"] == "properties")
    props["type"]["fields"].append({"name": "referrer_v3", "type": ["null", "string"], "default": None})
    return json.dumps(schema)


def page_view(seq: int, marker: str, **overrides: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "event_id": str(uuid.uuid4()), "event_type": "page_view", "producer_id": str(uuid.uuid4()), "seq": seq,
        "node_id": f"node-{marker}", "created_at": int(time.time() * 1000), "context": {"run": marker},
        "properties": {"url": f"https://example.com/{marker}", "path": "/", "title": "Home", "user_agent": "ua",
                       "session_id": "s1", "viewport": {"width": 1280, "height": 720}, "locale": "en"},
    }
    event.update(overrides)
    return event
