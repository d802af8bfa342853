"""The durability check: read a topic back to its end and compare the event ids found with those acknowledged.

Our records are Avro with Confluent framing; every event schema starts with `event_id` (schemas/envelope.avsc),
so the id is the first string after the 5-byte frame (the `event_id` header is the fallback). The peer's records
are JSON objects, whose `"event_id":"…"` member is found without parsing the whole record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from common.kafka_read import read_to_end

_JSON_KEY = b'"event_id":"'


def avro_event_id(value: bytes, headers: Iterable[tuple[str, bytes]] | None) -> str | None:
    if len(value) > 6 and value[0] == 0:
        shift = length = 0
        pos = 5
        while pos < len(value):
            byte = value[pos]
            length |= (byte & 0x7F) << shift
            pos += 1
            if not byte & 0x80:
                break
            shift += 7
        length = (length >> 1) ^ -(length & 1)  # zigzag
        if 0 < length <= 64 and pos + length <= len(value):
            return value[pos:pos + length].decode(errors="replace")
    for key, val in headers or ():
        if key == "event_id":
            return val.decode(errors="replace")
    return None


def json_event_id(value: bytes, headers: Iterable[tuple[str, bytes]] | None) -> str | None:
    start = value.find(_JSON_KEY)
    if start < 0:
        return None
    start += len(_JSON_KEY)
    end = value.find(b'"', start)
    return value[start:end].decode(errors="replace") if end > start else None


@dataclass
class Durability:
    acknowledged: int     # events answered 200
    sent: int             # events of every body sent (acknowledged or not)
    found: int            # distinct ids of the sent events found in the topic
    duplicates: int       # records beyond the first for an id
    missing: int          # acknowledged-when-all-acknowledged ids not found (see `exact`)
    foreign: int          # records whose id was never sent (or unreadable)
    exact: bool           # every body was acknowledged, so `missing` is exact; else found >= acknowledged is checked

    @property
    def ok(self) -> bool:
        if self.duplicates or self.foreign:
            return False
        return self.missing == 0 if self.exact else self.found >= self.acknowledged


def read_ids(bootstrap: str, topic: str, *, committed: bool, json_values: bool,
             timeout_s: float = 300.0) -> Counter[str]:
    """Every record's event id, from the beginning to the end offsets seen at the start (common/kafka_read.py)."""
    extract = json_event_id if json_values else avro_event_id
    ids: Counter[str] = Counter()
    for msg in read_to_end(bootstrap, topic, committed=committed, timeout_s=timeout_s):
        raw = msg.headers()
        headers = [(k, v) for k, v in (raw if isinstance(raw, list) else []) if isinstance(v, bytes)]
        ids[extract(msg.value() or b"", headers) or "?"] += 1
    return ids


def check(ids: Counter[str], sent: set[str], acknowledged: int) -> Durability:
    found = sum(1 for i in sent if i in ids)
    duplicates = sum(n - 1 for i, n in ids.items() if n > 1)
    foreign = sum(n for i, n in ids.items() if i not in sent)
    exact = acknowledged == len(sent)
    return Durability(acknowledged, len(sent), found, duplicates, len(sent) - found if exact else 0, foreign, exact)
