"""Bodies of a chosen event size: `bench/gateway/workload.py`'s page_view bodies (about 1.2 KB an event), with each
event's `properties.title` lengthened until the event's JSON reaches the size asked (HEADWATER_PEERS_EVENT_BYTES),
so the capacity rule can be measured for 1-3 KB events with the same schema on both sides. The padding is random
hex, which compresses about as well as the workload's own ids, so a compressed producer batch is not flattered."""

from __future__ import annotations

import io
import json
import random
import uuid
from typing import Any

import fastavro
import zstandard

from bench.gateway.workload import Body, Workload
from common.avro_frame import header
from gateway.avro_batch import BATCH_SCHEMA

_zstd_out = zstandard.ZstdCompressor(level=3)
_zstd_in = zstandard.ZstdDecompressor()
_rng = random.Random(22)


def event_size(event: dict[str, Any]) -> int:
    return len(json.dumps(event).encode())


def pad(body: Body, event_bytes: int) -> Body:
    """The same batch with every event at least `event_bytes` long (events already as long are left as they are)."""
    doc = json.loads(_zstd_in.decompress(body.data, max_output_size=1 << 26))
    for event in doc["events"]:
        missing = event_bytes - event_size(event)
        if missing > 0:
            event["properties"]["title"] += _rng.randbytes((missing + 1) // 2).hex()[:missing]
    return Body(_zstd_out.compress(json.dumps(doc).encode()), body.events, body.content_type)


def mean_event_bytes(bodies: list[Body]) -> float:
    """The mean size of an event's JSON over `bodies`."""
    sizes = [event_size(e) for b in bodies
             for e in json.loads(_zstd_in.decompress(b.data, max_output_size=1 << 26))["events"]]
    return sum(sizes) / len(sizes) if sizes else 0.0


def avro_twin(body: Body, schema: Any, schema_id: int) -> Body:
    """The same batch as the gateway's Avro fast path takes it (what the SDKs send with `format="avro"`), with a
    fresh batch_id and fresh event ids, so both bodies can be sent to the same topic and each event found once."""
    doc = json.loads(_zstd_in.decompress(body.data, max_output_size=1 << 26))
    framed = []
    for event in doc["events"]:
        rec = {**event, "event_id": str(uuid.uuid4()), "sent_at": doc["sent_at"], "received_at": None,
               "sdk_name": doc["sdk"]["name"], "sdk_version": doc["sdk"]["version"]}
        buf = io.BytesIO()
        buf.write(header(schema_id))
        fastavro.schemaless_writer(buf, schema, rec)
        framed.append(buf.getvalue())
    out = io.BytesIO()
    fastavro.schemaless_writer(out, BATCH_SCHEMA, {
        "batch_id": str(uuid.uuid4()), "sent_at": doc["sent_at"], "sdk_name": doc["sdk"]["name"],
        "sdk_version": doc["sdk"]["version"], "events": framed})
    return Body(_zstd_out.compress(out.getvalue()), body.events, "application/vnd.headwater.batch+avro")


class SizedWorkload:
    """JSON bodies from `Workload`, padded when `event_bytes` is set (0: as generated)."""

    def __init__(self, workload: Workload, event_bytes: int) -> None:
        self.workload, self.event_bytes = workload, event_bytes

    def bodies(self, count: int) -> list[Body]:
        made = self.workload.bodies("json", count)
        return [pad(b, self.event_bytes) for b in made] if self.event_bytes else made

    def avro(self, bodies: list[Body]) -> list[Body]:
        """The Avro twins of `bodies` (`avro_twin`)."""
        return [avro_twin(b, self.workload.schema, self.workload.schema_id) for b in bodies]
