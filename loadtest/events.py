"""Generates realistic page_view, purchase and server_metric events of 1-3 KB (as JSON) for the latest schemas.

Each event type's properties are built from small pools of plausible values; the variable-length parts (URL
query, experiments, line items, metric tags) grow until the event reaches a size drawn uniformly from
[MIN_BYTES, MAX_BYTES]. The field names come from the event type's latest schema version in `schemas/`, which
`tests/loadtest/test_events.py` checks every generated event against with fastavro.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgspec

MIN_BYTES = 1024
MAX_BYTES = 3072
EVENT_TYPES: tuple[str, ...] = ("page_view", "purchase", "server_metric")
WEIGHTS: tuple[int, ...] = (70, 10, 20)

_encode = msgspec.json.encode
Json = dict[str, Any]

_DOMAINS = ("shop.example.com", "www.example.org", "blog.example.net", "docs.example.io")
_SECTIONS = ("products", "category", "checkout", "account", "search", "blog", "help", "cart")
_WORDS = ("alpine", "boots", "trail", "merino", "jacket", "winter", "sale", "lamp", "desk", "oak", "coffee",
          "grinder", "kettle", "linen", "sheets", "garden", "hose", "tent", "stove", "mug", "wool", "scarf")
_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
    "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Mobile Safari/537.36",
)
_LOCALES = ("en-US", "de-DE", "fr-FR", "es-ES", "ja-JP", "pt-BR", "zh-CN", "it-IT")
_VIEWPORTS = ((1920, 1080, 1.0), (1440, 900, 2.0), (390, 844, 3.0), (412, 915, 2.625), (1366, 768, 1.0))
_UTM = {"utm_source": ("newsletter", "google", "bing", "partner"), "utm_medium": ("email", "cpc", "social"),
        "utm_campaign": ("black-friday-2026", "winter-launch", "retargeting-q4"), "utm_term": _WORDS,
        "utm_content": ("hero-banner", "sidebar", "footer-link")}
_CURRENCIES = ("EUR", "USD", "GBP", "JPY", "CHF")
_PAYMENTS = ("card", "paypal", "invoice", "apple_pay", "sepa_debit")
_COUNTRIES = ("DE", "FR", "US", "GB", "ES", "IT", "NL", "JP")
_SERVICES = ("checkout", "catalog", "search", "payments", "auth", "inventory", "shipping")
_METRICS = (("http.server.duration", "histogram_sum", "ms"), ("http.server.requests", "counter", "1"),
            ("process.memory.rss", "gauge", "By"), ("process.cpu.utilization", "gauge", "1"),
            ("db.client.connections.usage", "gauge", "1"), ("queue.depth", "gauge", "1"))
_LABEL_KEYS = ("region", "zone", "cluster", "namespace", "pod", "container", "route", "method", "status_code",
               "app.kubernetes.io/name", "app.kubernetes.io/version", "app.kubernetes.io/component",
               "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by", "deployment", "replicaset",
               "node", "instance_type", "os", "arch", "runtime", "runtime_version", "team", "cost_center",
               "tier", "shard", "canary", "build_sha", "image", "owner")


def uuid7(now_ms: int | None = None) -> str:
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, variant 10, 74 random bits."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & (2**48 - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64 | 0b10 << 62 | rand & (2**62 - 1)
    return str(uuid.UUID(int=value))


def _size(value: object) -> int:
    return len(_encode(value))


def _word(rng: random.Random, n: int = 1, sep: str = "-") -> str:
    return sep.join(rng.choice(_WORDS) for _ in range(n))


class _Pools:
    """Pre-built variable-length parts, so that growing an event to its size costs a few list operations."""

    def __init__(self, rng: random.Random) -> None:
        self.experiments = [f"exp-{_word(rng)}-{rng.randrange(2024, 2027)}-{rng.randrange(100):02d}-{c}"
                            for c in "abcd" for _ in range(100)]
        self.items = [{"sku": f"SKU-{rng.randrange(10**8):08d}", "name": _word(rng, rng.randint(2, 5), " ").title(),
                       "category": rng.choice((None, *_SECTIONS)), "quantity": rng.randint(1, 4),
                       "unit_price": round(rng.uniform(2.0, 400.0), 2)} for _ in range(1000)]
        self.tag_values = {key: [f"{_word(rng, rng.randint(1, 3))}-{rng.randrange(10**4)}" for _ in range(20)]
                           for key in _LABEL_KEYS}
        self.paths = [f"/{rng.choice(_SECTIONS)}/{_word(rng, 3)}-{rng.randrange(10**6)}" for _ in range(500)]
        self.titles = [_word(rng, 3, " ").title() for _ in range(200)]


def _page_view(rng: random.Random, pools: _Pools) -> Json:
    domain = rng.choice(_DOMAINS)
    path = rng.choice(pools.paths)
    width, height, ratio = rng.choice(_VIEWPORTS)
    utm = {key: rng.choice(_UTM[key]) for key in rng.sample(_UTM_KEYS, rng.randrange(len(_UTM_KEYS) + 1))}
    query = "&".join(f"{k}={v}" for k, v in utm.items())
    return {
        "url": f"https://{domain}{path}" + (f"?{query}" if query else ""), "path": path,
        "referrer": rng.choice((None, f"https://www.google.com/search?q={_word(rng, 2, '+')}", f"https://{domain}/")),
        "title": f"{rng.choice(pools.titles)} | {domain}", "user_agent": rng.choice(_AGENTS),
        "user_id": rng.choice((None, f"user-{rng.randrange(10**7)}")),
        "session_id": str(uuid.UUID(int=rng.getrandbits(128))),
        "viewport": {"width": width, "height": height, "device_pixel_ratio": ratio},
        "locale": rng.choice(_LOCALES), "utm": utm, "load_time_ms": round(rng.lognormvariate(6.5, 0.6), 1),
        "experiment_ids": [],
    }


def _grow_page_view(rng: random.Random, pools: _Pools, props: Json, n: int) -> None:
    props["experiment_ids"].extend(rng.choices(pools.experiments, k=n))


def _purchase(rng: random.Random, pools: _Pools) -> Json:
    coupon = rng.choice((None, None, "WINTER10", "FREESHIP"))
    return {
        "order_id": f"ord-{rng.randrange(10**9):09d}", "user_id": f"user-{rng.randrange(10**7)}",
        "currency": rng.choice(_CURRENCIES), "line_items": [rng.choice(pools.items)], "subtotal": 0.0, "tax": 0.0,
        "shipping": 0.0 if coupon == "FREESHIP" else 4.95, "total": 0.0, "payment_method": rng.choice(_PAYMENTS),
        "coupon_code": coupon, "discount": None, "shipping_country": rng.choice(_COUNTRIES),
    }


def _grow_purchase(rng: random.Random, pools: _Pools, props: Json, n: int) -> None:
    props["line_items"].extend(rng.choices(pools.items, k=n))
    subtotal = round(sum(i["quantity"] * i["unit_price"] for i in props["line_items"]), 2)
    props["discount"] = round(subtotal * 0.1, 2) if props["coupon_code"] == "WINTER10" else None
    props["subtotal"], props["tax"] = subtotal, round(subtotal * 0.19, 2)
    props["total"] = round(subtotal + props["tax"] + props["shipping"] - (props["discount"] or 0.0), 2)


def _server_metric(rng: random.Random, pools: _Pools) -> Json:
    metric, kind, unit = rng.choice(_METRICS)
    service = rng.choice(_SERVICES)
    return {
        "host": f"{service}-{rng.randrange(100):02d}.prod.internal", "service": service, "metric": metric,
        "kind": kind, "value": round(rng.lognormvariate(3.0, 1.2), 3), "unit": unit, "tags": {},
        "interval_ms": 10_000 if kind == "counter" else None,
        "sample_count": rng.randrange(1, 5000) if kind == "histogram_sum" else None,
    }


def _grow_server_metric(rng: random.Random, pools: _Pools, props: Json, n: int) -> None:
    tags: dict[str, str] = props["tags"]
    free = [k for k in _LABEL_KEYS if k not in tags]
    for key in rng.sample(free, min(n, len(free))):
        tags[key] = rng.choice(pools.tag_values[key])
    for i in range(n - len(free)):  # beyond the usual labels: numbered ones
        tags[f"label_{len(tags)}_{i}"] = rng.choice(pools.tag_values["route"])


# event type -> (base properties, add n variable-length units, mean bytes per unit)
_KINDS: dict[str, tuple[Callable[[random.Random, _Pools], Json],
                        Callable[[random.Random, _Pools, Json, int], None], int]] = {
    "page_view": (_page_view, _grow_page_view, 27),
    "purchase": (_purchase, _grow_purchase, 110),
    "server_metric": (_server_metric, _grow_server_metric, 42),
}
_UTM_KEYS = sorted(_UTM)


class EventFactory:
    """Builds wire events (protocol.md section 2) for one process; deterministic for a given seed."""

    def __init__(self, seed: int = 7, app: str = "shop") -> None:
        self._rng = random.Random(seed)
        self._pools = _Pools(random.Random(seed + 1))
        self._app = app

    def event(self, producer_id: str, node_id: str, seq: int, now_ms: int, event_type: str | None = None) -> Json:
        """One event of `event_type` (default: drawn by WEIGHTS) whose JSON is MIN_BYTES..MAX_BYTES long."""
        rng = self._rng
        kind = event_type or rng.choices(EVENT_TYPES, WEIGHTS)[0]
        base, grow, unit = _KINDS[kind]
        props = base(rng, self._pools)
        event: Json = {
            "event_id": uuid7(now_ms), "event_type": kind, "producer_id": producer_id, "seq": seq,
            "node_id": node_id, "created_at": now_ms - rng.randrange(0, 2000),
            "context": {"app": self._app, "env": "loadtest", "app_version": f"4.{rng.randrange(20)}.{rng.randrange(9)}",
                        "library": "headwater-loadtest", "region": rng.choice(_REGIONS)},
            "properties": props,
        }
        target = rng.randint(MIN_BYTES + 32, MAX_BYTES - 160)
        grow(rng, self._pools, props, max(0, (target - _size(event)) // unit))
        size = _size(event)
        while size < MIN_BYTES:  # the estimate fell short: one unit at a time
            grow(rng, self._pools, props, 1)
            size = _size(event)
        if size > MAX_BYTES:  # the estimate overshot (large units drawn): draw another event
            return self.event(producer_id, node_id, seq, now_ms, event_type)
        return event


_REGIONS = ("eu-west-1", "us-east-1", "ap-south-1")
