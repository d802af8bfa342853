"""What the dead-letter unit tests add to tests/support: a page_view version the catalog does not have yet."""

from __future__ import annotations

import json

from tests.support.events import page_view
from tests.support.fake_registry import FakeRegistry

__all__ = ["FakeRegistry", "page_view", "page_view_v3"]


def page_view_v3(text_of_v2: str) -> str:
    """page_view's latest schema with one more optional property field."""
    schema = json.loads(text_of_v2)
    props = next(f for f in schema["fields"] if f["name"] == "properties")
    props["type"]["fields"].append({"name": "referrer_v3", "type": ["null", "string"], "default": None})
    return json.dumps(schema)
