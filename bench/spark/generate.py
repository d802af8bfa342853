"""Generates Confluent-framed Headwater events of every type and version, for the benchmark and the tests."""

from __future__ import annotations

import io
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fastavro
from confluent_kafka import Producer

from common.avro_frame import header
from common.kafka_produce import produce as produce_with_deadline
from common.registry_client import RegistryClient
from schemas.catalog import load_catalog

USER_AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
]
CLIENT_IPS = ["8.8.8.8", "81.2.69.160", "1.1.1.1", "2a00:1450::1", "10.0.0.7"]


@dataclass(frozen=True)
class Event:
    """One generated event: its record (the v2 superset of fields), type, version and Kafka metadata."""

    record: dict[str, Any]
    event_type: str
    version: int
    headers: list[tuple[str, str | bytes | None]]

    @property
    def key(self) -> bytes:
        return str(self.record["node_id"]).encode()


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(count))


_WORDS = ["alpine", "basalt", "cedar", "delta", "ember", "fjord", "granite", "harbor", "indigo", "juniper",
          "kelp", "lagoon", "meadow", "nectar", "obsidian", "prairie", "quartz", "river", "sierra", "tundra"]


def properties(event_type: str, rng: random.Random, n: int) -> dict[str, Any]:
    """A properties record valid for every version of `event_type` (v1 writers ignore v2's fields).

    Sized like production events (the design's 1-3 KB, Avro-encoded): long URLs and titles, campaign
    parameters, several line items, dozens of metric tags.
    """
    if event_type == "page_view":
        params = rng.sample(_WORDS, rng.randint(8, 20))
        query = "&".join(f"{w}={uuid.UUID(int=rng.getrandbits(128)).hex}" for w in params)
        return {"url": f"https://shop.example/p/{n % 50}?{query}", "path": f"/p/{n % 50}",
                "referrer": f"https://search.example/?q={_words(rng, rng.randint(3, 12)).replace(' ', '+')}",
                "title": f"Product {n % 50}: {_words(rng, rng.randint(5, 20))}",
                "user_agent": USER_AGENTS[n % len(USER_AGENTS)],
                "user_id": None if n % 4 == 0 else f"u{n % 97}", "session_id": f"s{n % 31}",
                "viewport": {"width": 1280, "height": 720, "device_pixel_ratio": 1.0}, "locale": "en-GB",
                "utm": {"utm_source": "newsletter", "utm_medium": "email", "utm_campaign": _words(rng, 4),
                        "utm_content": _words(rng, rng.randint(2, 8)), "utm_term": _words(rng, 3)},
                "load_time_ms": float(rng.randint(50, 3000)),
                "experiment_ids": [f"exp-{rng.randrange(10**6):06d}-{_words(rng, 2)}"
                                   for _ in range(rng.randint(4, 30))]}
    if event_type == "purchase":
        items: list[dict[str, Any]] = [
            {"sku": f"sku-{rng.randrange(10**6):06d}", "name": _words(rng, rng.randint(3, 9)),
             "category": rng.choice([None, _words(rng, 2)]), "quantity": rng.randint(1, 3),
             "unit_price": round(rng.uniform(1, 200), 2)} for _ in range(rng.randint(10, 28))]
        subtotal = round(sum(i["quantity"] * i["unit_price"] for i in items), 2)
        return {"order_id": f"o{n}", "user_id": f"u{n % 97}", "currency": "EUR", "line_items": items,
                "subtotal": subtotal, "tax": 0.0, "shipping": 0.0, "total": subtotal, "payment_method": "card",
                "coupon_code": None, "discount": None, "shipping_country": "DE"}
    tags = {f"{rng.choice(_WORDS)}_{i}": _words(rng, rng.randint(1, 4)) for i in range(rng.randint(30, 90))}
    return {"host": f"h{n % 5}", "service": "api", "metric": "cpu", "kind": "gauge",
            "value": round(rng.uniform(0, 100), 3), "unit": "percent", "tags": tags, "interval_ms": 1000,
            "sample_count": 1}


def generate(count: int, *, producers: int = 4, start_ms: int = 1_790_000_000_000, spacing_ms: int = 50,
             seed: int = 7, nodes: int = 20) -> Iterator[Event]:
    """`count` events round-robin over producers (gapless seq each), types and both schema versions."""
    rng = random.Random(seed)
    producer_ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(producers)]
    types = ["page_view", "purchase", "server_metric"]
    seqs = dict.fromkeys(producer_ids, 0)
    for n in range(count):
        pid = producer_ids[n % producers]
        event_type = types[n % 3]
        created = start_ms + n * spacing_ms
        event_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        record: dict[str, Any] = {
            "event_id": event_id, "event_type": event_type,
            "producer_id": pid, "seq": seqs[pid], "node_id": f"node-{(n % nodes) + 1:04d}",
            "created_at": created, "sent_at": created + 5, "received_at": None if n % 2 else created + 20,
            "sdk_name": "headwater-python", "sdk_version": "0.1.0", "context": {"env": "test"},
            "properties": properties(event_type, rng, n),
        }
        seqs[pid] += 1
        headers: list[tuple[str, str | bytes | None]] = [("event_id", event_id.encode()), ("producer_id", pid.encode()),
                   ("received_at", str(created + 20).encode()), ("client_ip", CLIENT_IPS[n % len(CLIENT_IPS)].encode()),
                   ("user_agent", USER_AGENTS[(n + 1) % len(USER_AGENTS)].encode()), ("source", b"test")]
        yield Event(record, event_type, 1 + (n // 3) % 2, headers)


class Encoder:
    """Confluent framing with fastavro: magic 0, 4-byte big-endian schema id, Avro binary."""

    def __init__(self, ids: dict[tuple[str, int], int]) -> None:
        catalog = load_catalog()
        self.ids = ids
        self.parsed = {(t, v): fastavro.parse_schema(catalog.event_types[t].schema(v)) for (t, v) in ids}

    def encode(self, event: Event) -> bytes:
        key = (event.event_type, event.version)
        buf = io.BytesIO()
        buf.write(header(self.ids[key]))
        fastavro.schemaless_writer(buf, self.parsed[key], event.record)
        return buf.getvalue()


def register_catalog(registry_url: str) -> dict[tuple[str, int], int]:
    """Register every version of every event type (idempotent) and return (type, version) -> schema id."""
    client = RegistryClient(registry_url)
    ids = {}
    for name, et in load_catalog().event_types.items():
        for v in range(1, et.latest_version + 1):
            ids[(name, v)] = client.register(et.subject, et.schema_text(v))
    return ids


def produce(bootstrap: str, topic: str, payloads: list[tuple[bytes, bytes, list[tuple[str, str | bytes | None]]]],
            batch: int = 5000) -> None:
    """Produce (key, value, headers) in Kafka transactions of `batch` records, like the gateway does."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"hw-gen-{uuid.uuid4()}",
                         "enable.idempotence": True, "acks": "all", "linger.ms": 5, "compression.type": "zstd",
                         "queue.buffering.max.messages": 1_000_000})
    producer.init_transactions(30)
    for start in range(0, len(payloads), batch):
        producer.begin_transaction()
        deadline = time.monotonic() + 60
        for key, value, headers in payloads[start:start + batch]:
            produce_with_deadline(producer, topic, value, key, headers, deadline=deadline)
        producer.commit_transaction(60)
