"""Benchmark workload: realistic page_view events (about 1.2 KB each) as compressed JSON and Avro batch bodies."""

from __future__ import annotations

import io
import json
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

import fastavro
import zstandard

from common.avro_frame import header
from gateway.avro_batch import BATCH_SCHEMA

EVENTS_PER_BATCH = 40


@dataclass(frozen=True)
class Body:
    data: bytes
    events: int
    content_type: str


def page_view(rng: random.Random, seq: int, producer: str, node: str) -> dict[str, Any]:
    path = "/" + "/".join(rng.choice(["shop", "cart", "item", "blog", "help"]) for _ in range(3))
    return {
        "event_id": str(uuid.uuid4()), "event_type": "page_view", "producer_id": producer, "seq": seq,
        "node_id": node, "created_at": int(time.time() * 1000),
        "context": {"app": "shop", "env": "bench", "locale": "en-GB", "build": f"{rng.randrange(10**6)}"},
        "properties": {
            "url": f"https://example.com{path}?q={uuid.uuid4().hex}", "path": path,
            "referrer": rng.choice([None, "https://search.example/?q=" + uuid.uuid4().hex]),
            "title": "Example page " + uuid.uuid4().hex * 2,
            "user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 "
                          f"Safari/537.36 {uuid.uuid4().hex}",
            "user_id": f"user-{rng.randrange(10**6)}", "session_id": uuid.uuid4().hex,
            "viewport": {"width": rng.choice([1280, 1920, 390]), "height": rng.choice([720, 1080, 844])},
            "locale": "en-GB", "utm": {"utm_source": "news", "utm_medium": "email", "utm_campaign": uuid.uuid4().hex},
            "load_time_ms": rng.random() * 3000, "experiment_ids": [uuid.uuid4().hex for _ in range(8)],
        },
    }


class Workload:
    """Builds unique batch bodies (fresh batch_id and event ids each), compressed with zstd like the SDK."""

    def __init__(self, schema_text: str, schema_id: int, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.zstd = zstandard.ZstdCompressor(level=3)
        self.schema = fastavro.parse_schema(json.loads(schema_text))
        self.schema_id = schema_id
        self.seq = 0
        self.producer = str(uuid.uuid4())

    def _events(self) -> list[dict[str, Any]]:
        events = [page_view(self.rng, self.seq + i, self.producer, f"node-{self.rng.randrange(1000)}")
                  for i in range(EVENTS_PER_BATCH)]
        self.seq += EVENTS_PER_BATCH
        return events

    def json_body(self) -> Body:
        doc = {"batch_id": str(uuid.uuid4()), "sent_at": int(time.time() * 1000),
               "sdk": {"name": "headwater-bench", "version": "0"}, "events": self._events()}
        return Body(self.zstd.compress(json.dumps(doc).encode()), EVENTS_PER_BATCH, "application/json")

    def avro_body(self) -> Body:
        framed = []
        sent = int(time.time() * 1000)
        for ev in self._events():
            rec = {**ev, "sent_at": sent, "received_at": None, "sdk_name": "headwater-bench", "sdk_version": "0"}
            buf = io.BytesIO()
            buf.write(header(self.schema_id))
            fastavro.schemaless_writer(buf, self.schema, rec)
            framed.append(buf.getvalue())
        out = io.BytesIO()
        fastavro.schemaless_writer(out, BATCH_SCHEMA, {
            "batch_id": str(uuid.uuid4()), "sent_at": sent, "sdk_name": "headwater-bench", "sdk_version": "0",
            "events": framed})
        return Body(self.zstd.compress(out.getvalue()), EVENTS_PER_BATCH, "application/vnd.headwater.batch+avro")

    def bodies(self, kind: str, count: int) -> list[Body]:
        make = self.json_body if kind == "json" else self.avro_body
        return [make() for _ in range(count)]
