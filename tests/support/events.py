"""Test events as a producer sends them (the wire's JSON shape) and the batches that carry them."""

from __future__ import annotations

import time
import uuid
from typing import Any


def page_view_properties(i: int = 0, marker: str = "", **overrides: Any) -> dict[str, Any]:
    """The `properties` of a page_view with every field of the latest version (the SDKs' `track` shape)."""
    props: dict[str, Any] = {
        "url": f"https://shop.example.com/p/{i}", "path": f"/p/{i}", "referrer": None, "title": marker or "Home",
        "user_agent": "headwater-test", "user_id": f"u-{i % 97}", "session_id": marker or "s1",
        "viewport": {"width": 1280, "height": 720, "device_pixel_ratio": 1.0}, "locale": "en-GB",
        "utm": {}, "load_time_ms": float(i % 500), "experiment_ids": []}
    props.update(overrides)
    return props


def page_view(seq: int = 0, marker: str = "", **overrides: Any) -> dict[str, Any]:
    """A whole page_view event (envelope and the required properties only), valid against every version."""
    event: dict[str, Any] = {
        "event_id": str(uuid.uuid4()), "event_type": "page_view", "producer_id": str(uuid.uuid4()), "seq": seq,
        "node_id": f"node-{marker or 'x'}", "created_at": int(time.time() * 1000), "context": {"run": marker},
        "properties": {"url": f"https://example.com/{marker}", "path": "/", "title": "Home", "user_agent": "ua",
                       "session_id": "s1", "viewport": {"width": 1280, "height": 720}, "locale": "en"},
    }
    event.update(overrides)
    return event


def batch(*events: dict[str, Any], batch_id: str | None = None, sdk: str = "headwater-test") -> dict[str, Any]:
    """A JSON batch as an SDK sends it (`sdk`: the name it gives, version 0)."""
    return {"batch_id": batch_id or str(uuid.uuid4()), "sent_at": int(time.time() * 1000),
            "sdk": {"name": sdk, "version": "0"}, "events": list(events)}
